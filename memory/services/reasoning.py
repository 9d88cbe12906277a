"""Reasoning memory: an agent's reasoning steps and tool calls."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from governance.redaction.gates import reasoning_redaction_at_ingest
from memory.models import Conversation, ReasoningStep, ToolCall
from tenancy.models import Workspace


def _check_reasoning_text(text: str, field: str) -> None:
    if len(text) > settings.MEMDESK_MAX_MESSAGE_CHARS:
        raise MemdeskError(
            "content_too_long",
            f"{field} is {len(text)} characters; the limit is "
            f"{settings.MEMDESK_MAX_MESSAGE_CHARS}.",
            field=field,
        )


def _stored_texts(*, workspace_id: uuid.UUID, texts: list[str]) -> list[str]:
    """The texts as stored: redacted when the policy redacts at ingest."""
    redacted = reasoning_redaction_at_ingest(workspace_id=workspace_id, texts=texts)
    return texts if redacted is None else redacted


def _after_seq_locked(conversation: Conversation) -> int:
    """Lock the conversation (as an append does, so a step and a message recorded at
    once are ordered) and return the seq of its last message."""
    updated = Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    if not updated:
        raise MemdeskError("not_found", "Conversation not found.", status_code=404)
    return Conversation.objects.values_list("last_seq", flat=True).get(pk=conversation.pk)


def reasoning_step_record(
    *,
    conversation: Conversation,
    actor: Actor,
    reasoning: str,
    action_taken: str = "",
    result: str = "",
    metadata: dict[str, Any] | None = None,
) -> ReasoningStep:
    """Record one reasoning step of the agent in ``conversation``, numbered after the
    steps before it and placed after the conversation's last message. Whitespace-only
    text is stored as empty (the NAMS Python client sends " " for a missing thought),
    but a step must say something. Its texts are redacted at ingest when the policy
    says so; the audit event names it, never its text."""
    texts = [t if t.strip() else "" for t in (reasoning, action_taken, result)]
    if not any(texts):
        raise MemdeskError(
            "empty_step",
            "A reasoning step needs reasoning, actionTaken or result: all are empty.",
            field="reasoning",
        )
    for text, name in zip(texts, ("reasoning", "action_taken", "result"), strict=True):
        _check_reasoning_text(text, name)
    reasoning, action_taken, result = _stored_texts(
        workspace_id=conversation.workspace_id, texts=texts
    )
    with transaction.atomic():
        after_seq = _after_seq_locked(conversation)
        last = (
            ReasoningStep.objects.filter(conversation=conversation)
            .order_by("-step_number")
            .values_list("step_number", flat=True)
            .first()
        )
        step = ReasoningStep.objects.create(
            conversation=conversation,
            step_number=(last or 0) + 1,
            after_seq=after_seq,
            reasoning=reasoning,
            action_taken=action_taken,
            result=result,
            metadata=metadata or {},
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="reasoning_step.create",
            target_type="reasoning_step",
            target_id=str(step.pk),
            after={
                "conversationId": str(conversation.pk),
                "stepNumber": step.step_number,
                "afterSeq": after_seq,
            },
        )
    return step


def tool_call_record(
    *,
    conversation: Conversation | None,
    actor: Actor,
    workspace: Workspace,
    tool_name: str,
    step_id: uuid.UUID | None = None,
    input: str = "",
    output: str = "",
    status: str = ToolCall.Status.SUCCESS,
    duration_ms: int | None = None,
    error: str = "",
    metadata: dict[str, Any] | None = None,
) -> ToolCall:
    """Record one tool call in ``conversation``, or in the conversation of the step
    ``step_id`` names (NAMS clients send only the step). ``input`` and ``output`` are
    kept as text (the clients send JSON-encoded text), redacted at ingest when the
    policy says so. The Observer reads the output as tool output with the message that
    follows the call. The audit event names the call and its tool, never its input or
    output."""
    if not tool_name.strip():
        raise MemdeskError("empty_tool_name", "toolName must not be empty.", field="tool_name")
    if status not in ToolCall.Status.values:
        raise MemdeskError(
            "invalid_status",
            f"status must be one of {', '.join(ToolCall.Status.values)}; got {status!r}.",
            field="status",
        )
    step = None
    if step_id is not None:
        step = (
            ReasoningStep.objects.filter(pk=step_id, conversation__workspace=workspace)
            .select_related("conversation")
            .first()
        )
        if step is None:
            raise MemdeskError(
                "not_found",
                "No reasoning step with this stepId in this workspace.",
                field="step_id",
                status_code=404,
            )
        if conversation is not None and step.conversation_id != conversation.pk:
            raise MemdeskError(
                "conflicting_fields",
                "stepId names a step of another conversation than conversationId.",
                field="step_id",
            )
        conversation = step.conversation
    if conversation is None:
        raise MemdeskError(
            "conversation_required",
            "Send conversationId, or the stepId of a step the call belongs to.",
            field="conversation_id",
        )
    for text, name in ((input, "input"), (output, "output"), (error, "error")):
        _check_reasoning_text(text, name)
    input, output, error = _stored_texts(
        workspace_id=conversation.workspace_id, texts=[input, output, error]
    )
    with transaction.atomic():
        after_seq = _after_seq_locked(conversation)
        call = ToolCall.objects.create(
            conversation=conversation,
            step=step,
            after_seq=after_seq,
            tool_name=tool_name,
            input=input,
            output=output,
            status=status,
            duration_ms=duration_ms,
            error=error,
            metadata=metadata or {},
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="tool_call.create",
            target_type="tool_call",
            target_id=str(call.pk),
            after={
                "conversationId": str(conversation.pk),
                "stepId": str(step.pk) if step else None,
                "toolName": tool_name,
                "status": status,
                "afterSeq": after_seq,
            },
        )
    return call
