"""Work a worker does for someone is audited as theirs, with the role they had when they
asked (kept beside the request: their role may change before the worker runs); work
nobody asked for (beat, the pipeline) and commands act as the system, role "system"."""

from __future__ import annotations

from core.actors import SYSTEM_ACTOR, Actor, command_actor
from governance.erasure import erasure_request_create
from governance.models import AuditEvent
from governance.redaction.review import rescan_run_request
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_schedule
from tenancy.models import Membership
from tests.dashboard.factories import MembershipFactory
from tests.governance.builders import conversation_with_tiers

COMPLIANCE_OFFICER = Actor(type="user", id="7", role="compliance")


def _roles(*actions: str) -> set[tuple[str, str, str]]:
    return set(
        AuditEvent.objects.filter(action__in=actions).values_list(
            "action", "actor_id", "actor_role"
        )
    )


def test_a_label_is_an_identity_and_the_role_comes_with_it():
    assert Actor.from_label("user:7", role="compliance") == COMPLIANCE_OFFICER
    assert Actor.from_label(SYSTEM_ACTOR.label) == SYSTEM_ACTOR
    assert Actor.from_label("") == SYSTEM_ACTOR
    assert SYSTEM_ACTOR.role == "system"
    assert command_actor("create_api_key").role == "system"


def test_a_sweep_someone_asked_for_deletes_in_their_role(workspace, eager_tasks):
    conversation_with_tiers(workspace)
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=30, reason="DPA"
    )

    with eager_tasks():
        sweep = retention_sweep_request(workspace=workspace, actor=COMPLIANCE_OFFICER)

    assert sweep.triggered_by_role == "compliance"
    assert _roles("retention.sweep", "retention.delete") == {
        ("retention.sweep", "7", "compliance"),
        ("retention.delete", "7", "compliance"),
    }


def test_a_scheduled_sweep_acts_as_the_system(workspace, eager_tasks):
    conversation_with_tiers(workspace)
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=30, reason="DPA"
    )

    with eager_tasks():
        retention_schedule()

    assert _roles("retention.sweep", "retention.delete") == {
        ("retention.sweep", "memdesk", "system"),
        ("retention.delete", "memdesk", "system"),
    }


def test_an_erasure_is_carried_out_in_the_requesters_role(workspace, eager_tasks):
    conversation_with_tiers(workspace, user_id="dana")

    with eager_tasks():
        erasure_request_create(
            workspace=workspace, actor=COMPLIANCE_OFFICER, end_user_id="dana", reason="GDPR"
        )

    events = AuditEvent.objects.filter(action__startswith="erasure.")
    assert {e.action for e in events} >= {"erasure.request", "erasure.complete"}
    assert {(e.actor_id, e.actor_role) for e in events} == {("7", "compliance")}


def test_a_rescan_runs_in_the_requesters_role_even_after_it_changed(workspace, eager_tasks):
    member: Membership = MembershipFactory(workspace=workspace, role="compliance")
    requester = Actor(type="user", id=str(member.user_id), role=member.role)
    with eager_tasks():
        rescan_run_request(workspace=workspace, actor=requester, reason="new policy")
        Membership.objects.filter(pk=member.pk).update(role="viewer")

    [event] = AuditEvent.objects.filter(action="redaction.rescan")
    assert (event.actor_id, event.actor_role) == (str(member.user_id), "compliance")
