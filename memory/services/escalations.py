"""Escalations: an agent handing a conversation to a person, and the person closing it."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from memory.models import Conversation, Escalation

ESCALATION_REASON_MAX_CHARS = 2000
ESCALATION_NOTE_MAX_CHARS = 2000


def _escalation_snapshot(escalation: Escalation) -> dict[str, Any]:
    # Ids and state only: the reason and the note may hold personal data, kept out of
    # the trail as message content is.
    return {"conversationId": str(escalation.conversation_id), "status": escalation.status}


def _bounded_text(value: str, *, field: str, limit: int, what: str) -> str:
    value = (value or "").strip()
    if not value:
        raise MemdeskError(f"{field}_required", f"{what} is required.", field=field)
    if len(value) > limit:
        raise MemdeskError(
            f"{field}_too_long",
            f"{what} is {len(value)} characters; at most {limit} are kept.",
            field=field,
        )
    return value


def escalation_create(
    *,
    conversation: Conversation,
    actor: Actor,
    reason: str,
    metadata: dict[str, Any] | None = None,
) -> Escalation:
    """Hand the conversation to a person: an open escalation that reviewers see in the
    dashboard's list, audited (ids only)."""
    reason = _bounded_text(
        reason, field="reason", limit=ESCALATION_REASON_MAX_CHARS, what="A reason"
    )
    with transaction.atomic():
        escalation = Escalation.objects.create(
            conversation=conversation,
            reason=reason,
            metadata=metadata or {},
            created_by=actor.label,
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="conversation.escalate",
            target_type="escalation",
            target_id=str(escalation.pk),
            after=_escalation_snapshot(escalation),
        )
    return escalation


def escalation_resolve(*, escalation: Escalation, actor: Actor, note: str) -> Escalation:
    """Close an open escalation with a note saying what the person did; audited (ids
    only). Resolving one that is already resolved is refused, so the first note stands."""
    note = _bounded_text(note, field="note", limit=ESCALATION_NOTE_MAX_CHARS, what="A note")
    with transaction.atomic():
        changed = Escalation.objects.filter(pk=escalation.pk, status=Escalation.Status.OPEN).update(
            status=Escalation.Status.RESOLVED,
            resolved_by=actor.label,
            resolved_at=timezone.now(),
            resolution_note=note,
        )
        if not changed:
            raise MemdeskError(
                "already_resolved",
                "This escalation is already resolved.",
                status_code=409,
            )
        before = _escalation_snapshot(escalation)
        escalation.refresh_from_db()
        audit_record(
            workspace_id=escalation.conversation.workspace_id,
            actor=actor,
            action="escalation.resolve",
            target_type="escalation",
            target_id=str(escalation.pk),
            before=before,
            after=_escalation_snapshot(escalation),
        )
    return escalation
