"""Builders shared by the governance tests (redaction policy, retention, holds, erasure)
and the readers that compare what they left behind."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.models import (
    AuditEvent,
    ContextRead,
    MessageScan,
    RedactionPolicy,
    RestrictedOriginal,
)
from governance.redaction.policy import POLICY_FIELDS, redaction_policy_get_or_create
from governance.redaction.scan import content_digest
from memory.models import (
    Conversation,
    Message,
    Observation,
    ObservationVersion,
    ReasoningStep,
    Reflection,
    ReflectionVersion,
    ToolCall,
)
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Workspace
from tests.governance.factories import RedactionFindingFactory
from tests.memory.factories import ObservationFactory, ReflectionFactory

ADMIN = SYSTEM_ACTOR


def days_ago(days: float) -> datetime:
    return timezone.now() - timedelta(days=days)


def conversation_with_tiers(
    workspace: Workspace,
    *,
    user_id: str = "",
    tags: list[str] | None = None,
    old: int = 3,
    new: int = 2,
    age_days: float = 100,
    with_memory: bool = True,
) -> Conversation:
    """``old`` messages, observations and reflections ``age_days`` old, ``new`` of each
    from today (messages only without ``with_memory``)."""
    conversation = conversation_create(workspace=workspace, user_id=user_id)
    if tags:
        Conversation.objects.filter(pk=conversation.pk).update(tags=tags)
        conversation.tags = tags
    items = [
        MessageInput(role="user", content=f"old message {n}", created_at=days_ago(age_days))
        for n in range(old)
    ] + [MessageInput(role="assistant", content=f"new message {n}") for n in range(new)]
    for start in range(0, len(items), 100):  # the bulk limit
        messages_append(conversation=conversation, items=items[start : start + 100])
    for n in range(old if with_memory else 0):
        reflection = ReflectionFactory(conversation=conversation)
        Reflection.objects.filter(pk=reflection.pk).update(created_at=days_ago(age_days))
        ObservationFactory(
            conversation=conversation,
            observed_at=days_ago(age_days),
            reflection=reflection if n == 0 else None,
            status="reflected" if n == 0 else "active",
        )
    for _ in range(new if with_memory else 0):
        ReflectionFactory(conversation=conversation)
        ObservationFactory(conversation=conversation)
    return conversation


def tier_rows(conversations: Iterable[Conversation]) -> dict[str, set[tuple[str, str]]]:
    """(conversation id, row id) of every row of each tier, as strings."""
    ids = [c.pk for c in conversations]
    return {
        kind: {
            (str(c), str(pk))
            for pk, c in model.objects.filter(conversation_id__in=ids).values_list(
                "pk", "conversation_id"
            )
        }
        for kind, model in (
            ("contextReads", ContextRead),
            ("messages", Message),
            ("observations", Observation),
            ("reflections", Reflection),
            ("reasoningSteps", ReasoningStep),
            ("toolCalls", ToolCall),
        )
    }


LINE_KIND = {
    "contextReads": "context_read",
    "messages": "message",
    "observations": "observation",
    "reflections": "reflection",
    "reasoningSteps": "reasoning_step",
    "toolCalls": "tool_call",
}


def ids_hash(deleted: dict[str, Iterable[Any]]) -> str:
    """The receipts' hash, recomputed: SHA-256 over sorted '<kind>:<id>' lines."""
    lines = sorted(f"{LINE_KIND[kind]}:{pk}\n" for kind, ids in deleted.items() for pk in ids)
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def erasure_hash(deleted: dict[str, Iterable[tuple[str, str]]]) -> str:
    """An erasure summary's hash: sorted '<conversation>:<kind>:<id>' lines."""
    lines = sorted(
        f"{conversation}:{LINE_KIND[kind]}:{pk}\n"
        for kind, rows in deleted.items()
        for conversation, pk in rows
    )
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def events(workspace: Workspace, action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(workspace=workspace, action=action).order_by("sequence"))


def redaction_traces(message: Message, *, text: str = "the original") -> None:
    """What scanning and redacting a message leave behind: its scan, a finding and a
    kept original."""
    conversation = message.conversation
    MessageScan.objects.create(
        message_id=message.pk,
        workspace_id=conversation.workspace_id,
        conversation=conversation,
        content_digest=content_digest(message.content),
        policy_version=1,
    )
    RedactionFindingFactory(conversation=conversation, target_id=message.pk)
    RestrictedOriginal.objects.create(
        workspace_id=conversation.workspace_id,
        conversation=conversation,
        target_type="message",
        target_id=message.pk,
        text=text,
    )


def earlier_reflection_version(reflection: Reflection, *, text: str = "earlier text") -> None:
    """An edit's kept version of a reflection."""
    ReflectionVersion.objects.create(
        reflection_id=reflection.pk,
        conversation_id=reflection.conversation_id,
        version=1,
        text=text,
        priority="medium",
        change="edit",
        reason="typo",
        changed_by="user:1",
    )


def earlier_version(observation: Observation, *, text: str = "earlier text") -> None:
    """An edit's kept version of an observation."""
    ObservationVersion.objects.create(
        observation_id=observation.pk,
        conversation_id=observation.conversation_id,
        version=1,
        text=text,
        priority="medium",
        change="edit",
        reason="typo",
        changed_by="user:1",
    )


def set_policy(workspace: Workspace, **fields: Any) -> RedactionPolicy:
    """Set policy fields directly (the API tests go through the service instead)."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.version += 1
    policy.save()
    return policy


def whole_policy_body(**changes: Any) -> dict[str, Any]:
    """A body for ``PUT /v1/redaction/policy``, which needs every field: the default
    policy's, with ``changes`` (wire names)."""
    defaults = RedactionPolicy()
    return {wire: getattr(defaults, name) for name, wire in POLICY_FIELDS.items()} | changes


def tamper(sql: str, params: list[object]) -> None:
    """Change the table behind the application's back, as someone with database access
    could. On PostgreSQL that needs the append-only trigger switched off first."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL session_replication_role = replica")
        cursor.execute(sql, params)
