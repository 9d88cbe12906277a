"""How long a stored idempotent reply lives: it is replayed within
MEMDESK_IDEMPOTENCY_TTL_HOURS and never after, never once a row it repeats is gone, and
it goes with its conversation. Beat's task deletes the expired ones, with a receipt."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from governance.models import AuditEvent
from memory.models import IdempotencyRecord, Message, ReasoningStep, ToolCall

# What the probe found kept in stored replies: a card number and an e-mail address.
SECRET = "card 4111 1111 1111 1111, write to dana@example.com"
STEPS = "/v1/reasoning/steps"
TOOL_CALLS = "/v1/reasoning/tool-calls"


def _bulk(api, conversation_id: str, key: str, *contents: str):
    return api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": c} for c in contents or (SECRET, "thanks")]},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def _ids(response) -> list[str]:
    return [m["id"] for m in response.json()["messages"]]


def _age(key: str, *, hours: float) -> None:
    IdempotencyRecord.objects.filter(key=key).update(
        created_at=timezone.now() - timedelta(hours=hours)
    )


def _expire_task():
    from celery import current_app

    import memory.tasks  # noqa: F401 - registers the tasks

    return current_app.tasks[settings.CELERY_BEAT_SCHEDULE["idempotency-expiry"]["task"]]


# --- expiry ---------------------------------------------------------------------------------


def test_a_key_is_replayed_within_its_lifetime(api, conversation_id):
    first = _bulk(api, conversation_id, "retry-1")
    _age("retry-1", hours=23)

    again = _bulk(api, conversation_id, "retry-1")

    assert again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert _ids(again) == _ids(first)
    assert Message.objects.filter(conversation_id=conversation_id).count() == 2


def test_a_key_past_its_lifetime_is_a_new_request(api, conversation_id):
    first = _bulk(api, conversation_id, "retry-1")
    _age("retry-1", hours=25)

    again = _bulk(api, conversation_id, "retry-1")

    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert set(_ids(again)).isdisjoint(_ids(first))
    assert Message.objects.filter(conversation_id=conversation_id).count() == 4
    # The key now stands for the new write, from now on.
    [record] = IdempotencyRecord.objects.filter(key="retry-1")
    assert record.created_at > timezone.now() - timedelta(hours=1)
    assert _ids(_bulk(api, conversation_id, "retry-1")) == _ids(again)


def test_past_its_lifetime_a_key_may_carry_another_body(api, conversation_id):
    _bulk(api, conversation_id, "retry-1")
    _age("retry-1", hours=25)

    other = _bulk(api, conversation_id, "retry-1", "something else")

    assert other.status_code == 201
    assert "Idempotent-Replayed" not in other
    assert [m["content"] for m in other.json()["messages"]] == ["something else"]


@override_settings(MEMDESK_IDEMPOTENCY_TTL_HOURS=2)
def test_the_lifetime_is_the_setting(api, conversation_id):
    _bulk(api, conversation_id, "young")
    _bulk(api, conversation_id, "old")
    _age("young", hours=1)
    _age("old", hours=3)

    assert _bulk(api, conversation_id, "young")["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in _bulk(api, conversation_id, "old")


def test_beat_deletes_expired_replies_with_a_receipt_per_workspace(
    api, other_api, conversation_id, workspace, other_workspace
):
    theirs = other_api.post("/v1/conversations", {}, format="json").json()["id"]
    for key in ("old-1", "old-2", "fresh"):
        _bulk(api, conversation_id, key)
    _bulk(other_api, theirs, "old-3")
    for key in ("old-1", "old-2", "old-3"):
        _age(key, hours=30)
    expired = {
        key: pk
        for key, pk in IdempotencyRecord.objects.filter(key__startswith="old").values_list(
            "key", "pk"
        )
    }

    result = _expire_task().apply().get()

    assert result == 3
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]
    [ours] = AuditEvent.objects.filter(workspace=workspace, action="idempotency.expire")
    [their] = AuditEvent.objects.filter(workspace=other_workspace, action="idempotency.expire")
    assert ours.actor_type == their.actor_type == "system"
    assert ours.after["counts"] == {"idempotencyRecords": 2}
    assert their.after["counts"] == {"idempotencyRecords": 1}
    assert ours.after["ttlHours"] == 24
    lines = sorted(f"idempotency_record:{expired[k]}\n" for k in ("old-1", "old-2"))
    assert ours.after["idsSha256"] == hashlib.sha256("".join(lines).encode()).hexdigest()
    # Ids and counts only: neither the content the replies held nor the client's keys.
    for event in (ours, their):
        written = json.dumps([event.before, event.after, event.reason, event.target_id])
        assert "4111" not in written and "dana@" not in written and "old-" not in written
    # Nothing more to expire: the next run deletes nothing and records nothing.
    assert _expire_task().apply().get() == 0
    assert AuditEvent.objects.filter(action="idempotency.expire").count() == 2


def test_beat_sends_the_expiry_every_hour():
    entry = settings.CELERY_BEAT_SCHEDULE["idempotency-expiry"]
    assert entry["schedule"] == 3600.0
    assert _expire_task().name == entry["task"]


# --- replies go with what they repeat -------------------------------------------------------


def test_deleting_a_conversation_deletes_its_replies(api, conversation_id):
    _bulk(api, conversation_id, "retry-1")
    created = api.post("/v1/conversations", {}, format="json", HTTP_IDEMPOTENCY_KEY="create-1")

    assert api.delete(f"/v1/conversations/{conversation_id}").status_code == 204
    assert api.delete(f"/v1/conversations/{created.json()['id']}").status_code == 204

    assert not IdempotencyRecord.objects.exists()
    replayed = _bulk(api, conversation_id, "retry-1")
    assert replayed.status_code == 404
    assert "4111" not in replayed.content.decode()


def test_a_reply_whose_message_is_gone_is_never_replayed(api, conversation_id):
    first = _bulk(api, conversation_id, "retry-1")
    # One of the two messages is deleted by a path that left the stored reply behind.
    Message.objects.filter(pk=_ids(first)[0]).delete()

    again = _bulk(api, conversation_id, "retry-1")

    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert set(_ids(again)).isdisjoint(_ids(first))
    assert IdempotencyRecord.objects.filter(key="retry-1").count() == 1


def test_a_reply_whose_reasoning_step_or_tool_call_is_gone_is_never_replayed(api, conversation_id):
    step_body = {"conversationId": conversation_id, "reasoning": SECRET}
    call_body = {"conversationId": conversation_id, "toolName": "lookup", "output": SECRET}
    step = api.post(STEPS, step_body, format="json", HTTP_IDEMPOTENCY_KEY="step-1").json()
    call = api.post(TOOL_CALLS, call_body, format="json", HTTP_IDEMPOTENCY_KEY="call-1").json()
    ReasoningStep.objects.filter(pk=step["id"]).delete()
    ToolCall.objects.filter(pk=call["id"]).delete()

    step_again = api.post(STEPS, step_body, format="json", HTTP_IDEMPOTENCY_KEY="step-1")
    call_again = api.post(TOOL_CALLS, call_body, format="json", HTTP_IDEMPOTENCY_KEY="call-1")

    assert step_again.status_code == call_again.status_code == 201
    assert "Idempotent-Replayed" not in step_again and "Idempotent-Replayed" not in call_again
    assert step_again.json()["id"] != step["id"]
    assert call_again.json()["id"] != call["id"]


def test_replies_whose_rows_are_all_there_are_replayed(api, conversation_id):
    step_body = {"conversationId": conversation_id, "reasoning": "checked the order"}
    step = api.post(STEPS, step_body, format="json", HTTP_IDEMPOTENCY_KEY="step-1")
    first = _bulk(api, conversation_id, "retry-1")
    # Other messages of the conversation going does not touch this reply.
    _bulk(api, conversation_id, "other", "unrelated")
    Message.objects.filter(content="unrelated").delete()

    again = _bulk(api, conversation_id, "retry-1")
    step_again = api.post(STEPS, step_body, format="json", HTTP_IDEMPOTENCY_KEY="step-1")

    assert again["Idempotent-Replayed"] == step_again["Idempotent-Replayed"] == "true"
    assert _ids(again) == _ids(first)
    assert step_again.json()["id"] == step.json()["id"]
