"""Staged approval (issue 27, item 3): under the workspace's (or a tag's) policy a new
reflection waits for a person; a waiting one is not served and what it would replace is;
approving serves it, editing first serves the person's words, a rejected one never is;
every decision needs a reason and is audited."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.models import AuditEvent
from memory.approval.queue import approval_figures
from memory.approval.services import (
    observation_approve,
    observation_reject,
    reflection_approve,
    reflection_reject,
)
from memory.models import Observation, Reflection, ReflectionVersion, ReflectorRun
from memory.pipeline.scheduling import reflector_schedule_if_due
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_update
from memory.services.workspace_settings import workspace_settings_update
from tests.dashboard.factories import observe, reflect
from tests.governance.builders import ADMIN
from tests.memory.factories import ObservationFactory
from tests.memory.fake_engines import CondensesEverything, ObservesOneLine

FRIDAY = datetime(2026, 12, 11, tzinfo=timezone.get_current_timezone())


@pytest.fixture
def person(member) -> Actor:
    return Actor(type="user", id=str(member("reviewer").pk), role="reviewer")


def _policy(workspace, approval: str = "off", by_tag: dict | None = None) -> None:
    workspace_settings_update(
        workspace=workspace,
        actor=ADMIN,
        reason="staged approval",
        approval=approval,
        approval_by_tag=by_tag or {},
    )


def _notes(conversation, *texts: str, priority: str = "medium") -> list[Observation]:
    return [ObservationFactory(conversation=conversation, text=t, priority=priority) for t in texts]


def _waiting_reflection(workspace, conversation, fake_engine) -> Reflection:
    """One reflection of two observations that the ``reflections`` mode holds back."""
    _policy(workspace, "reflections")
    fake_engine(CondensesEverything())
    _notes(conversation, "User's parcel is late.", "User wants a refund.")
    reflect(conversation)
    return Reflection.objects.get(conversation=conversation)


def _context(api, conversation) -> dict:
    return api.get(f"/v1/conversations/{conversation.pk}/context").json()


@pytest.mark.django_db
def test_a_waiting_reflection_is_not_served_and_its_sources_are_until_approved(
    api, workspace, conversation, person, fake_engine
):
    _policy(workspace, "reflections")
    fake_engine(CondensesEverything())
    notes = _notes(conversation, "User's parcel is late.", "User wants a refund.")

    reflect(conversation)

    [waiting] = Reflection.objects.filter(conversation=conversation)
    assert waiting.status == "waiting"
    assert waiting.waits_for == ["Every new reflection waits for approval here."]
    served = _context(api, conversation)
    assert served["reflections"] == []
    assert {o["id"] for o in served["observations"]} == {str(n.pk) for n in notes}

    with pytest.raises(MemdeskError, match="A reason is required"):
        reflection_approve(reflection=waiting, actor=person, reason="  ")
    approved = reflection_approve(reflection=waiting, actor=person, reason="reads right")

    served = _context(api, conversation)
    assert [r["text"] for r in served["reflections"]] == ["Customer waits for a parcel refund."]
    assert served["observations"] == []
    assert (approved.decided_by, approved.status) == (person.label, "active")
    event = AuditEvent.objects.get(action="reflection.approve", target_id=str(waiting.pk))
    assert event.reason == "reads right" and event.after["waitedSeconds"] >= 0
    with pytest.raises(MemdeskError, match="not waiting for approval"):
        reflection_reject(reflection=approved, actor=person, reason="changed my mind")


@pytest.mark.django_db
def test_a_rejected_reflection_is_never_served_nor_made_again(
    api, workspace, conversation, person, fake_engine
):
    _policy(workspace, "reflections")
    engine = fake_engine(CondensesEverything())
    notes = _notes(conversation, "User's parcel is late.", "User wants a refund.")
    reflect(conversation)
    waiting = Reflection.objects.get(conversation=conversation)

    reflection_reject(reflection=waiting, actor=person, reason="merges two issues")
    _notes(conversation, "User called again on Monday.")
    reflect(conversation)

    assert engine.seen == ["User called again on Monday."]  # the rejected one's sources stay
    rejected = Reflection.objects.get(pk=waiting.pk)
    assert rejected.status == "rejected"
    served = _context(api, conversation)
    assert waiting.text not in {r["text"] for r in served["reflections"]}
    assert {str(n.pk) for n in notes} <= {o["id"] for o in served["observations"]}
    assert AuditEvent.objects.get(action="reflection.reject").reason == "merges two issues"


@pytest.mark.django_db
def test_a_decisions_reason_is_kept_masked_as_a_corrections_is(
    workspace, conversation, person, fake_engine
):
    waiting = _waiting_reflection(workspace, conversation, fake_engine)

    reflection_approve(
        reflection=waiting,
        actor=person,
        reason="Checked with dana@example.com",
        text="Customer wants a refund for the late parcel.",
    )

    approve = AuditEvent.objects.get(action="reflection.approve")
    edit = AuditEvent.objects.get(action="reflection.edit")
    assert approve.reason == edit.reason == "Checked with <EMAIL_ADDRESS>"
    [kept] = ReflectionVersion.objects.filter(reflection_id=waiting.pk)
    assert kept.reason == "Checked with <EMAIL_ADDRESS>"


@pytest.mark.django_db
def test_edit_and_approve_serves_the_persons_words(
    api, workspace, conversation, person, fake_engine
):
    waiting = _waiting_reflection(workspace, conversation, fake_engine)

    reflection_approve(
        reflection=waiting,
        actor=person,
        reason="says what she asked",
        text="Customer wants a refund for the late parcel.",
    )

    [served] = _context(api, conversation)["reflections"]
    assert served["text"] == "Customer wants a refund for the late parcel."
    assert served["version"] == 2 and served["origin"]["personsWords"] is True


@pytest.mark.django_db
def test_flagged_holds_only_what_the_checks_flag(api, workspace, conversation, fake_engine):
    _policy(workspace, "flagged")
    fake_engine(CondensesEverything("Customer waits for a parcel."))
    ObservationFactory(
        conversation=conversation,
        text="User's parcel ORD-88123 must arrive before the trip on Friday.",
        priority="high",
        referenced_at=FRIDAY,
    )
    reflect(conversation)

    [flagged] = Reflection.objects.filter(conversation=conversation)
    assert flagged.status == "waiting"
    reasons = " ".join(flagged.waits_for)
    assert "drops what a high-priority source held: ORD-88123." in reasons
    assert "drops a date its sources held: Friday, 2026-12-11" in reasons

    other = conversation.__class__.objects.create(workspace=workspace, user_id="ola")
    fake_engine(CondensesEverything("User's parcel is late and a refund is wanted."))
    ObservationFactory(conversation=other, text="User's parcel is late.")
    ObservationFactory(conversation=other, text="User wants a refund.")
    reflect(other)
    assert Reflection.objects.get(conversation=other).status == "active"


@pytest.mark.django_db
def test_a_tag_holds_its_conversations_back_and_no_other(workspace, conversation, fake_engine):
    _policy(workspace, "off", {"vip": "reflections"})
    fake_engine(CondensesEverything())
    vip = conversation.__class__.objects.create(workspace=workspace, user_id="v", tags=["vip"])
    for c in (conversation, vip):
        _notes(c, "User's parcel is late.", "User wants a refund.")
        reflect(c)

    assert Reflection.objects.get(conversation=conversation).status == "active"
    assert Reflection.objects.get(conversation=vip).status == "waiting"


@pytest.mark.django_db
def test_a_rederived_reflection_waits_and_the_stale_one_serves_its_sources_meanwhile(
    api, workspace, conversation, person, fake_engine
):
    fake_engine(CondensesEverything())
    notes = _notes(conversation, "User's parcel is late.", "User wants a refund.")
    reflect(conversation)
    first = Reflection.objects.get(conversation=conversation)
    _policy(workspace, "reflections")
    observation_update(observation=notes[0], actor=ADMIN, reason="tracking", priority="high")

    reflect(conversation)  # the correction run: its result waits

    second = Reflection.objects.exclude(pk=first.pk).get(conversation=conversation)
    first.refresh_from_db()
    assert (second.status, first.status, first.superseded_by_id) == ("waiting", "stale", second.pk)
    served = _context(api, conversation)
    assert served["reflections"] == [] and len(served["observations"]) == 2
    assert reflector_schedule_if_due(conversation=conversation) is None  # nothing to redo
    assert not ReflectorRun.objects.filter(status="pending").exists()

    reflection_approve(reflection=second, actor=person, reason="fine")

    first.refresh_from_db()
    served = _context(api, conversation)
    assert first.status == "superseded"
    assert [r["id"] for r in served["reflections"]] == [str(second.pk)]
    assert served["observations"] == []


@pytest.mark.django_db
def test_the_metrics_say_how_long_reflections_waited(workspace, conversation, person, fake_engine):
    waiting = _waiting_reflection(workspace, conversation, fake_engine)
    Reflection.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(hours=3))

    before = approval_figures(workspace_id=workspace.pk)
    reflection_approve(reflection=waiting, actor=person, reason="ok")
    after = approval_figures(workspace_id=workspace.pk)

    assert before.waiting == 1 and before.oldest_waiting_seconds >= 3 * 3600
    assert (after.waiting, after.approved, after.rejected) == (0, 1, 0)
    assert 3 * 3600 <= after.latency_p50_seconds < 3 * 3600 + 60


def _said(conversation, *texts: str) -> None:
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=t) for t in texts]
    )


@pytest.mark.django_db
def test_a_flagged_observation_waits_and_its_messages_are_served_word_for_word(
    api, workspace, conversation, person, fake_engine
):
    _policy(workspace, "flagged")
    fake_engine(ObservesOneLine("Customer asked for a gold membership upgrade."))
    _said(conversation, "My parcel to the lake house is two weeks late.", "Any news?")

    observe(conversation)

    [waiting] = Observation.objects.filter(conversation=conversation)
    assert waiting.status == "waiting" and "Only" in waiting.waits_for[0]
    served = _context(api, conversation)
    assert served["observations"] == []
    # The messages it was written from; the run found nothing else worth a note.
    assert [m["content"] for m in served["recentMessages"]] == [
        "My parcel to the lake house is two weeks late."
    ]

    observation_approve(observation=waiting, actor=person, reason="fine after all")

    served = _context(api, conversation)
    assert [o["id"] for o in served["observations"]] == [str(waiting.pk)]
    assert [m["content"] for m in served["recentMessages"]] == []


@pytest.mark.django_db
def test_a_rejected_observation_leaves_its_messages_served(
    api, workspace, conversation, person, fake_engine
):
    _policy(workspace, "flagged")
    fake_engine(ObservesOneLine("Customer asked for a gold membership upgrade."))
    _said(conversation, "My parcel to the lake house is two weeks late.")
    observe(conversation)
    waiting = Observation.objects.get(conversation=conversation)

    observation_reject(observation=waiting, actor=person, reason="never said that")

    served = _context(api, conversation)
    assert served["observations"] == []
    assert [m["content"] for m in served["recentMessages"]] == [
        "My parcel to the lake house is two weeks late."
    ]
    event = AuditEvent.objects.get(action="observation.reject")
    assert event.reason == "never said that" and event.target_id == str(waiting.pk)


@pytest.mark.django_db
def test_a_well_grounded_observation_is_served_at_once_under_flagged(
    api, workspace, conversation, fake_engine
):
    _policy(workspace, "flagged")
    fake_engine(ObservesOneLine("User's parcel to the lake house is two weeks late."))
    _said(conversation, "My parcel to the lake house is two weeks late.")

    observe(conversation)

    assert Observation.objects.get(conversation=conversation).status == "active"
    assert len(_context(api, conversation)["observations"]) == 1
