"""The metrics of how agents fare with their memory, each against a conversation whose
value is known: turn latency, prompt-cache stability and 304 share, escalations to a
person, and the recall estimate."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from governance.models import AuditEvent
from memory.mcp.callers import HttpCaller
from memory.mcp.tools import run_tool
from memory.models import Escalation
from memory.recall import terms_in
from tenancy.models import ApiKey
from tests.resilience.redis_server import DEAD_REDIS


def _conversation(api) -> str:
    return api.post("/v1/conversations", {"userId": "u1"}, format="json").json()["id"]


def _add(api, conversation_id: str, *messages: tuple[str, str, timezone.datetime]) -> None:
    body = {
        "messages": [
            {"role": role, "content": content, "createdAt": at.isoformat()}
            for role, content, at in messages
        ]
    }
    response = api.post(f"/v1/conversations/{conversation_id}/messages/bulk", body, format="json")
    assert response.status_code == 201, response.content


def _metrics(api, conversation_id: str | None = None) -> dict:
    query = f"?conversationId={conversation_id}" if conversation_id else ""
    response = api.get(f"/v1/metrics{query}")
    assert response.status_code == 200, response.content
    return response.json()


# --- turn latency ------------------------------------------------------------------------------


def test_turn_latency_is_the_average_wait_from_user_to_assistant(api):
    conversation = _conversation(api)
    ten = (timezone.now() - timedelta(days=1)).replace(hour=10, minute=0, second=0, microsecond=0)
    # Sent out of order, as an import might: the messages' own times decide.
    _add(
        api,
        conversation,
        ("user", "Where is my order?", ten + timedelta(minutes=1)),
        ("assistant", "Checking.", ten + timedelta(minutes=1, seconds=10)),
    )
    _add(
        api,
        conversation,
        ("user", "Hello", ten),
        ("assistant", "Hi, how can I help?", ten + timedelta(seconds=4)),
    )

    latency = _metrics(api, conversation)["turnLatency"]

    assert latency["turns"] == 2
    assert latency["averageSeconds"] == 7.0
    assert latency["medianSeconds"] == 7.0


def test_turn_latency_skips_tool_messages_and_counts_from_the_last_user_message(api):
    conversation = _conversation(api)
    start = timezone.now() - timedelta(hours=2)
    _add(
        api,
        conversation,
        ("user", "One", start),
        ("user", "Two", start + timedelta(seconds=30)),
        ("tool", "lookup result", start + timedelta(seconds=31)),
        ("assistant", "Answer", start + timedelta(seconds=33)),
        ("assistant", "More", start + timedelta(seconds=40)),
        ("user", "Unanswered", start + timedelta(seconds=50)),
    )
    other = _conversation(api)
    _add(
        api,
        other,
        ("user", "Q", start),
        ("assistant", "A", start + timedelta(seconds=13)),
        ("user", "Q2", start + timedelta(seconds=20)),
        ("assistant", "A2", start + timedelta(seconds=21)),
    )

    assert _metrics(api, conversation)["turnLatency"] == {
        "turns": 1,
        "averageSeconds": 3.0,
        "medianSeconds": 3.0,
        "days": 30,
    }
    workspace = _metrics(api)["turnLatency"]
    assert workspace["turns"] == 3
    assert workspace["averageSeconds"] == pytest.approx((3 + 13 + 1) / 3, abs=0.001)
    assert workspace["medianSeconds"] == 3.0


def test_turn_latency_leaves_out_turns_older_than_the_period(api):
    conversation = _conversation(api)
    old = timezone.now() - timedelta(days=40)
    _add(api, conversation, ("user", "Q", old), ("assistant", "A", old + timedelta(seconds=9)))

    latency = _metrics(api, conversation)["turnLatency"]

    assert latency["turns"] == 0
    assert latency["averageSeconds"] is None


# --- prompt-cache stability ------------------------------------------------------------------


@pytest.fixture
def observed(api, curator_api) -> tuple[str, str]:
    conversation = _conversation(api)
    _add(api, conversation, ("user", "My order ORD-123456 is late.", timezone.now()))
    response = curator_api.post(
        f"/v1/conversations/{conversation}/observations",
        {"text": "User says order ORD-123456 is late.", "priority": "high"},
        format="json",
    )
    assert response.status_code == 201, response.content
    return conversation, response.json()["id"]


def test_stability_is_the_share_of_reads_with_the_memory_block_unchanged(
    api, curator_api, observed
):
    conversation, observation = observed
    context = f"/v1/conversations/{conversation}/context"
    for _ in range(3):
        assert api.get(context).status_code == 200
    # A new message changes the tail, not the memory block: still stable.
    _add(api, conversation, ("user", "Any news?", timezone.now()))
    assert api.get(context).status_code == 200
    edited = curator_api.patch(
        f"{context.removesuffix('/context')}/observations/{observation}",
        {"text": "User says order ORD-123456 is two days late.", "reason": "precise"},
        format="json",
    )
    assert edited.status_code == 200, edited.content
    assert api.get(context).status_code == 200

    reads = _metrics(api, conversation)["contextReads"]

    assert reads["reads"] == 5
    assert reads["compared"] == 4
    assert reads["stableMemoryBlock"] == 3
    assert reads["stability"] == 0.75
    assert reads["bestEffort"] is True


def test_three_unchanged_reads_then_one_after_an_edit_is_two_thirds(api, curator_api, observed):
    conversation, observation = observed
    context = f"/v1/conversations/{conversation}/context?format=text"
    for _ in range(3):
        api.get(context)
    curator_api.patch(
        f"/v1/conversations/{conversation}/observations/{observation}",
        {"text": "Order ORD-123456 late; user upset.", "reason": "tone"},
        format="json",
    )
    api.get(context)

    reads = _metrics(api, conversation)["contextReads"]

    assert (reads["stableMemoryBlock"], reads["compared"]) == (2, 3)
    assert reads["stability"] == pytest.approx(2 / 3, abs=0.001)


def test_the_304_share_counts_reads_answered_not_modified(api, observed):
    conversation, _ = observed
    context = f"/v1/conversations/{conversation}/context"
    etag = api.get(context)["ETag"]
    assert api.get(context, HTTP_IF_NONE_MATCH=etag).status_code == 304
    assert api.get(context, HTTP_IF_NONE_MATCH=etag).status_code == 304
    assert api.get(context, HTTP_IF_NONE_MATCH='"stale"').status_code == 200

    reads = _metrics(api, conversation)["contextReads"]

    assert reads["reads"] == 4
    assert reads["notModified"] == 2
    assert reads["notModifiedShare"] == 0.5


def test_a_web_process_adds_its_reads_to_the_shared_counts_at_most_once_a_flush_interval(
    api, observed, settings
):
    # In production each process counts in memory and writes the shared entry at most
    # once a second per conversation; the reads in between arrive with the next flush.
    settings.MEMDESK_CONTEXT_READS_FLUSH_SECONDS = 3600
    conversation, _ = observed
    context = f"/v1/conversations/{conversation}/context"
    for _ in range(3):
        assert api.get(context).status_code == 200

    assert _metrics(api, conversation)["contextReads"]["reads"] == 1

    settings.MEMDESK_CONTEXT_READS_FLUSH_SECONDS = 0
    api.get(context)
    reads = _metrics(api, conversation)["contextReads"]
    assert (reads["reads"], reads["compared"], reads["stableMemoryBlock"]) == (4, 3, 3)


def test_context_read_through_mcp_counts_with_the_rest_reads(api, observed):
    conversation, _ = observed
    api.get(f"/v1/conversations/{conversation}/context?format=text")
    api_key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(api.raw_key))
    caller = HttpCaller(api_key=api_key, request_id="mcp-test", ip_address=None)
    run_tool(caller, "get_context", {"conversationId": conversation})

    reads = _metrics(api, conversation)["contextReads"]
    assert (reads["reads"], reads["compared"], reads["stableMemoryBlock"]) == (2, 1, 1)


def test_the_workspace_sums_its_conversations_reads_and_not_another_workspace(
    api, other_api, observed
):
    conversation, _ = observed
    second = _conversation(api)
    _add(api, second, ("user", "Hello", timezone.now()))
    for path in (conversation, conversation, second):
        api.get(f"/v1/conversations/{path}/context")
    foreign = _conversation(other_api)
    other_api.get(f"/v1/conversations/{foreign}/context")

    reads = _metrics(api)["contextReads"]

    assert reads["reads"] == 3
    assert reads["compared"] == 1
    assert _metrics(other_api)["contextReads"]["reads"] == 1


def test_with_the_cache_down_reads_answer_and_the_counts_are_missing(api, observed, settings):
    conversation, _ = observed
    settings.CACHES = DEAD_REDIS
    context = f"/v1/conversations/{conversation}/context"

    assert [api.get(context).status_code for _ in range(2)] == [200, 200]
    metrics = _metrics(api, conversation)

    assert metrics["contextReads"]["reads"] == 0
    assert metrics["contextReads"]["stability"] is None
    assert metrics["recall"]["share"] == 1.0  # computed afresh without its cache


# --- escalations ------------------------------------------------------------------------------


def _escalate(client, conversation: str, body: dict):
    return client.post(f"/v1/conversations/{conversation}/escalations", body, format="json")


def test_an_agent_escalates_and_lists_the_escalations(api):
    conversation = _conversation(api)

    created = _escalate(
        api, conversation, {"reason": "Customer asks for a refund", "metadata": {"tier": 2}}
    )

    assert created.status_code == 201, created.content
    body = created.json()
    assert body["status"] == "open"
    assert body["reason"] == "Customer asks for a refund"
    assert body["metadata"] == {"tier": 2}
    assert body["createdBy"].startswith("api_key:")
    listed = api.get(f"/v1/conversations/{conversation}/escalations").json()["escalations"]
    assert [e["id"] for e in listed] == [body["id"]]
    event = AuditEvent.objects.get(action="conversation.escalate")
    assert event.target_id == body["id"]
    assert event.after == {"conversationId": conversation, "status": "open"}
    assert "refund" not in str(event.after) + event.reason


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "reason"),
        ({"reason": "   "}, "reason"),
        ({"reason": "x" * 2001}, "reason"),
        ({"reason": "ok", "metadata": "not an object"}, "metadata"),
    ],
)
def test_an_escalation_needs_a_bounded_reason(api, body, field):
    conversation = _conversation(api)

    response = _escalate(api, conversation, body)

    assert response.status_code == 400
    assert field in response.content.decode()
    assert not Escalation.objects.exists()


def test_another_workspace_cannot_escalate_or_list(api, other_api):
    conversation = _conversation(api)
    _escalate(api, conversation, {"reason": "Stuck"})

    assert _escalate(other_api, conversation, {"reason": "Stuck"}).status_code == 404
    assert other_api.get(f"/v1/conversations/{conversation}/escalations").status_code == 404
    assert Escalation.objects.count() == 1


def test_escalations_per_hour_in_the_metrics(api):
    conversation = _conversation(api)
    for reason in ("One", "Two"):
        _escalate(api, conversation, {"reason": reason})
    quiet = _conversation(api)

    metrics = _metrics(api, conversation)["escalations"]

    assert metrics["open"] == 2
    assert metrics["lastDays"] == 2
    assert metrics["perHour"] == round(2 / (30 * 24), 4)
    assert len(metrics["hourly"]) == 48
    assert list(metrics["hourly"].values())[-1] == 2
    assert _metrics(api, quiet)["escalations"]["open"] == 0
    assert _metrics(api)["escalations"]["open"] == 2


def test_deleting_the_conversation_deletes_its_escalations(api):
    conversation = _conversation(api)
    _escalate(api, conversation, {"reason": "Stuck"})

    assert api.delete(f"/v1/conversations/{conversation}").status_code == 204

    assert not Escalation.objects.exists()


# --- recall -------------------------------------------------------------------------------------


def test_the_extractor_finds_ids_amounts_quantities_dates_and_names():
    terms = terms_in(
        "Hi, order ORD-123456 to Berlin cost €42, weighs 3 kg; ticket #4521, "
        "call 5551234 on 10 March or 2026-03-10. Dana said 42 EUR."
    )

    assert terms == {
        "id:ORD-123456",
        "name:berlin",
        "amount:EUR 42",
        "quantity:3 kg",
        "id:#4521",
        "number:5551234",
        "date:10 mar",
        "date:2026-03-10",
    }
    # One normal form: the same amount however it is written.
    assert terms_in("It was EUR 42.00") == {"amount:EUR 42"}
    # A pseudonym label is not an id, and a name that opens a sentence is not counted.
    assert terms_in("Refund for <PERSON_12> approved.") == set()


def test_recall_is_the_share_of_terms_memory_still_holds(api, curator_api):
    conversation = _conversation(api)
    _add(
        api,
        conversation,
        ("user", "My order ORD-123456 is stuck in Berlin.", timezone.now()),
        ("assistant", "I can refund the €42 fee.", timezone.now()),
    )
    curator_api.post(
        f"/v1/conversations/{conversation}/observations",
        {"text": "Order ORD-123456 is stuck in Berlin."},
        format="json",
    )

    recall = _metrics(api, conversation)["recall"]

    assert (recall["held"], recall["terms"]) == (2, 3)
    assert recall["share"] == pytest.approx(2 / 3, abs=0.001)


def test_recall_follows_a_change_to_memory(api, curator_api):
    conversation = _conversation(api)
    _add(api, conversation, ("user", "Refund €42 for ORD-123456 please.", timezone.now()))
    assert _metrics(api, conversation)["recall"]["share"] == 0.0

    curator_api.post(
        f"/v1/conversations/{conversation}/observations",
        {"text": "User wants a refund of 42 EUR for order ORD-123456."},
        format="json",
    )

    assert _metrics(api, conversation)["recall"]["share"] == 1.0
    workspace = _metrics(api)["recall"]
    assert workspace["share"] == 1.0
    assert workspace["conversations"] == 1
