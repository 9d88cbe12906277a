"""Conversations: create, read, list with cursor paging, delete with a receipt."""

from __future__ import annotations

import uuid

import pytest

from core.actors import SYSTEM_ACTOR
from governance.holds import legal_hold_place
from governance.models import AuditEvent
from memory.models import Conversation, Message, Observation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.factories import ObservationFactory


def test_it_creates_a_conversation_with_user_and_metadata(api, workspace):
    response = api.post(
        "/v1/conversations", {"userId": "u-42", "metadata": {"channel": "chat"}}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    row = Conversation.objects.get(pk=body["id"])
    assert (row.workspace, row.user_id, row.metadata) == (workspace, "u-42", {"channel": "chat"})
    assert body["workspaceId"] == str(workspace.id)
    assert body["userId"] == "u-42"


def test_an_empty_body_creates_an_anonymous_conversation(api):
    response = api.post("/v1/conversations", {}, format="json")
    assert response.status_code == 201
    assert response.json()["userId"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"userId": 5}, "userId"), ({"metadata": "x"}, "metadata"), ({"userId": "u" * 256}, "userId")],
)
def test_it_refuses_bad_conversation_fields(api, body, field):
    response = api.post("/v1/conversations", body, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert not Conversation.objects.exists()


def test_get_returns_the_header(api):
    created = api.post("/v1/conversations", {"userId": "u"}, format="json").json()
    api.post(
        f"/v1/conversations/{created['id']}/messages",
        {"role": "user", "content": "hi"},
        format="json",
    )
    body = api.get(f"/v1/conversations/{created['id']}").json()
    assert body["id"] == created["id"]
    assert body["messageCount"] == 1
    assert body["updatedAt"] >= body["createdAt"]


def test_list_pages_with_a_cursor_newest_first_and_filters_by_user(api):
    ids = [
        api.post("/v1/conversations", {"userId": "a" if n % 2 else "b"}, format="json").json()["id"]
        for n in range(7)
    ]
    seen, cursor = [], None
    while True:
        query = "?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(f"/v1/conversations{query}").json()
        seen += [c["id"] for c in page["conversations"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == list(reversed(ids))
    only_a = api.get("/v1/conversations?userId=a&limit=200").json()["conversations"]
    assert {c["userId"] for c in only_a} == {"a"} and len(only_a) == 3


def test_a_conversation_with_a_new_message_moves_to_the_top(api):
    first = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post("/v1/conversations", {}, format="json")
    api.post(
        f"/v1/conversations/{first}/messages", {"role": "user", "content": "hi"}, format="json"
    )
    assert api.get("/v1/conversations").json()["conversations"][0]["id"] == first


def test_a_forged_cursor_is_a_400(api):
    response = api.get("/v1/conversations?cursor=garbage!!")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_cursor"


def test_delete_removes_every_tier_and_leaves_a_receipt(api):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]},
        format="json",
    )
    ObservationFactory(conversation_id=conversation_id)
    response = api.delete(f"/v1/conversations/{conversation_id}?reason=user+asked")
    assert response.status_code == 204
    assert not Conversation.objects.filter(pk=conversation_id).exists()
    assert not Message.objects.filter(conversation_id=conversation_id).exists()
    assert not Observation.objects.filter(conversation_id=conversation_id).exists()
    receipt = AuditEvent.objects.get(action="conversation.delete", target_id=conversation_id)
    assert receipt.before["counts"] == {
        "messages": 2,
        "observations": 1,
        "reflections": 0,
        "reasoningSteps": 0,
        "toolCalls": 0,
    }
    # An agent key's delete is marked as the agent's, with what the agent said after it.
    assert receipt.reason == "deleted by agent: user asked"
    assert receipt.actor_type == "api_key"
    assert api.get(f"/v1/conversations/{conversation_id}").status_code == 404


def test_a_second_delete_succeeds_and_audits_nothing(api):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    assert api.delete(f"/v1/conversations/{conversation_id}").status_code == 204
    events = AuditEvent.objects.count()

    again = api.delete(f"/v1/conversations/{conversation_id}")
    never = api.delete(f"/v1/conversations/{uuid.uuid4()}")

    assert (again.status_code, again.content) == (204, b"")
    assert (never.status_code, never.content) == (204, b"")
    assert AuditEvent.objects.count() == events


def test_deleting_another_workspaces_conversation_answers_as_for_none_and_keeps_it(
    api, other_workspace
):
    theirs = conversation_create(workspace=other_workspace, user_id="gina")
    messages_append(conversation=theirs, items=[MessageInput(role="user", content="Mine.")])
    events = AuditEvent.objects.count()

    response = api.delete(f"/v1/conversations/{theirs.pk}?reason=probe")

    assert response.status_code == 204
    assert Message.objects.filter(conversation=theirs).count() == 1
    assert AuditEvent.objects.count() == events


def test_a_legal_hold_still_refuses_the_delete(api, workspace):
    conversation_id = api.post("/v1/conversations", {"userId": "u-9"}, format="json").json()["id"]
    legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="audit", end_user_id="u-9")

    response = api.delete(f"/v1/conversations/{conversation_id}")

    assert response.status_code == 409
    assert response.json()["code"] == "legal_hold"
    assert Conversation.objects.filter(pk=conversation_id).exists()


def test_the_list_filters_by_user_id_as_the_typescript_client_sends_it(api):
    mine = api.post("/v1/conversations", {"userId": "alice"}, format="json").json()["id"]
    api.post("/v1/conversations", {"userId": "bob"}, format="json")

    snake = api.get("/v1/conversations", {"user_id": "alice"}).json()["conversations"]
    both = api.get("/v1/conversations", {"user_id": "alice", "userId": "alice"})
    conflicting = api.get("/v1/conversations", {"user_id": "alice", "userId": "bob"})

    assert [c["id"] for c in snake] == [mine]
    assert [c["id"] for c in both.json()["conversations"]] == [mine]
    assert conflicting.status_code == 400
    assert (conflicting.json()["code"], conflicting.json()["field"]) == (
        "conflicting_fields",
        "userId",
    )


def test_a_delete_that_deadlocks_with_a_worker_is_tried_again(api, monkeypatch):
    from django.db import OperationalError

    from memory.models import Conversation
    from memory.services import conversations

    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    once = conversations._conversation_delete_once
    calls: list[int] = []

    class Deadlock(Exception):
        sqlstate = "40P01"

    def deadlock_first(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("deadlock detected") from Deadlock()
        return once(**kwargs)

    monkeypatch.setattr(conversations, "_conversation_delete_once", deadlock_first)

    assert api.delete(f"/v1/conversations/{conversation_id}").status_code == 204
    assert len(calls) == 2
    assert not Conversation.objects.filter(pk=conversation_id).exists()
