"""Legal holds: placing, releasing, and the check memory runs before deleting a
conversation. A hold overrides every retention rule and refuses erasure."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record, require_reason
from governance.models import (
    LegalHold,
)
from governance.selectors import active_hold_for_conversation, legal_hold_refusal
from memory.models import Conversation
from tenancy.models import Workspace


class LegalHoldError(Exception):
    """An active legal hold refuses the change; the message says which hold."""


def _hold_snapshot(hold: LegalHold) -> dict[str, Any]:
    return {
        "conversationId": str(hold.conversation_id) if hold.conversation_id else None,
        "endUserId": hold.end_user_id or None,
        "placedBy": hold.placed_by,
        "placedAt": hold.placed_at.isoformat(),
        "releasedBy": hold.released_by or None,
        "releasedAt": hold.released_at.isoformat() if hold.released_at else None,
    }


def legal_hold_place(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    conversation: Conversation | None = None,
    end_user_id: str = "",
) -> LegalHold:
    """Hold one conversation, or every conversation of one end user (present and
    future), against retention, deletion and erasure until released."""
    reason = require_reason(reason)
    end_user_id = (end_user_id or "").strip()
    if (conversation is None) == (not end_user_id):
        raise MemdeskError(
            "invalid_hold_target",
            "A hold covers exactly one thing: send conversationId or userId, not both.",
        )
    if len(end_user_id) > 255:
        raise MemdeskError(
            "invalid_user_id", "The end user id is at most 255 characters.", field="end_user_id"
        )
    if conversation is not None and conversation.workspace_id != workspace.pk:
        raise MemdeskError(
            "not_found", "Conversation not found in this workspace.", status_code=404
        )
    with transaction.atomic():
        # The same row locks a sweep batch and a delete take first: the hold is placed
        # either wholly before or wholly after any deletion in flight.
        locked = Conversation.objects.select_for_update(no_key=True).filter(workspace=workspace)
        if conversation is not None:
            locked = locked.filter(pk=conversation.pk)
        else:
            locked = locked.filter(user_id=end_user_id)
        found = list(locked.order_by("pk").values_list("pk", flat=True))
        if conversation is not None and not found:
            raise MemdeskError(
                "not_found", "Conversation not found in this workspace.", status_code=404
            )
        hold = LegalHold.objects.create(
            workspace=workspace,
            conversation=conversation,
            end_user_id=end_user_id,
            reason=reason,
            placed_by=actor.label,
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="legal_hold.place",
            target_type="legal_hold",
            target_id=str(hold.pk),
            after=_hold_snapshot(hold),
            reason=reason,
        )
    return hold


def legal_hold_release(*, hold: LegalHold, actor: Actor, reason: str) -> LegalHold:
    reason = require_reason(reason)
    with transaction.atomic():
        released = LegalHold.objects.filter(pk=hold.pk, released_at__isnull=True).update(
            released_at=timezone.now(), released_by=actor.label, release_reason=reason
        )
        if not released:
            raise MemdeskError(
                "hold_already_released",
                f"Legal hold {hold.pk} was already released.",
                status_code=409,
            )
        hold.refresh_from_db()
        audit_record(
            workspace_id=hold.workspace_id,
            actor=actor,
            action="legal_hold.release",
            target_type="legal_hold",
            target_id=str(hold.pk),
            before={"active": True},
            after=_hold_snapshot(hold),
            reason=reason,
        )
    return hold


def legal_holds_released_delete(*, conversation: Conversation) -> int:
    """Before a conversation is deleted: drop its released holds, which would otherwise
    block the delete (the foreign key protects the conversation while any hold row names
    it). Their history stays in the audit trail (legal_hold.place / .release)."""
    return LegalHold.objects.filter(
        conversation_id=conversation.pk, released_at__isnull=False
    ).delete()[0]


def conversation_delete_check(*, conversation: Conversation) -> None:
    """Call before deleting ``conversation``, inside the transaction that deletes it and
    after locking its row (placing a hold takes the same lock, so the check cannot miss
    a hold placed at the same moment). Raises ``LegalHoldError`` while a hold covers
    it; otherwise drops its released holds so the delete can go ahead."""
    hold = active_hold_for_conversation(conversation=conversation)
    if hold is not None:
        raise LegalHoldError(legal_hold_refusal(hold))
    legal_holds_released_delete(conversation=conversation)
