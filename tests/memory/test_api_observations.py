"""Observations written, corrected and deleted through the API, always with a reason."""

from __future__ import annotations

import pytest

from governance.audit.writer import audit_text_digest
from governance.models import AuditEvent
from memory.models import Message, Observation, ObservationVersion


@pytest.fixture
def four_turn_conversation_id(curator_api) -> str:
    """The id of a conversation with four messages, made over the API."""
    conversation_id = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    curator_api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"turn {n}"} for n in range(4)]},
        format="json",
    )
    return conversation_id


@pytest.fixture
def observation_body(curator_api, four_turn_conversation_id) -> dict:
    """An observation added over the API, as the API answered it."""
    response = curator_api.post(
        f"/v1/conversations/{four_turn_conversation_id}/observations",
        {"text": "User prefers email.", "priority": "medium", "tags": ["contact"]},
        format="json",
    )
    assert response.status_code == 201
    return response.json()


def test_a_curator_can_add_an_observation_tied_to_messages(curator_api, four_turn_conversation_id):
    message_ids = [
        str(pk)
        for pk in Message.objects.filter(conversation_id=four_turn_conversation_id, seq__in=[2, 3])
        .order_by("seq")
        .values_list("pk", flat=True)
    ]
    response = curator_api.post(
        f"/v1/conversations/{four_turn_conversation_id}/observations",
        {
            "text": "User asked for a refund.",
            "priority": "high",
            "sourceMessageIds": message_ids,
            "referencedAt": "2026-03-03T00:00:00Z",
            "ticketId": "T-9",
        },
        format="json",
    )
    assert response.status_code == 201
    row = Observation.objects.get(pk=response.json()["id"])
    assert (row.source, row.priority, row.ticket_id) == ("api", "high", "T-9")
    assert (row.window_start_seq, row.window_end_seq) == (2, 3)
    assert row.source_message_ids == message_ids
    assert row.token_count > 0
    assert AuditEvent.objects.filter(action="observation.create", target_id=str(row.pk)).exists()


def test_source_messages_must_belong_to_the_conversation(curator_api, four_turn_conversation_id):
    other = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    foreign = curator_api.post(
        f"/v1/conversations/{other}/messages", {"role": "user", "content": "x"}, format="json"
    ).json()["id"]
    response = curator_api.post(
        f"/v1/conversations/{four_turn_conversation_id}/observations",
        {"text": "planted", "sourceMessageIds": [foreign]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["field"] == "sourceMessageIds"
    assert not Observation.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": ""}, "text"),
        ({"text": "x", "priority": "urgent"}, "priority"),
        ({"text": 3}, "text"),
    ],
)
def test_bad_observation_input_is_refused(curator_api, four_turn_conversation_id, body, field):
    response = curator_api.post(
        f"/v1/conversations/{four_turn_conversation_id}/observations", body, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_edit_without_a_reason_is_refused_and_changes_nothing(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
    for body in ({"text": "User prefers SMS."}, {"text": "User prefers SMS.", "reason": "  "}):
        response = curator_api.patch(path, body, format="json")
        assert response.status_code == 400
        assert response.json() == {
            "error": "A reason is required to change memory.",
            "code": "reason_required",
            "message": "A reason is required to change memory.",
            "field": "reason",
        }
    row = Observation.objects.get(pk=observation_body["id"])
    assert (row.text, row.version) == ("User prefers email.", 1)
    assert not ObservationVersion.objects.exists()


def test_edit_with_a_reason_bumps_version_keeps_history_and_audits(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
    response = curator_api.patch(
        path, {"text": "User prefers SMS.", "reason": "customer corrected us"}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["version"] == 2
    assert response.json()["text"] == "User prefers SMS."
    history = curator_api.get(f"{path}/history").json()
    assert history["current"]["text"] == "User prefers SMS."
    assert [(v["version"], v["text"], v["reason"]) for v in history["versions"]] == [
        (1, "User prefers email.", "customer corrected us")
    ]
    event = AuditEvent.objects.get(action="observation.edit", target_id=observation_body["id"])
    assert event.before["textDigest"] == audit_text_digest("User prefers email.")
    assert event.after["textDigest"] == audit_text_digest("User prefers SMS.")
    assert event.reason == "customer corrected us"


def test_changing_only_the_priority_is_audited_as_a_reprioritisation(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
    response = curator_api.patch(path, {"priority": "high", "reason": "escalated"}, format="json")
    assert response.json()["priority"] == "high"
    assert response.json()["marker"] == "\N{LARGE RED CIRCLE}"
    assert AuditEvent.objects.filter(action="observation.reprioritise").count() == 1


def test_an_edit_with_nothing_to_change_is_refused(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
    response = curator_api.patch(path, {"reason": "just because"}, format="json")
    assert response.status_code == 400
    assert response.json()["code"] == "nothing_to_change"


def test_delete_needs_a_reason_and_keeps_the_last_version(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
    refused = curator_api.delete(path)
    assert refused.status_code == 400
    assert refused.json()["code"] == "reason_required"
    assert Observation.objects.filter(pk=observation_body["id"]).exists()

    assert curator_api.delete(path, {"reason": "wrong customer"}, format="json").status_code == 204
    assert not Observation.objects.filter(pk=observation_body["id"]).exists()
    kept = ObservationVersion.objects.get(observation_id=observation_body["id"])
    assert (kept.change, kept.text, kept.reason) == (
        "delete",
        "User prefers email.",
        "wrong customer",
    )
    event = AuditEvent.objects.get(action="observation.delete", target_id=observation_body["id"])
    assert event.reason == "wrong customer"
    assert curator_api.get(path).status_code == 404


def test_reason_may_also_come_as_a_query_parameter_on_delete(
    curator_api, four_turn_conversation_id, observation_body
):
    path = (
        f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}"
        "?reason=duplicate"
    )
    assert curator_api.delete(path).status_code == 204


def test_observation_lists_filter_by_status(
    curator_api, four_turn_conversation_id, observation_body
):
    path = f"/v1/conversations/{four_turn_conversation_id}/observations"
    assert [o["id"] for o in curator_api.get(path).json()["observations"]] == [
        observation_body["id"]
    ]
    assert curator_api.get(f"{path}?status=reflected").json()["observations"] == []
    assert curator_api.get(f"{path}?status=bogus").status_code == 400
    assert (
        curator_api.get(
            f"/v1/conversations/{four_turn_conversation_id}/reflections?status=bogus"
        ).status_code
        == 400
    )


def test_history_of_an_unedited_observation_has_no_earlier_versions(
    curator_api, four_turn_conversation_id, observation_body
):
    response = curator_api.get(
        f"/v1/conversations/{four_turn_conversation_id}/observations/{observation_body['id']}/history"
    )
    assert response.status_code == 200
    assert response.json()["versions"] == []
    assert response.json()["current"]["version"] == 1


def test_limit_keeps_the_newest_observations_in_list_order(curator_api, four_turn_conversation_id):
    texts = [f"User said thing {n}." for n in range(1, 5)]
    for text in texts:
        curator_api.post(
            f"/v1/conversations/{four_turn_conversation_id}/observations",
            {"text": text},
            format="json",
        )

    listed = curator_api.get(
        f"/v1/conversations/{four_turn_conversation_id}/observations", {"limit": 2}
    ).json()
    refused = curator_api.get(
        f"/v1/conversations/{four_turn_conversation_id}/observations", {"limit": 0}
    )

    assert [o["text"] for o in listed["observations"]] == texts[-2:]
    assert all(o["createdAt"] for o in listed["observations"])
    assert refused.status_code == 400
    assert (refused.json()["code"], refused.json()["field"]) == ("invalid_limit", "limit")
