"""Writes sent with an ``Idempotency-Key``: run once, replayed after, for as long as the
reply may live (``MEMDESK_IDEMPOTENCY_TTL_HOURS``) and the rows it repeats are stored."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from memory.models import Conversation, IdempotencyRecord, Message, ReasoningStep, ToolCall
from tenancy.models import Workspace

# Expired replies deleted per transaction, each batch with its receipts.
EXPIRY_BATCH_SIZE = 5_000
EXPIRY_HASH_OF = "sha256 of sorted lines 'idempotency_record:<id>\\n'"


@dataclass(frozen=True)
class Reply:
    """What a keyed write answered: its status and body, the conversation it wrote to,
    and the rows the body repeats (the messages it appended, or the one reasoning step
    or tool call it recorded), which the stored reply must not outlive."""

    status: int
    body: Any
    conversation: Conversation
    repeats: Sequence[Message] | ReasoningStep | ToolCall = ()


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def idempotency_cutoff(now: datetime | None = None) -> datetime:
    """Replies stored before this have expired."""
    return (now or timezone.now()) - timedelta(hours=settings.MEMDESK_IDEMPOTENCY_TTL_HOURS)


def idempotent_write(
    *,
    workspace: Workspace,
    key: str | None,
    fingerprint: str,
    write: Callable[[], Reply],
) -> tuple[int, Any, bool]:
    """Run ``write`` once per ``Idempotency-Key``; replay its reply for repeats.

    Returns (status, body, replayed). The record is inserted in the write's own
    transaction, so a crash leaves neither, and of two concurrent requests with one key
    the loser's insert fails, its write rolls back, and it replays the winner's reply.
    A reply past its lifetime, or one repeating a row no longer stored, is never
    replayed: the key is free again, as Stripe's are after a day, and the request runs
    as a new one (with any body).
    """
    if not key:
        reply = write()
        return reply.status, reply.body, False
    if len(key) > 255:
        raise MemdeskError(
            "invalid_idempotency_key", "Idempotency-Key is longer than 255 characters."
        )
    existing = IdempotencyRecord.objects.filter(workspace=workspace, key=key).first()
    stale_pk = None
    if existing is not None and not _replayable(existing):
        stale_pk, existing = existing.pk, None
    if existing is None:
        try:
            with transaction.atomic():
                if stale_pk is not None:
                    # By id: a request that replaced it meanwhile wins at the insert.
                    IdempotencyRecord.objects.filter(pk=stale_pk).delete()
                reply = write()
                IdempotencyRecord.objects.create(
                    workspace=workspace,
                    conversation=reply.conversation,
                    key=key,
                    request_fingerprint=fingerprint,
                    response_status=reply.status,
                    response_body=reply.body,
                    **_repeated_rows(reply),
                )
            return reply.status, reply.body, False
        except IntegrityError:
            existing = IdempotencyRecord.objects.filter(workspace=workspace, key=key).first()
            if existing is None:
                raise
    if existing.request_fingerprint != fingerprint:
        raise MemdeskError(
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request body.",
            status_code=409,
        )
    return existing.response_status, existing.response_body, True


def _replayable(record: IdempotencyRecord) -> bool:
    if record.created_at < idempotency_cutoff():
        return False
    # Every path that deletes a row deletes its replies too; this keeps a path that
    # forgot from ever answering with deleted content.
    return (
        record.repeats == IdempotencyRecord.Repeats.NOTHING
        or not IdempotencyRecord.objects.filter(pk=record.pk).with_rows_gone().exists()
    )


def _repeated_rows(reply: Reply) -> dict[str, Any]:
    """The record's fields naming the rows its reply repeats. The messages of one
    append have consecutive seqs (taken under the conversation's lock)."""
    rows = reply.repeats
    if isinstance(rows, ReasoningStep):
        return {"repeats": IdempotencyRecord.Repeats.REASONING_STEP, "row_id": rows.pk}
    if isinstance(rows, ToolCall):
        return {"repeats": IdempotencyRecord.Repeats.TOOL_CALL, "row_id": rows.pk}
    if not rows:
        return {}
    seqs = [message.seq for message in rows]
    return {
        "repeats": IdempotencyRecord.Repeats.MESSAGES,
        "first_seq": min(seqs),
        "last_seq": max(seqs),
    }


def idempotency_records_expire(*, now: datetime | None = None) -> int:
    """Delete the stored replies older than ``MEMDESK_IDEMPOTENCY_TTL_HOURS`` (beat runs
    it hourly; replays ignore them already), ``EXPIRY_BATCH_SIZE`` per transaction, with
    one receipt per workspace and batch: how many and the hash of their ids, never a
    key (the client's words) nor the content. Returns how many were deleted."""
    cutoff = idempotency_cutoff(now)
    deleted = 0
    while True:
        with transaction.atomic():
            # SKIP LOCKED: a record a request is replacing right now is left to it.
            batch = list(
                IdempotencyRecord.objects.select_for_update(skip_locked=True)
                .filter(created_at__lt=cutoff)
                .order_by("created_at")
                .values_list("pk", "workspace_id")[:EXPIRY_BATCH_SIZE]
            )
            if not batch:
                return deleted
            IdempotencyRecord.objects.filter(pk__in=[pk for pk, _ in batch]).delete()
            by_workspace: dict[Any, list[int]] = defaultdict(list)
            for pk, workspace_id in batch:
                by_workspace[workspace_id].append(pk)
            for workspace_id, ids in by_workspace.items():
                _expiry_receipt(workspace_id, ids, cutoff)
        deleted += len(batch)
        if len(batch) < EXPIRY_BATCH_SIZE:
            return deleted


def _expiry_receipt(workspace_id: Any, ids: list[int], cutoff: datetime) -> None:
    lines = sorted(f"idempotency_record:{pk}\n" for pk in ids)
    hours = settings.MEMDESK_IDEMPOTENCY_TTL_HOURS
    audit_record(
        workspace_id=workspace_id,
        actor=SYSTEM_ACTOR,
        action="idempotency.expire",
        target_type="workspace",
        target_id=str(workspace_id),
        after={
            "counts": {"idempotencyRecords": len(ids)},
            "ttlHours": hours,
            "expiredBefore": cutoff.isoformat(),
            "idsSha256": hashlib.sha256("".join(lines).encode()).hexdigest(),
            "hashOf": EXPIRY_HASH_OF,
        },
        reason=f"stored idempotent replies expire after {hours} h (MEMDESK_IDEMPOTENCY_TTL_HOURS)",
    )
