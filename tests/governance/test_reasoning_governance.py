"""Reasoning steps and tool calls under governance: retention deletes them by age as it
deletes messages, a legal hold keeps them, an erasure removes them with counts in its
receipt, and the redaction at ingest reaches a tool's arguments and output."""

from __future__ import annotations

from governance.erasure import erasure_execute, erasure_request_create
from governance.holds import legal_hold_place
from governance.models import AuditEvent
from governance.retention.plan import retention_dry_run, retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation, ReasoningStep, ToolCall
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.reasoning import reasoning_step_record, tool_call_record
from tenancy.models import Workspace
from tests.governance.builders import ADMIN, days_ago, ids_hash, set_policy

EMAIL = "dana.pierce@example.com"


def _with_reasoning(workspace: Workspace, *, user_id: str = "dana", old: int = 2) -> Conversation:
    """A conversation with ``old`` steps and tool calls 100 days old and one of each new."""
    conversation = conversation_create(workspace=workspace, user_id=user_id)
    messages_append(conversation=conversation, items=[MessageInput(role="user", content="Hi")])
    for n in range(old + 1):
        step = reasoning_step_record(
            conversation=conversation, actor=ADMIN, reasoning=f"thought {n}"
        )
        call = tool_call_record(
            conversation=None,
            workspace=workspace,
            actor=ADMIN,
            tool_name="lookup",
            step_id=step.pk,
            output=f"row {n}",
        )
        if n < old:
            ReasoningStep.objects.filter(pk=step.pk).update(created_at=days_ago(100))
            ToolCall.objects.filter(pk=call.pk).update(created_at=days_ago(100))
    return conversation


def _sweep(workspace: Workspace):
    retention_policy_create(
        workspace=workspace, actor=ADMIN, name="default", message_days=30, reason="DPA"
    )
    sweep = retention_sweep_request(workspace=workspace, actor=ADMIN)
    return retention_sweep(sweep_id=sweep.pk)


def test_retention_deletes_expired_steps_and_tool_calls_as_it_deletes_messages(workspace):
    conversation = _with_reasoning(workspace)
    expired = {
        "reasoningSteps": [
            str(pk)
            for pk in ReasoningStep.objects.filter(created_at__lt=days_ago(30)).values_list(
                "pk", flat=True
            )
        ],
        "toolCalls": [
            str(pk)
            for pk in ToolCall.objects.filter(created_at__lt=days_ago(30)).values_list(
                "pk", flat=True
            )
        ],
    }

    sweep = _sweep(workspace)

    assert sweep.counts["reasoningSteps"] == 2
    assert sweep.counts["toolCalls"] == 2
    assert [s.reasoning for s in conversation.reasoning_steps.all()] == ["thought 2"]
    assert [c.output for c in conversation.tool_calls.all()] == ["row 2"]
    [summary] = AuditEvent.objects.filter(action="retention.sweep")
    assert summary.after["counts"]["toolCalls"] == 2
    assert summary.after["idsSha256"] == ids_hash(expired)


def test_a_dry_run_counts_the_reasoning_a_sweep_would_delete(workspace):
    _with_reasoning(workspace, old=3)
    retention_policy_create(
        workspace=workspace, actor=ADMIN, name="default", message_days=30, reason="DPA"
    )

    preview = retention_dry_run(workspace=workspace, actor=ADMIN)

    assert preview.counts["reasoningSteps"] == 3
    assert preview.counts["toolCalls"] == 3
    assert ReasoningStep.objects.count() == 4


def test_a_held_conversation_keeps_its_reasoning(workspace):
    held = _with_reasoning(workspace, user_id="eve")
    free = _with_reasoning(workspace, user_id="bo")
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case 7", conversation=held)

    sweep = _sweep(workspace)

    assert (sweep.counts["reasoningSteps"], sweep.counts["toolCalls"]) == (2, 2)
    assert held.reasoning_steps.count() == 3 and held.tool_calls.count() == 3
    assert free.reasoning_steps.count() == 1 and free.tool_calls.count() == 1


def test_an_erasure_removes_the_end_users_reasoning_with_counts(workspace):
    theirs = _with_reasoning(workspace, user_id="alice")
    kept = _with_reasoning(workspace, user_id="bob")
    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="alice", reason="GDPR request 12"
    )

    erasure_execute(request_id=request.pk)

    assert not ReasoningStep.objects.filter(conversation_id=theirs.pk).exists()
    assert not ToolCall.objects.filter(conversation_id=theirs.pk).exists()
    assert kept.reasoning_steps.count() == 3 and kept.tool_calls.count() == 3
    request.refresh_from_db()
    assert request.counts["reasoningSteps"] == 3
    assert request.counts["toolCalls"] == 3
    [receipt] = AuditEvent.objects.filter(action="erasure.delete_conversation")
    assert receipt.after["counts"]["reasoningSteps"] == 3


def test_an_erasure_is_refused_while_a_hold_keeps_the_reasoning(workspace):
    conversation = _with_reasoning(workspace, user_id="carol")
    legal_hold_place(workspace=workspace, actor=ADMIN, reason="case", end_user_id="carol")

    request = erasure_request_create(
        workspace=workspace, actor=ADMIN, end_user_id="carol", reason="GDPR"
    )

    assert request.status == "refused"
    assert conversation.reasoning_steps.count() == 3


def test_redaction_at_ingest_reaches_tool_arguments_and_output(workspace):
    set_policy(workspace, redact_at_ingest=True)
    conversation = conversation_create(workspace=workspace, user_id="dana")

    step = reasoning_step_record(
        conversation=conversation, actor=ADMIN, reasoning=f"Mail the receipt to {EMAIL}"
    )
    call = tool_call_record(
        conversation=conversation,
        workspace=workspace,
        actor=ADMIN,
        tool_name="crm_lookup",
        input=f'{{"email": "{EMAIL}"}}',
        output=f'{{"customer": "Dana", "email": "{EMAIL}"}}',
    )

    step.refresh_from_db()
    call.refresh_from_db()
    assert EMAIL not in step.reasoning and "<EMAIL_ADDRESS>" in step.reasoning
    assert EMAIL not in call.input and EMAIL not in call.output
    assert "<EMAIL_ADDRESS>" in call.output


def test_without_redaction_at_ingest_the_text_is_stored_as_sent(workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana")
    call = tool_call_record(
        conversation=conversation,
        workspace=workspace,
        actor=ADMIN,
        tool_name="crm_lookup",
        output=f"email: {EMAIL}",
    )
    call.refresh_from_db()
    assert call.output == f"email: {EMAIL}"
