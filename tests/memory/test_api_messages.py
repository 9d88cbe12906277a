"""Writing and reading messages: shapes, ordering, limits, bad input, idempotency."""

from __future__ import annotations

import uuid

import pytest
from django.test import override_settings

from memory.models import Conversation, IdempotencyRecord, Message


def _post(api, path: str, body, **extra):
    return api.post(path, body, format="json", **extra)


def test_it_appends_a_message_with_seq_tokens_and_metadata(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "My order ORD-7 never arrived", "metadata": {"lang": "en"}},
    )
    assert response.status_code == 201
    body = response.json()
    row = Message.objects.get(pk=body["id"])
    assert (row.seq, row.role, row.metadata) == (1, "user", {"lang": "en"})
    assert body["tokenCount"] == row.token_count > 0
    assert body["conversationId"] == conversation_id


def test_it_imports_history_with_created_at_and_tool_fields(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages",
        {
            "role": "tool",
            "content": '{"status": "shipped"}',
            "toolName": "lookup_order",
            "toolCallId": "call_1",
            "createdAt": "2025-02-10T09:30:00Z",
        },
    )
    assert response.status_code == 201
    row = Message.objects.get(pk=response.json()["id"])
    assert row.created_at.isoformat() == "2025-02-10T09:30:00+00:00"
    assert (row.tool_name, row.tool_call_id) == ("lookup_order", "call_1")


def test_it_lists_messages_newest_first_and_honours_limit(api, conversation_id):
    _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"message {n}"} for n in range(1, 8)]},
    )
    response = api.get(f"/v1/conversations/{conversation_id}/messages?limit=3")
    assert response.status_code == 200
    assert [m["seq"] for m in response.json()["messages"]] == [7, 6, 5]


@pytest.mark.parametrize("limit", ["0", "201", "-1", "ten", "1.5"])
def test_it_refuses_limit_outside_1_to_200(api, conversation_id, limit):
    response = api.get(f"/v1/conversations/{conversation_id}/messages?limit={limit}")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_limit"
    assert response.json()["field"] == "limit"


def test_bulk_add_keeps_order_and_gives_consecutive_seqs(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"m{n}"} for n in range(100)]},
    )
    assert response.status_code == 201
    rows = list(Message.objects.filter(conversation_id=conversation_id).order_by("seq"))
    assert [r.seq for r in rows] == list(range(1, 101))
    assert [r.content for r in rows] == [f"m{n}" for n in range(100)]
    assert Conversation.objects.get(pk=conversation_id).last_seq == 100


def test_bulk_add_of_more_than_100_is_refused_and_writes_nothing(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": "x"}] * 101},
    )
    assert response.status_code == 400
    assert response.json()["code"] == "too_many_messages"
    assert not Message.objects.filter(conversation_id=conversation_id).exists()


def test_bulk_add_is_all_or_nothing(api, conversation_id):
    _post(api, f"/v1/conversations/{conversation_id}/messages", {"role": "user", "content": "a"})
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "fine"},
                {"role": "wizard", "content": "bad role"},
            ]
        },
    )
    assert response.status_code == 400
    assert response.json()["field"] == "messages[1].role"
    assert list(
        Message.objects.filter(conversation_id=conversation_id).values_list("content", flat=True)
    ) == ["a"]
    assert Conversation.objects.get(pk=conversation_id).last_seq == 1


BAD_MESSAGES = [
    ({"role": "wizard", "content": "hi"}, "role"),
    ({"role": "user", "content": ""}, "content"),
    ({"role": "user", "content": "   "}, "content"),
    ({"role": "user", "content": 42}, "content"),
    ({"role": 7, "content": "hi"}, "role"),
    ({"content": "no role"}, "role"),
    ({"role": "user"}, "content"),
    ({"role": "user", "content": "hi", "createdAt": "yesterday-ish"}, "createdAt"),
    ({"role": "user", "content": "hi", "metadata": ["not", "an", "object"]}, "metadata"),
]


@pytest.mark.parametrize(("body", "field"), BAD_MESSAGES)
def test_it_refuses_a_bad_message_naming_the_field(api, conversation_id, body, field):
    _post(api, f"/v1/conversations/{conversation_id}/messages", {"role": "user", "content": "kept"})
    response = _post(api, f"/v1/conversations/{conversation_id}/messages", body)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["message"]
    assert list(
        Message.objects.filter(conversation_id=conversation_id).values_list("content", flat=True)
    ) == ["kept"]


@override_settings(MEMDESK_MAX_MESSAGE_CHARS=50)
def test_it_refuses_content_over_the_size_limit(api, conversation_id):
    response = _post(
        api, f"/v1/conversations/{conversation_id}/messages", {"role": "user", "content": "x" * 51}
    )
    assert response.status_code == 400
    assert response.json()["code"] == "content_too_long"
    assert "50" in response.json()["message"]


def test_malformed_json_is_a_400_json_error(api, conversation_id):
    response = api.post(
        f"/v1/conversations/{conversation_id}/messages",
        data='{"role": "user", "content": ',
        content_type="application/json",
    )
    assert response.status_code == 400
    assert response.json()["code"] == "malformed_json"


def test_a_body_that_is_not_an_object_is_refused(api, conversation_id):
    response = _post(api, f"/v1/conversations/{conversation_id}/messages", ["user", "hi"])
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize("bad_id", ["123", "not-a-uuid", "0" * 40])
def test_a_non_uuid_conversation_id_is_a_400(api, bad_id):
    response = api.get(f"/v1/conversations/{bad_id}/messages")
    assert response.status_code == 400
    assert response.json() == {
        "error": f"conversationId must be a UUID; got '{bad_id}'.",
        "code": "invalid_id",
        "message": f"conversationId must be a UUID; got '{bad_id}'.",
        "field": "conversationId",
    }


def test_an_unknown_conversation_is_a_404(api):
    response = api.get(f"/v1/conversations/{uuid.uuid4()}/messages")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_an_unknown_route_under_v1_is_a_json_404(api):
    response = api.get("/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_same_idempotency_key_and_body_replays_without_duplicating(api, conversation_id):
    path = f"/v1/conversations/{conversation_id}/messages/bulk"
    body = {
        "messages": [{"role": "user", "content": "once"}, {"role": "assistant", "content": "ok"}]
    }
    first = _post(api, path, body, HTTP_IDEMPOTENCY_KEY="retry-1")
    second = _post(api, path, body, HTTP_IDEMPOTENCY_KEY="retry-1")
    assert first.status_code == second.status_code == 201
    assert first.json() == second.json()
    assert second["Idempotent-Replayed"] == "true"
    assert Message.objects.filter(conversation_id=conversation_id).count() == 2


def test_same_idempotency_key_with_another_body_is_a_409(api, conversation_id):
    path = f"/v1/conversations/{conversation_id}/messages"
    _post(api, path, {"role": "user", "content": "first"}, HTTP_IDEMPOTENCY_KEY="k")
    response = _post(api, path, {"role": "user", "content": "second"}, HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_reused"
    assert Message.objects.filter(conversation_id=conversation_id).count() == 1


def test_a_failed_write_does_not_burn_its_idempotency_key(api, conversation_id):
    path = f"/v1/conversations/{conversation_id}/messages"
    bad = _post(api, path, {"role": "wizard", "content": "x"}, HTTP_IDEMPOTENCY_KEY="k2")
    assert bad.status_code == 400
    good = _post(api, path, {"role": "wizard", "content": "x"}, HTTP_IDEMPOTENCY_KEY="k2")
    assert good.status_code == 400  # still validated, not replayed as a success
    fixed = _post(api, path, {"role": "user", "content": "x"}, HTTP_IDEMPOTENCY_KEY="k3")
    assert fixed.status_code == 201


def test_idempotency_keys_are_per_workspace(api, other_api, conversation_id):
    other_conversation = other_api.post("/v1/conversations", {}, format="json").json()["id"]
    body = {"role": "user", "content": "same"}
    _post(api, f"/v1/conversations/{conversation_id}/messages", body, HTTP_IDEMPOTENCY_KEY="k")
    response = _post(
        other_api,
        f"/v1/conversations/{other_conversation}/messages",
        body,
        HTTP_IDEMPOTENCY_KEY="k",
    )
    assert response.status_code == 201
    assert Message.objects.filter(conversation_id=other_conversation).count() == 1


def test_search_is_case_insensitive_and_scoped_to_the_conversation(api, conversation_id):
    other = api.post("/v1/conversations", {}, format="json").json()["id"]
    _post(api, f"/v1/conversations/{other}/messages", {"role": "user", "content": "Refund please"})
    _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "I want a REFUND for my headphones"},
                {"role": "assistant", "content": "Which order is it?"},
            ]
        },
    )
    response = _post(api, f"/v1/conversations/{conversation_id}/search", {"query": "refund"})
    assert response.status_code == 200
    body = response.json()
    assert body["searchType"] == "text"
    assert [m["content"] for m in body["messages"]] == ["I want a REFUND for my headphones"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "  "}, "query"),
        ({}, "query"),
        ({"query": "x", "limit": 0}, "limit"),
    ],
)
def test_search_refuses_bad_input_naming_the_field(api, conversation_id, body, field):
    response = _post(api, f"/v1/conversations/{conversation_id}/search", body)
    assert response.status_code == 400
    assert response.json()["field"] == field


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_over_the_request_size_limit_is_a_413_json_error(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "x" * 5000},
    )
    assert response.status_code == 413
    assert response.json()["code"] == "request_too_large"
    assert not Message.objects.filter(conversation_id=conversation_id).exists()


def test_a_deleted_conversation_takes_its_stored_replies_with_it(api, conversation_id):
    # A stored reply to an idempotent write repeats the messages it created: it must
    # not outlive the conversation. Another conversation's replies stay.
    other = api.post("/v1/conversations", {}, format="json", HTTP_IDEMPOTENCY_KEY="c-2").json()
    for key in ("m-1", "m-2"):
        response = _post(
            api,
            f"/v1/conversations/{conversation_id}/messages",
            {"role": "user", "content": f"my address is 1 Elm St ({key})"},
            HTTP_IDEMPOTENCY_KEY=key,
        )
        assert response.status_code == 201
    records = IdempotencyRecord.objects.filter(conversation_id=conversation_id)
    assert records.count() == 2

    response = api.delete(f"/v1/conversations/{conversation_id}?reason=user+asked")
    assert response.status_code in (200, 204), response.content

    assert not IdempotencyRecord.objects.filter(key__in=["m-1", "m-2"]).exists()
    assert IdempotencyRecord.objects.get(key="c-2").conversation_id == uuid.UUID(other["id"])


# --- the speaker's name -------------------------------------------------------------------


def test_a_name_is_stored_with_its_whitespace_collapsed_and_read_back(api, conversation_id):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "Hi", "name": "  Maria \n\t Lopez "},
    )
    assert response.status_code == 201
    assert response.json()["name"] == "Maria Lopez"
    assert Message.objects.get(pk=response.json()["id"]).name == "Maria Lopez"
    [listed] = api.get(f"/v1/conversations/{conversation_id}/messages").json()["messages"]
    assert listed["name"] == "Maria Lopez"


def test_a_name_of_64_characters_once_collapsed_is_taken(api, conversation_id):
    long_name = " ".join(["Abcdefghijklmno"] * 4)  # 63 characters
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "a", "name": "x" * 64},
                {"role": "user", "content": "b", "name": long_name.replace(" ", "      ")},
            ]
        },
    )
    assert response.status_code == 201
    assert [m["name"] for m in response.json()["messages"]] == ["x" * 64, long_name]


@pytest.mark.parametrize("name", [None, "", "   \n "])
def test_a_null_or_blank_name_is_no_name(api, conversation_id, name):
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "Hi", "name": name},
    )
    assert response.status_code == 201
    assert "name" not in response.json()
    assert Message.objects.get(pk=response.json()["id"]).name == ""


def test_a_name_in_metadata_is_taken_as_the_name_and_metadata_kept_as_sent(api, conversation_id):
    """Clients that put the speaker in metadata.name (before messages had a name) get
    it reported as the name; metadata is the client's own and stays as it was sent."""
    response = _post(
        api,
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {
            "messages": [
                {"role": "user", "content": "a", "metadata": {"name": " Jo  Park", "x": 1}},
                {"role": "user", "content": "b", "name": "Ana", "metadata": {"name": "Jo"}},
                {"role": "user", "content": "c", "metadata": {"name": "y" * 65}},
                {"role": "user", "content": "d", "metadata": {"name": 42}},
                {"role": "user", "content": "e", "metadata": {"name": "Jo\x07"}},
            ]
        },
    )
    assert response.status_code == 201
    body = response.json()["messages"]
    assert [m.get("name") for m in body] == ["Jo Park", "Ana", None, None, None]
    assert body[0]["metadata"] == {"name": " Jo  Park", "x": 1}
    rows = Message.objects.filter(conversation_id=conversation_id).order_by("seq")
    assert [r.name for r in rows] == ["Jo Park", "Ana", "", "", ""]
    assert rows[2].metadata == {"name": "y" * 65}
