"""Requests that delete, sweep or govern say exactly what they mean: a dry run asked of
the sweeps route is a dry run, an unknown field on a destructive route is refused by
name before anything runs, a PUT of the redaction policy carries the whole policy, and
a policy change carries its reason into the audit trail, masked."""

from __future__ import annotations

import pytest

from governance.holds import legal_hold_place
from governance.models import (
    AuditEvent,
    LegalHold,
    RedactionPolicy,
    RetentionPolicy,
    RetentionSweep,
)
from governance.retention.policies import retention_policy_create
from memory.models import Conversation, Message, Observation, Pin, Reflection
from memory.services.pins import pin_create
from tests.governance.builders import ADMIN, conversation_with_tiers, events, whole_policy_body
from tests.memory.factories import ObservationFactory, ReflectionFactory

EMAIL = "maria.lopez@example.com"


def _default_policy(workspace) -> RetentionPolicy:
    return retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="default",
        message_days=30,
        observation_days=60,
        reflection_days=90,
    )


# --- a dry run is a dry run ---------------------------------------------------------------------


def test_a_sweep_asked_as_a_dry_run_deletes_nothing_and_says_so(admin_api, workspace, eager_tasks):
    policy = _default_policy(workspace)
    conversation_with_tiers(workspace, old=3, new=1)

    with eager_tasks():
        response = admin_api.post(
            "/v1/retention/sweeps", {"policyId": policy.pk, "dryRun": True}, format="json"
        )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["dryRun"], body["status"]) == (True, "completed")
    assert body["counts"]["messages"] == 3
    assert Message.objects.count() == 4
    assert not RetentionSweep.objects.filter(dry_run=False).exists()
    assert not events(workspace, "retention_sweep.request")


def test_a_sweep_asked_with_dry_run_false_runs(admin_api, workspace, eager_tasks):
    _default_policy(workspace)
    conversation_with_tiers(workspace, old=3, new=1)

    with eager_tasks():
        response = admin_api.post("/v1/retention/sweeps", {"dryRun": False}, format="json")

    assert response.status_code == 202, response.content
    assert response.json()["dryRun"] is False
    assert Message.objects.count() == 1


@pytest.mark.parametrize("dry_run", ["true", 1, None])
def test_dry_run_is_a_json_boolean(admin_api, workspace, dry_run):
    _default_policy(workspace)
    response = admin_api.post("/v1/retention/sweeps", {"dryRun": dry_run}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "dryRun"
    assert not RetentionSweep.objects.exists()


# --- unknown fields on destructive routes --------------------------------------------------------


@pytest.fixture
def stored(workspace, conversation):
    """One of everything a destructive route could remove, in the acme workspace."""
    message = Message.objects.create(
        conversation=conversation, seq=1, role="user", content="Contract term 4.2", token_count=4
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=1)
    return {
        "conversation": conversation,
        "observation": ObservationFactory(conversation=conversation),
        "reflection": ReflectionFactory(conversation=conversation),
        "pin": pin_create(
            conversation=conversation, actor=ADMIN, message_id=message.pk, reason="keep"
        ),
        "hold": legal_hold_place(
            workspace=workspace, actor=ADMIN, reason="litigation", end_user_id="someone-else"
        ),
        "policy": _default_policy(workspace),
    }


def _counts() -> dict[str, int]:
    return {
        "conversations": Conversation.objects.count(),
        "messages": Message.objects.count(),
        "observations": Observation.objects.count(),
        "reflections": Reflection.objects.count(),
        "pins": Pin.objects.count(),
        "active holds": LegalHold.objects.filter(released_at__isnull=True).count(),
        "policies": RetentionPolicy.objects.count(),
        "sweeps": RetentionSweep.objects.count(),
        "events": AuditEvent.objects.count(),
    }


DESTRUCTIVE = [
    ("post", "/v1/retention/sweeps", {"dryrun": True}, "dryrun"),
    ("post", "/v1/retention/sweeps", {"policyId": "{policy}", "dry_run": True}, "dry_run"),
    ("post", "/v1/retention/dry-run", {"policy": "{policy}"}, "policy"),
    ("post", "/v1/erasure-requests", {"userId": "dana", "reason": "x", "force": 1}, "force"),
    ("delete", "/v1/conversations/{conversation}", {"reason": "x", "hard": True}, "hard"),
    (
        "delete",
        "/v1/conversations/{conversation}/observations/{observation}",
        {"reason": "x", "purge": True},
        "purge",
    ),
    (
        "delete",
        "/v1/conversations/{conversation}/reflections/{reflection}",
        {"reasons": "typo"},
        "reasons",
    ),
    ("delete", "/v1/conversations/{conversation}/pins/{pin}", {"reason": "x", "all": 1}, "all"),
    ("post", "/v1/legal-holds/{hold}/release", {"reason": "x", "everything": True}, "everything"),
    ("delete", "/v1/retention/policies/{policy}", {"reason": "x", "cascade": True}, "cascade"),
    ("patch", "/v1/retention/policies/{policy}", {"messagesDays": 1}, "messagesDays"),
]


@pytest.mark.parametrize(("method", "path", "body", "unknown"), DESTRUCTIVE)
def test_a_destructive_route_refuses_an_unknown_field_by_name_and_changes_nothing(
    admin_api, stored, method, path, body, unknown
):
    ids = {name: str(row.pk) for name, row in stored.items()}
    body = {k: int(ids["policy"]) if v == "{policy}" else v for k, v in body.items()}
    before = _counts()

    response = getattr(admin_api, method)(path.format(**ids), body, format="json")

    assert response.status_code == 400, response.content
    answer = response.json()
    assert (answer["code"], answer["field"]) == ("invalid_request", unknown)
    assert unknown in answer["message"]
    assert _counts() == before


def test_the_known_fields_of_a_destructive_route_still_work(admin_api, stored):
    ids = {name: str(row.pk) for name, row in stored.items()}
    path = "/v1/conversations/{conversation}/observations/{observation}".format(**ids)
    assert admin_api.delete(path, {"reason": "duplicate"}, format="json").status_code == 204
    released = admin_api.post(
        f"/v1/legal-holds/{ids['hold']}/release", {"reason": "settled"}, format="json"
    )
    assert released.status_code == 200


def test_the_document_says_destructive_bodies_take_no_other_field(api):
    document = api.get("/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    schemas = document["components"]["schemas"]
    for name in ("RetentionSweepInRequest", "ReasonInRequest", "ErasureRequestInRequest"):
        assert schemas[name]["additionalProperties"] is False, name


# --- PUT carries the whole redaction policy ----------------------------------------------------


def test_a_put_of_part_of_the_policy_is_refused_naming_what_is_missing(admin_api, workspace):
    admin_api.patch("/v1/redaction/policy", {"keepOriginals": True}, format="json")
    version = RedactionPolicy.objects.get(workspace=workspace).version

    response = admin_api.put("/v1/redaction/policy", {}, format="json")
    partial = admin_api.put("/v1/redaction/policy", {"redactAtIngest": True}, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_policy"
    assert "scoreThreshold" in response.json()["message"]
    assert "PATCH" in response.json()["message"]
    assert partial.status_code == 400
    assert "redactAtIngest" not in partial.json()["message"].partition("missing")[2]
    policy = RedactionPolicy.objects.get(workspace=workspace)
    assert (policy.version, policy.keep_originals) == (version, True)


def test_a_put_of_the_whole_policy_replaces_it(admin_api, workspace):
    admin_api.patch("/v1/redaction/policy", {"keepOriginals": True}, format="json")

    response = admin_api.put(
        "/v1/redaction/policy", whole_policy_body(redactAtIngest=True), format="json"
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["keepOriginals"], body["redactAtIngest"], body["version"]) == (False, True, 3)


def test_the_document_says_a_put_needs_every_policy_field(api):
    document = api.get("/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    put = document["paths"]["/v1/redaction/policy"]["put"]["requestBody"]
    name = put["content"]["application/json"]["schema"]["$ref"].rpartition("/")[2]
    assert set(document["components"]["schemas"][name]["required"]) == set(whole_policy_body())


# --- policy changes carry a reason ---------------------------------------------------------------


def test_a_redaction_policy_change_keeps_its_reason_masked(admin_api, workspace):
    response = admin_api.patch(
        "/v1/redaction/policy",
        {"scoreThreshold": 0.6, "reason": f"Fewer false positives, asked by {EMAIL}"},
        format="json",
    )

    assert response.status_code == 200, response.content
    [event] = events(workspace, "redaction_policy.update")
    assert event.reason == "Fewer false positives, asked by <EMAIL_ADDRESS>"


def test_a_redaction_policy_put_takes_a_reason_too(admin_api, workspace):
    response = admin_api.put(
        "/v1/redaction/policy",
        whole_policy_body(keepOriginals=True, reason="audit"),
        format="json",
    )
    assert response.status_code == 200, response.content
    assert events(workspace, "redaction_policy.update")[-1].reason == "audit"


def test_a_retention_policy_change_keeps_its_reason_masked(admin_api, workspace):
    policy = _default_policy(workspace)

    created = admin_api.post(
        "/v1/retention/policies",
        {"name": "eu", "conversationTag": "eu", "messageDays": 30, "reason": f"DPA of {EMAIL}"},
        format="json",
    )
    changed = admin_api.patch(
        f"/v1/retention/policies/{policy.pk}",
        {"messageDays": 14, "reason": f"Asked by {EMAIL}"},
        format="json",
    )
    deleted = admin_api.delete(
        f"/v1/retention/policies/{created.json()['id']}",
        {"reason": f"Per {EMAIL}"},
        format="json",
    )

    assert (created.status_code, changed.status_code, deleted.status_code) == (201, 200, 204)
    [create] = [e for e in events(workspace, "retention_policy.create") if e.actor_type != "system"]
    assert create.reason == "DPA of <EMAIL_ADDRESS>"
    assert events(workspace, "retention_policy.update")[-1].reason == "Asked by <EMAIL_ADDRESS>"
    assert events(workspace, "retention_policy.delete")[-1].reason == "Per <EMAIL_ADDRESS>"
