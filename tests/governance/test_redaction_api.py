"""Redaction over the API: preview, the policy (read by any key, changed by admin keys),
the review queue, and restricted originals (admin keys, every read audited)."""

from __future__ import annotations

import hashlib

import pytest
from django.test import override_settings

from governance.models import AuditEvent, RedactionFinding, RedactionPolicy, RestrictedOriginal
from governance.redaction.policy import redaction_policy_snapshot
from memory.models import Conversation, Message
from memory.pipeline.reflector import observations_for_reflection
from tests.governance.builders import set_policy, whole_policy_body
from tests.memory.factories import ObservationFactory

EMAIL = "dana.whitfield@example.com"
PHONE = "(977) 625-2661"


def _pending_findings(conversation: Conversation, count: int = 1) -> list[RedactionFinding]:
    for n in range(count):
        ObservationFactory(conversation=conversation, text=f"User said {PHONE} on call {n}.")
    observations_for_reflection(conversation=conversation)
    return list(RedactionFinding.objects.filter(status="pending_review").order_by("id"))


# --- preview --------------------------------------------------------------------------------


def test_preview_shows_findings_and_the_redacted_text_and_stores_nothing(api):
    text = f"Mail {EMAIL} or call {PHONE}."

    response = api.post("/v1/redaction/preview", {"text": text}, format="json")

    assert response.status_code == 200
    body = response.json()
    # An agent key is told each value's type (a compliance key, its pseudonym:
    # tests/governance/test_pseudonyms.py).
    assert body["redactedText"] == "Mail <EMAIL_ADDRESS> or call <PHONE_NUMBER>."
    found = {
        (f["entityType"], text[f["start"] : f["end"]], f["status"], f["pseudonym"])
        for f in body["findings"]
    }
    assert found == {
        ("EMAIL_ADDRESS", EMAIL, "applied", None),
        ("PHONE_NUMBER", PHONE, "pending_review", None),
    }
    assert body["policyVersion"] == 1
    assert not RedactionFinding.objects.exists() and not RedactionPolicy.objects.exists()
    assert not AuditEvent.objects.filter(action="redaction.preview").exists()


def test_preview_follows_the_workspace_policy(api, workspace):
    set_policy(workspace, operators={"EMAIL_ADDRESS": "mask"}, allow_list=[PHONE])

    body = api.post("/v1/redaction/preview", {"text": f"{EMAIL} {PHONE}"}, format="json").json()

    assert body["redactedText"] == f"{'*' * len(EMAIL)} {PHONE}"


@pytest.mark.parametrize("body", [{}, {"text": 3}, {"text": ["a"]}])
def test_preview_needs_a_text(api, body):
    response = api.post("/v1/redaction/preview", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "text"


# --- the policy -----------------------------------------------------------------------------


def test_any_key_reads_the_policy_defaults_but_not_the_deny_list(api, admin_api, workspace):
    set_policy(workspace, deny_list=["Project Bluebird"])

    agent_view = api.get("/v1/redaction/policy").json()
    admin_view = admin_api.get("/v1/redaction/policy").json()

    assert agent_view["denyListCount"] == 1 and "denyList" not in agent_view
    assert admin_view["denyList"] == ["Project Bluebird"]
    assert agent_view["scoreThreshold"] == 0.5 and agent_view["defaultOperator"] == "pseudonym"
    assert agent_view["agentsSeeReidentified"] is False
    assert "EMAIL_ADDRESS" in agent_view["effectiveEntities"]


def test_reading_creates_the_default_policy_once(api, workspace):
    api.get("/v1/redaction/policy")
    api.get("/v1/redaction/policy")

    assert RedactionPolicy.objects.filter(workspace=workspace).count() == 1
    assert AuditEvent.objects.filter(action="redaction_policy.create").count() == 1


@pytest.mark.parametrize("method", ["patch", "put"])
def test_an_agent_key_cannot_change_the_policy(api, method):
    response = getattr(api, method)("/v1/redaction/policy", {"scoreThreshold": 0.9}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert "needs a compliance API key" in response.json()["message"]
    assert not AuditEvent.objects.filter(action="redaction_policy.update").exists()


def test_an_admin_changes_the_policy_audited_with_a_new_version(admin_api, workspace):
    response = admin_api.patch(
        "/v1/redaction/policy",
        {
            "scoreThreshold": 0.6,
            "operators": {"PHONE_NUMBER": "mask"},
            "allowList": ["Acme Support"],
            "customRecognizers": [
                {
                    "name": "order",
                    "entity": "ORDER_ID",
                    "pattern": r"\b\d{10}\b",
                    "score": 0.8,
                    "context": ["order"],
                }
            ],
            "entities": ["EMAIL_ADDRESS", "ORDER_ID"],
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["version"], body["scoreThreshold"]) == (2, 0.6)
    assert body["effectiveEntities"] == ["EMAIL_ADDRESS", "ORDER_ID"]
    event = AuditEvent.objects.get(action="redaction_policy.update")
    assert event.actor_type == "api_key" and event.actor_role == "admin"
    assert event.before["scoreThreshold"] == 0.5 and event.after["scoreThreshold"] == 0.6
    assert event.after["version"] == 2
    # List values are digests in the trail: an audit event can never be erased.
    assert event.after["allowList"]["count"] == 1
    assert "Acme Support" not in str(event.after)


def test_put_replaces_the_whole_policy(admin_api):
    admin_api.patch(
        "/v1/redaction/policy", {"scoreThreshold": 0.6, "keepOriginals": True}, format="json"
    )

    body = admin_api.put(
        "/v1/redaction/policy", whole_policy_body(redactAtIngest=True), format="json"
    ).json()

    assert (body["scoreThreshold"], body["keepOriginals"], body["redactAtIngest"]) == (
        0.5,
        False,
        True,
    )
    assert body["version"] == 3


def test_a_change_that_changes_nothing_is_not_a_new_version(admin_api):
    admin_api.patch("/v1/redaction/policy", {"scoreThreshold": 0.6}, format="json")
    body = admin_api.patch("/v1/redaction/policy", {"scoreThreshold": 0.6}, format="json").json()

    assert body["version"] == 2
    assert AuditEvent.objects.filter(action="redaction_policy.update").count() == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"scoreThreshold": 1.5}, "scoreThreshold"),
        ({"scoreThreshold": "high"}, "scoreThreshold"),
        ({"defaultOperator": "shred"}, "defaultOperator"),
        ({"operators": {"EMAIL_ADDRESS": "shred"}}, "operators.EMAIL_ADDRESS"),
        ({"entities": ["EMAIL"]}, "entities"),
        ({"entities": "EMAIL_ADDRESS"}, "entities"),
        ({"redactAtIngest": "yes"}, "redactAtIngest"),
        ({"allowList": [""]}, "allowList"),
        ({"reviewMinScore": 0.8, "reviewMaxScore": 0.6}, "reviewMinScore"),
        (
            {"customRecognizers": [{"name": "x", "entity": "X_ID", "pattern": "(unclosed"}]},
            "customRecognizers[0].pattern",
        ),
        (
            {"customRecognizers": [{"name": "x", "entity": "lower", "pattern": "x"}]},
            "customRecognizers[0].entity",
        ),
        # A number is not taken as its text.
        (
            {"customRecognizers": [{"name": 0, "entity": "X_ID", "pattern": "x"}]},
            "customRecognizers[0].name",
        ),
        ({"entities": [7]}, "entities[0]"),
        ({"denyList": [42]}, "denyList[0]"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_policy_is_refused_with_the_field(admin_api, body, field):
    response = admin_api.patch("/v1/redaction/policy", body, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not RedactionPolicy.objects.filter(version__gt=1).exists()


# --- the review queue -------------------------------------------------------------------------


def test_the_review_queue_pages_newest_first(admin_api, conversation):
    findings = _pending_findings(conversation, 3)

    first = admin_api.get("/v1/redaction/findings?status=pending_review&limit=2").json()
    second = admin_api.get(
        f"/v1/redaction/findings?status=pending_review&limit=2&cursor={first['next_cursor']}"
    ).json()

    ids = [f["id"] for f in first["findings"] + second["findings"]]
    assert ids == [f.pk for f in reversed(findings)]
    assert second["next_cursor"] is None
    row = first["findings"][0]
    assert (row["entityType"], row["status"], row["targetType"]) == (
        "PHONE_NUMBER",
        "pending_review",
        "observation",
    )
    assert PHONE not in str(first)


def test_the_review_queue_is_for_admin_keys(api):
    response = api.get("/v1/redaction/findings")
    assert response.status_code == 403


def test_the_queue_refuses_an_unknown_status(admin_api):
    response = admin_api.get("/v1/redaction/findings?status=maybe")
    assert (response.status_code, response.json()["field"]) == (400, "status")


def test_approve_and_dismiss_over_the_api(admin_api, conversation):
    first, second = _pending_findings(conversation, 2)

    approved = admin_api.post(
        f"/v1/redaction/findings/{first.pk}/approve", {"reason": "it is a phone"}, format="json"
    )
    dismissed = admin_api.post(
        f"/v1/redaction/findings/{second.pk}/dismiss", {"addToAllowList": True}, format="json"
    )

    assert approved.status_code == 200 and approved.json()["status"] == "approved"
    assert dismissed.status_code == 200 and dismissed.json()["status"] == "dismissed"
    assert RedactionPolicy.objects.get().allow_list == [PHONE]
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"redaction_finding.approve", "redaction_finding.dismiss"} <= actions
    again = admin_api.post(f"/v1/redaction/findings/{first.pk}/approve", {}, format="json")
    assert (again.status_code, again.json()["code"]) == (409, "finding_not_pending")


def test_another_workspace_cannot_see_or_decide_a_finding(
    make_client, other_workspace, conversation
):
    [finding] = _pending_findings(conversation)
    stranger = make_client(other_workspace, scope="admin")

    assert stranger.get("/v1/redaction/findings").json()["findings"] == []
    response = stranger.post(f"/v1/redaction/findings/{finding.pk}/approve", {}, format="json")
    assert response.status_code == 404
    assert RedactionFinding.objects.get(pk=finding.pk).status == "pending_review"


def test_an_unknown_finding_id_is_a_clear_error(admin_api):
    assert admin_api.post("/v1/redaction/findings/x/approve", {}, format="json").status_code == 400
    assert admin_api.post("/v1/redaction/findings/99/dismiss", {}, format="json").status_code == 404


# --- restricted originals -----------------------------------------------------------------------


@pytest.fixture
def redacted_message(api, workspace, conversation) -> Message:
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)
    response = api.post(
        f"/v1/conversations/{conversation.pk}/messages",
        {"role": "user", "content": f"My email is {EMAIL}"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["content"] == "My email is <EMAIL_ADDRESS_1>"
    return Message.objects.get(pk=response.json()["id"])


def test_an_admin_reads_a_restricted_original_and_the_read_is_audited(admin_api, redacted_message):
    response = admin_api.get(f"/v1/redaction/originals/message/{redacted_message.pk}?reason=DSAR-4")

    assert response.status_code == 200
    assert response.json()["text"] == f"My email is {EMAIL}"
    event = AuditEvent.objects.get(action="restricted_original.read")
    assert (event.target_type, event.target_id) == ("message", str(redacted_message.pk))
    assert event.actor_role == "admin" and EMAIL not in str(event.after)
    assert event.reason == "DSAR-4"


def test_reading_a_restricted_original_needs_a_reason(admin_api, redacted_message):
    response = admin_api.get(f"/v1/redaction/originals/message/{redacted_message.pk}")

    assert (response.status_code, response.json()["code"]) == (400, "reason_required")
    assert EMAIL not in response.content.decode()
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_an_agent_key_cannot_read_a_restricted_original(api, redacted_message):
    response = api.get(f"/v1/redaction/originals/message/{redacted_message.pk}")

    assert response.status_code == 403
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_originals_are_scoped_to_the_workspace(make_client, other_workspace, redacted_message):
    stranger = make_client(other_workspace, scope="admin")
    response = stranger.get(f"/v1/redaction/originals/message/{redacted_message.pk}?reason=DSAR-4")
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        ("/v1/redaction/originals/message/not-a-uuid", 400, "invalid_id"),
        (
            "/v1/redaction/originals/ticket/8f1c3a52-3f0e-4d7e-9a59-000000000000",
            400,
            "invalid_target_type",
        ),
        (
            "/v1/redaction/originals/message/8f1c3a52-3f0e-4d7e-9a59-000000000000?reason=x",
            404,
            "not_found",
        ),
    ],
)
def test_bad_original_requests(admin_api, path, status, error):
    response = admin_api.get(path)
    assert (response.status_code, response.json()["code"]) == (status, error)


def test_a_destroyed_original_cannot_be_read(admin_api, api, workspace, conversation):
    set_policy(workspace, redact_at_ingest=True, keep_originals=False)
    message_id = api.post(
        f"/v1/conversations/{conversation.pk}/messages",
        {"role": "user", "content": f"My email is {EMAIL}"},
        format="json",
    ).json()["id"]

    assert (
        admin_api.get(f"/v1/redaction/originals/message/{message_id}?reason=x").status_code == 404
    )
    assert not RestrictedOriginal.objects.exists()


# --- the OpenAPI document ------------------------------------------------------------------------


def test_every_redaction_response_matches_its_documented_schema(
    api, admin_api, workspace, conversation, redacted_message
):
    import json

    from referencing import Registry
    from referencing.jsonschema import DRAFT202012

    from tests.openapi_document import DOCUMENT_URI, OPENAPI_JSON, OpenApi, as_json_schema

    document = json.loads(api.get("/v1/schema/", HTTP_ACCEPT=OPENAPI_JSON).content)
    resource = DRAFT202012.create_resource(as_json_schema(document))
    openapi = OpenApi(document, Registry().with_resource(DOCUMENT_URI, resource))
    first, second = _pending_findings(conversation, 2)
    finding = "/v1/redaction/findings/{finding_id}"
    original = "/v1/redaction/originals/{target_type}/{target_id}"
    calls = [
        ("get", "/v1/redaction/policy", api.get("/v1/redaction/policy")),
        ("get", "/v1/redaction/policy", admin_api.get("/v1/redaction/policy")),
        (
            "patch",
            "/v1/redaction/policy",
            admin_api.patch("/v1/redaction/policy", {"scoreThreshold": 0.55}, format="json"),
        ),
        ("patch", "/v1/redaction/policy", api.patch("/v1/redaction/policy", {}, format="json")),
        (
            "patch",
            "/v1/redaction/policy",
            admin_api.patch("/v1/redaction/policy", {"scoreThreshold": 2}, format="json"),
        ),
        (
            "put",
            "/v1/redaction/policy",
            admin_api.put(
                "/v1/redaction/policy",
                whole_policy_body(redactAtIngest=True, keepOriginals=True),
                format="json",
            ),
        ),
        (
            "post",
            "/v1/redaction/preview",
            api.post("/v1/redaction/preview", {"text": f"Mail {EMAIL}"}, format="json"),
        ),
        (
            "post",
            "/v1/redaction/preview",
            admin_api.post("/v1/redaction/preview", {"text": f"Mail {EMAIL}"}, format="json"),
        ),
        ("post", "/v1/redaction/preview", api.post("/v1/redaction/preview", {}, format="json")),
        (
            "get",
            "/v1/redaction/findings",
            admin_api.get("/v1/redaction/findings?status=pending_review"),
        ),
        ("get", "/v1/redaction/findings", api.get("/v1/redaction/findings")),
        (
            "post",
            f"{finding}/approve",
            admin_api.post(f"/v1/redaction/findings/{first.pk}/approve", {}, format="json"),
        ),
        (
            "post",
            f"{finding}/approve",
            admin_api.post(f"/v1/redaction/findings/{first.pk}/approve", {}, format="json"),
        ),
        (
            "post",
            f"{finding}/dismiss",
            admin_api.post(
                f"/v1/redaction/findings/{second.pk}/dismiss",
                {"addToAllowList": True},
                format="json",
            ),
        ),
        (
            "post",
            f"{finding}/dismiss",
            admin_api.post("/v1/redaction/findings/999/dismiss", {}, format="json"),
        ),
        (
            "get",
            original,
            admin_api.get(f"/v1/redaction/originals/message/{redacted_message.pk}?reason=DSAR-4"),
        ),
        ("get", original, api.get(f"/v1/redaction/originals/message/{redacted_message.pk}")),
        ("get", original, admin_api.get("/v1/redaction/originals/message/x")),
    ]
    reveal = "/v1/redaction/pseudonyms/{label}/reveal"
    calls += [
        (
            "post",
            reveal,
            admin_api.post(
                "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "a"}, format="json"
            ),
        ),
        (
            "post",
            reveal,
            admin_api.post("/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {}, format="json"),
        ),
        (
            "post",
            reveal,
            api.post(
                "/v1/redaction/pseudonyms/EMAIL_ADDRESS_1/reveal", {"reason": "a"}, format="json"
            ),
        ),
        (
            "post",
            reveal,
            admin_api.post(
                "/v1/redaction/pseudonyms/PERSON_7/reveal", {"reason": "a"}, format="json"
            ),
        ),
    ]
    assert calls[-4][2].json()["value"] == EMAIL
    assert {c[2].status_code for c in calls} == {200, 400, 403, 404, 409}
    for method, path, response in calls:
        openapi.assert_documents(method, path, response)


def test_a_refused_change_leaves_no_policy_and_no_event_behind(admin_api, workspace):
    assert not RedactionPolicy.objects.filter(workspace=workspace).exists()
    response = admin_api.patch("/v1/redaction/policy", {"scoreThreshold": 7}, format="json")
    assert response.status_code == 400
    assert not RedactionPolicy.objects.filter(workspace=workspace).exists()
    assert not AuditEvent.objects.filter(action__startswith="redaction_policy.").exists()


def test_list_digests_in_the_trail_are_keyed_with_the_secret_key(admin_api):
    admin_api.patch("/v1/redaction/policy", {"allowList": ["Ann"]}, format="json")
    event = AuditEvent.objects.get(action="redaction_policy.update")
    [digest] = event.after["allowList"]["digests"]
    # Not the old digest, which anyone who knows the (public) workspace id could
    # recompute for candidate values.
    key = f"{event.workspace_id}|policy-list".encode()
    assert digest != hashlib.sha256(key + b"Ann").hexdigest()[:16]

    policy = RedactionPolicy.objects.get(workspace_id=event.workspace_id)
    snapshot = redaction_policy_snapshot(policy)
    assert snapshot["allowList"]["digests"] == [digest]
    with override_settings(SECRET_KEY="another secret key, as long as it needs to be"):
        assert redaction_policy_snapshot(policy)["allowList"]["digests"] != [digest]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"customRecognizers": [{"name": "x", "entity": "X_ID", "pattern": "x", "y": 1}]}, ""),
        (
            {
                "customRecognizers": [
                    {"name": "x", "entity": "X_ID", "pattern": "x"},
                    {"name": "x", "entity": "Y_ID", "pattern": "y"},
                ]
            },
            "customRecognizers",
        ),
        (
            {
                "customRecognizers": [
                    {"name": "x", "entity": "X_ID", "pattern": "x"},
                    {"name": "y", "entity": "Y_ID", "pattern": "y", "score": 2},
                ]
            },
            "customRecognizers[1].score",
        ),
        ({"keepOriginals": 1}, "keepOriginals"),
        ({"allowList": ["x" * 201]}, "allowList"),
    ],
)
def test_a_bad_custom_recognizer_or_list_is_refused_with_the_field(admin_api, body, field):
    response = admin_api.patch("/v1/redaction/policy", body, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == (field or "customRecognizers[0]")
    assert not RedactionPolicy.objects.filter(version__gt=1).exists()
