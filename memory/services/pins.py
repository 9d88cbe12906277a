"""Pins: verbatim quotes of messages, served in every context."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from core.actors import Actor
from core.errors import MemdeskError
from core.paging import parse_uuid
from governance.audit.writer import audit_record, audit_text_digest
from memory.models import Conversation, Message, Pin
from memory.services.conversations import memory_version_bump
from memory.services.notes import reason_for_trail
from memory.tokens import token_count


def _pin_snapshot(pin: Pin) -> dict[str, Any]:
    return {
        "messageId": str(pin.message_id),
        "start": pin.start,
        "end": pin.end,
        "textDigest": audit_text_digest(pin.text),
        "tokenCount": pin.token_count,
        "createdBy": pin.created_by,
    }


def _pin_span(content: str, start: int | None, end: int | None) -> tuple[int | None, int | None]:
    """The span as stored: (None, None) for the whole message, else both offsets."""
    if start is None and end is None:
        return None, None
    first = 0 if start is None else start
    last = len(content) if end is None else end
    if first < 0 or first > len(content):
        raise MemdeskError(
            "invalid_span",
            f"start must be between 0 and {len(content)} (the message's length); got {first}.",
            field="start",
        )
    if last > len(content):
        raise MemdeskError(
            "invalid_span",
            f"end must be at most {len(content)} (the message's length); got {last}.",
            field="end",
        )
    if last <= first:
        raise MemdeskError(
            "invalid_span", f"end ({last}) must be greater than start ({first}).", field="end"
        )
    return first, last


def pin_create(
    *,
    conversation: Conversation,
    actor: Actor,
    message_id: uuid.UUID | str,
    start: int | None = None,
    end: int | None = None,
    reason: str = "",
) -> Pin:
    """Pin a verbatim quote of one of the conversation's messages: all of it, or the
    characters ``start:end``. The quote is copied as the message stands (redacted, if
    the workspace redacts at ingest) and served first in every context format."""
    reason = reason_for_trail(reason, workspace_id=conversation.workspace_id, required=None)
    message = (
        Message.objects.filter(
            conversation=conversation, pk=parse_uuid(message_id, field="message_id")
        )
        .only("pk", "content")
        .first()
    )
    if message is None:
        raise MemdeskError(
            "unknown_message",
            "message_id names no message of this conversation.",
            field="message_id",
        )
    start, end = _pin_span(message.content, start, end)
    text = message.content if start is None else message.content[start:end]
    if not text.strip():
        raise MemdeskError(
            "empty_span", "The quote is only whitespace: pin some text.", field="start"
        )
    with transaction.atomic():
        pin = Pin.objects.create(
            conversation=conversation,
            message=message,
            start=start,
            end=end,
            text=text,
            token_count=token_count(text),
            created_by=actor.label,
        )
        memory_version_bump(conversation.pk)
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="pin.create",
            target_type="pin",
            target_id=str(pin.pk),
            after=_pin_snapshot(pin),
            reason=reason,
        )
    return pin


def pin_delete(*, pin: Pin, actor: Actor, reason: str) -> None:
    """Unpin: the quote leaves the context at once; the audit event keeps what it was."""
    reason = reason_for_trail(
        reason,
        workspace_id=pin.conversation.workspace_id,
        required="A reason is required to unpin.",
    )
    with transaction.atomic():
        locked = Pin.objects.select_for_update().filter(pk=pin.pk).first()
        if locked is None:
            raise MemdeskError("not_found", "Pin not found in this conversation.", status_code=404)
        audit_record(
            workspace_id=pin.conversation.workspace_id,
            actor=actor,
            action="pin.delete",
            target_type="pin",
            target_id=str(locked.pk),
            before=_pin_snapshot(locked),
            reason=reason,
        )
        locked.delete()
        memory_version_bump(locked.conversation_id)
