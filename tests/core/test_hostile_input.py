"""Input no client should send, and what it gets: a 400 that says what is wrong, nothing
stored, and every later read of the conversation and the workspace still working."""

from __future__ import annotations

import pytest

from memory.models import Conversation, Message

DEEP = 100_000


def _post(api, path: str, raw: str):
    return api.generic("POST", path, raw, content_type="application/json")


def _message(metadata: str) -> str:
    return '{"role": "user", "content": "hello", "metadata": ' + metadata + "}"


@pytest.mark.parametrize(
    ("metadata", "error", "says"),
    [
        ('{"note": "\\ud800"}', "invalid_request", "note holds a lone surrogate"),
        ('{"deep": {"er": ["x\\udc00"]}}', "invalid_request", "deep.er[0] holds a lone surrogate"),
        ('{"note": "a\\u0000b"}', "invalid_request", "note holds NUL (U+0000)"),
        ('{"a\\u0000": 1}', "invalid_request", "the key a\\0 holds NUL"),
        ('{"n": 1e400}', "malformed_json", "the number 1e400 is out of range"),
        ('{"n": -Infinity}', "malformed_json", "not JSON compliant"),
        ("{" + '"a":{' * DEEP + "}" * DEEP + "}", "malformed_json", "nested too deeply"),
        ('{"a":' + "[" * DEEP + "]" * DEEP + "}", "malformed_json", "nested too deeply"),
        ('{"a":' + "[" * 40 + "]" * 40 + "}", "invalid_request", "nested more than 32 levels"),
    ],
)
def test_bad_message_metadata_is_refused_and_nothing_breaks(
    api, conversation_id, metadata, error, says
):
    path = f"/v1/conversations/{conversation_id}/messages"
    assert _post(api, path, _message('{"ok": true}')).status_code == 201

    response = _post(api, path, _message(metadata))

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == error
    assert says in body["message"]
    assert Message.objects.filter(conversation_id=conversation_id).count() == 1
    assert api.get(path).status_code == 200
    assert api.get(f"/v1/conversations/{conversation_id}/context").status_code == 200
    assert api.get("/v1/conversations").status_code == 200


def test_bad_conversation_metadata_is_refused(api, workspace):
    response = _post(api, "/v1/conversations", '{"userId": "x", "metadata": {"a": "\\udc00"}}')
    assert response.status_code == 400
    assert "lone surrogate" in response.json()["message"]
    assert not Conversation.objects.filter(workspace=workspace).exists()
    assert api.get("/v1/conversations").json()["conversations"] == []


def test_metadata_has_a_size_limit(api, conversation_id):
    big = '{"blob": "' + "x" * 70_000 + '"}'
    response = _post(api, f"/v1/conversations/{conversation_id}/messages", _message(big))
    assert response.status_code == 400
    assert "at most 64 KB as JSON" in response.json()["message"]


@pytest.mark.parametrize("created_at", ["9999-12-31T23:59:59Z", "1969-12-31T23:59:59Z"])
def test_a_message_time_out_of_bounds_is_refused(api, conversation_id, created_at):
    path = f"/v1/conversations/{conversation_id}/messages"
    response = api.post(
        path,
        {"role": "user", "content": "see you tomorrow", "createdAt": created_at},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_created_at"
    assert response.json()["field"] == "createdAt"
    assert not Message.objects.filter(conversation_id=conversation_id).exists()


def test_an_imported_history_keeps_its_own_old_dates(api, conversation_id):
    path = f"/v1/conversations/{conversation_id}/messages"
    response = api.post(
        path, {"role": "user", "content": "hi", "createdAt": "1999-05-01T10:00:00Z"}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["createdAt"].startswith("1999-05-01T10:00:00")
