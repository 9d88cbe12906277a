"""Stored idempotent replies go with the rows they repeat: a retention batch deletes the
replies of the messages, reasoning steps and tool calls it sweeps, in its own
transaction and receipt, and an erasure deletes them with the conversation. Replaying
such a key never answers with what was deleted."""

from __future__ import annotations

from governance.holds import legal_hold_place
from governance.models import RetentionSweep
from governance.retention import sweep as sweep_module
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from governance.tasks import erasure_task
from memory.models import IdempotencyRecord, ReasoningStep, ToolCall
from tests.governance.builders import ADMIN, days_ago, events

# What the probe found kept in stored replies: card numbers and e-mail addresses.
SECRET = "card 4111 1111 1111 1111, write to dana@example.com"
# Imported history, long past the policy's 30 days (a retry sends the same body).
LONG_AGO = "2025-06-01T09:00:00Z"


def _policy(workspace) -> None:
    retention_policy_create(
        workspace=workspace,
        actor=ADMIN,
        name="default",
        message_days=30,
        observation_days=None,
        reflection_days=None,
    )


def _sweep(workspace, *, batch_size: int = 1000):
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    return retention_sweep(sweep_id=sweep.pk, batch_size=batch_size)


def _bulk(api, conversation_id, key: str, *, old: int = 0, new: int = 0):
    """A keyed bulk write of ``old`` messages imported from ``LONG_AGO`` and ``new`` ones."""
    messages = [{"role": "user", "content": SECRET, "createdAt": LONG_AGO}] * old
    messages += [{"role": "assistant", "content": f"reply {n}"} for n in range(new)]
    return api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": messages},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def _ids(response) -> set[str]:
    return {m["id"] for m in response.json()["messages"]}


def _keys() -> set[str]:
    return set(IdempotencyRecord.objects.values_list("key", flat=True))


def test_a_sweep_deletes_the_replies_of_the_messages_it_sweeps_in_the_same_batch(api, workspace):
    _policy(workspace)
    conversation = api.post("/v1/conversations", {}, format="json").json()["id"]
    old = _bulk(api, conversation, "all-old", old=50)
    mixed = _bulk(api, conversation, "half-old", old=1, new=1)
    new = _bulk(api, conversation, "all-new", new=2)

    sweep = _sweep(workspace)

    assert sweep.counts["messages"] == 51
    assert _keys() == {"all-new"}
    [batch] = [e for e in events(workspace, "retention.delete") if e.after["kind"] == "messages"]
    assert batch.after["counts"]["idempotencyRecords"] == 2
    [summary] = events(workspace, "retention.sweep")
    assert summary.after["related"]["idempotencyRecords"] == 2
    # A replay answers nothing of the swept messages: the key is new again.
    for key, first, n_old, n_new in (("all-old", old, 50, 0), ("half-old", mixed, 1, 1)):
        again = _bulk(api, conversation, key, old=n_old, new=n_new)
        assert again.status_code == 201
        assert "Idempotent-Replayed" not in again
        assert _ids(again).isdisjoint(_ids(first))
    kept = _bulk(api, conversation, "all-new", new=2)
    assert kept["Idempotent-Replayed"] == "true"
    assert _ids(kept) == _ids(new)


def test_each_batch_deletes_the_replies_of_its_own_messages(api, workspace):
    _policy(workspace)
    conversations = [api.post("/v1/conversations", {}, format="json").json()["id"] for _ in "ab"]
    for n, conversation in enumerate(conversations):
        _bulk(api, conversation, f"old-{n}", old=1)
        _bulk(api, conversation, f"new-{n}", new=1)

    _sweep(workspace, batch_size=1)

    assert _keys() == {"new-0", "new-1"}
    batches = [e.after["counts"] for e in events(workspace, "retention.delete")]
    assert [(b["messages"], b["idempotencyRecords"]) for b in batches] == [(1, 1), (1, 1)]


def test_a_batch_that_fails_keeps_its_messages_and_their_replies(api, workspace, monkeypatch):
    _policy(workspace)
    conversation = api.post("/v1/conversations", {}, format="json").json()["id"]
    first = _bulk(api, conversation, "all-old", old=2)

    def failing_receipt(**kwargs):
        raise RuntimeError("the audit trail is unavailable")

    monkeypatch.setattr(sweep_module, "audit_record", failing_receipt)
    sweep = _sweep(workspace)

    assert sweep.status == RetentionSweep.Status.FAILED
    assert _keys() == {"all-old"}
    again = _bulk(api, conversation, "all-old", old=2)
    assert again["Idempotent-Replayed"] == "true"
    assert _ids(again) == _ids(first)


def test_replies_in_a_held_conversation_are_kept_and_replayed(api, workspace):
    _policy(workspace)
    conversation = api.post("/v1/conversations", {"userId": "alice"}, format="json").json()["id"]
    first = _bulk(api, conversation, "all-old", old=3)
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 9", end_user_id="alice")

    _sweep(workspace)

    assert _keys() == {"all-old"}
    again = _bulk(api, conversation, "all-old", old=3)
    assert again["Idempotent-Replayed"] == "true"
    assert _ids(again) == _ids(first)


def test_a_sweep_deletes_the_replies_of_the_reasoning_it_sweeps(api, workspace):
    _policy(workspace)
    conversation = api.post("/v1/conversations", {}, format="json").json()["id"]
    step_body = {"conversationId": conversation, "reasoning": SECRET}
    call_body = {"conversationId": conversation, "toolName": "lookup", "output": SECRET}
    step = api.post("/v1/reasoning/steps", step_body, format="json", HTTP_IDEMPOTENCY_KEY="s")
    call = api.post("/v1/reasoning/tool-calls", call_body, format="json", HTTP_IDEMPOTENCY_KEY="c")
    fresh = api.post(
        "/v1/reasoning/steps",
        {"conversationId": conversation, "reasoning": "today"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="fresh",
    )
    ReasoningStep.objects.filter(pk=step.json()["id"]).update(created_at=days_ago(100))
    ToolCall.objects.filter(pk=call.json()["id"]).update(created_at=days_ago(100))

    sweep = _sweep(workspace)

    assert (sweep.counts["reasoningSteps"], sweep.counts["toolCalls"]) == (1, 1)
    assert _keys() == {"fresh"}
    by_kind = {e.after["kind"]: e.after["counts"] for e in events(workspace, "retention.delete")}
    assert by_kind["reasoningSteps"]["idempotencyRecords"] == 1
    assert by_kind["toolCalls"]["idempotencyRecords"] == 1
    assert fresh.json()["id"] in {
        str(pk) for pk in ReasoningStep.objects.values_list("pk", flat=True)
    }


def test_after_an_erasure_a_replayed_key_answers_nothing_of_what_was_erased(
    api, admin_api, workspace
):
    theirs = api.post("/v1/conversations", {"userId": "alice"}, format="json").json()["id"]
    others = api.post("/v1/conversations", {"userId": "bob"}, format="json").json()["id"]
    _bulk(api, theirs, "alice-1", new=2)
    api.post(
        "/v1/reasoning/steps",
        {"conversationId": theirs, "reasoning": SECRET},
        format="json",
        HTTP_IDEMPOTENCY_KEY="alice-2",
    )
    _bulk(api, others, "bob-1", new=1)

    request = admin_api.post(
        "/v1/erasure-requests", {"userId": "alice", "reason": "GDPR request 12"}, format="json"
    ).json()
    assert erasure_task.apply(args=[request["id"]]).get() == "completed"

    assert _keys() == {"bob-1"}
    assert (
        admin_api.get(f"/v1/erasure-requests/{request['id']}").json()["counts"][
            "idempotencyRecords"
        ]
        == 2
    )
    replayed = _bulk(api, theirs, "alice-1", new=2)
    assert replayed.status_code == 404
    assert "reply 0" not in replayed.content.decode()


def test_a_reply_goes_when_a_redaction_rewrites_a_message_it_repeats(
    curator_api, admin_api, workspace
):
    """A value left in the text for review (the policy redacts at ingest; a bare phone
    number scores in the review band) is redacted once approved: the stored reply that
    repeats the message must not replay the value."""
    from governance.models import RedactionFinding
    from tests.governance.builders import set_policy

    set_policy(workspace, redact_at_ingest=True)
    conversation_id = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    body = {"role": "user", "content": "Call me at 859-787-9085 please"}
    path = f"/v1/conversations/{conversation_id}/messages"
    first = curator_api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k-phone")
    assert first.status_code == 201 and "859-787-9085" in first.content.decode()
    pending = RedactionFinding.objects.get(status=RedactionFinding.Status.PENDING_REVIEW)
    approved = admin_api.post(
        f"/v1/redaction/findings/{pending.pk}/approve", {"reason": "a phone"}, format="json"
    )
    assert approved.status_code == 200, approved.content
    assert not IdempotencyRecord.objects.filter(key="k-phone").exists()
    again = curator_api.post(path, body, format="json", HTTP_IDEMPOTENCY_KEY="k-phone")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again
