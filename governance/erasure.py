"""Erasure of one end user (the right to be forgotten): every tier of every conversation
of theirs, with receipts."""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import reset_queries, transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from core.signals import rows_erased
from governance.audit.writer import audit_record, require_reason
from governance.holds import legal_holds_released_delete
from governance.models import (
    ErasureRequest,
    LegalHold,
)
from governance.redaction.pseudonyms import pseudonym_ids_seen_in, pseudonyms_forget_unheld
from governance.retention.common import (
    ERASURE_HASH_OF,
    HASH_OF,
    TIERS,
)
from governance.selectors import (
    active_hold_for_conversation,
    holds_covering_end_user,
    legal_hold_refusal,
)
from memory.models import Conversation
from tenancy.models import Workspace

logger = logging.getLogger(__name__)


def _erasure_snapshot(request: ErasureRequest) -> dict[str, Any]:
    return {"endUserId": request.end_user_id, "status": request.status, "counts": request.counts}


def _refusal(holds: list[LegalHold]) -> str:
    message = legal_hold_refusal(holds[0])
    if len(holds) > 1:
        message += f" {len(holds) - 1} more active hold(s) also cover this end user."
    return message


def erasure_request_create(
    *, workspace: Workspace, actor: Actor, end_user_id: str, reason: str
) -> ErasureRequest:
    """Record a right-to-be-forgotten request and queue it. Under a legal hold the
    request is recorded as refused, with the reason, and nothing is queued."""
    reason = require_reason(reason)
    end_user_id = (end_user_id or "").strip()
    if not end_user_id or len(end_user_id) > 255:
        raise MemdeskError(
            "invalid_user_id", "The end user id must be 1 to 255 characters.", field="end_user_id"
        )
    with transaction.atomic():
        request = ErasureRequest.objects.create(
            workspace=workspace,
            end_user_id=end_user_id,
            reason=reason,
            requested_by=actor.label,
            requested_by_role=actor.role,
        )
        holds = holds_covering_end_user(workspace_id=workspace.pk, end_user_id=end_user_id)
        if holds:
            request.status = ErasureRequest.Status.REFUSED
            request.error = _refusal(holds)[:500]
            request.completed_at = timezone.now()
            request.save(update_fields=["status", "error", "completed_at"])
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="erasure.refuse" if holds else "erasure.request",
            target_type="erasure_request",
            target_id=str(request.pk),
            after={**_erasure_snapshot(request), "holdIds": [h.pk for h in holds]},
            reason=reason,
        )
        if not holds:
            enqueue_on_commit("governance.tasks.erasure_task", request.pk)
    return request


class _ErasureRefused(Exception):
    def __init__(self, holds: list[LegalHold]) -> None:
        super().__init__("legal hold")
        self.holds = holds


def _deleted_key(label: str) -> str:
    # "memory.ObserverRun" -> "observerRuns"
    name = label.rpartition(".")[2]
    return name[0].lower() + name[1:] + "s"


def _erase_conversation(
    request: ErasureRequest, conversation_id: Any, digest: Any, actor: Actor
) -> dict[str, int] | None:
    """Delete one conversation of the end user with everything under it, in one
    transaction with its receipt."""
    with transaction.atomic():
        # FOR UPDATE (not NO KEY): it also waits out inserts that reference the row, so
        # an Observer run cannot add observations the receipt would not list.
        conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if conversation is None:
            return None  # deleted meanwhile, with its own receipt
        hold = active_hold_for_conversation(conversation=conversation)
        if hold is not None:
            raise _ErasureRefused([hold])
        target_id = str(conversation.pk)  # delete() below clears the pk
        conversation_digest = hashlib.sha256()
        # Streamed into both hashes, never held: one conversation may have millions of
        # rows. Kinds in order, ids ascending, so the lines arrive sorted; the prefix
        # keeps the summary's lines sorted across conversations taken in id order.
        for tier in TIERS:
            ids = (
                tier.model.objects.filter(conversation_id=conversation.pk)  # type: ignore[attr-defined]  # Tier.model is type[Model]
                .order_by("pk")
                .values_list("pk", flat=True)
                .iterator(chunk_size=5000)
            )
            for pk in ids:
                line = f"{tier.line_kind}:{pk}\n"
                conversation_digest.update(line.encode())
                digest.update(f"{target_id}:{line}".encode())
        legal_holds = legal_holds_released_delete(conversation=conversation)
        pseudonyms = pseudonym_ids_seen_in(conversation_ids=[conversation.pk])
        _, deleted = conversation.delete()
        removed = {_deleted_key(label): n for label, n in deleted.items() if n}
        if legal_holds:
            removed["legalHolds"] = legal_holds
        # The end user's values that no remaining message holds: their pseudonyms in
        # other conversations' memory become anonymous.
        forgotten = pseudonyms_forget_unheld(
            workspace_id=request.workspace_id,
            pseudonym_ids=pseudonyms,
            actor=actor,
            target_type="erasure_request",
            target_id=str(request.pk),
            reason=request.reason,
        )
        if forgotten:
            removed["pseudonymsForgotten"] = forgotten
        audit_record(
            workspace_id=request.workspace_id,
            actor=actor,
            action="erasure.delete_conversation",
            target_type="conversation",
            target_id=target_id,
            after={
                "erasureRequestId": request.pk,
                "counts": removed,
                "idsSha256": conversation_digest.hexdigest(),
                "hashOf": HASH_OF,
            },
            reason=request.reason,
        )
    return removed


@dataclass(frozen=True)
class ErasureOutcome:
    request: ErasureRequest
    retry: bool = False


def erasure_execute(*, request_id: int, final_attempt: bool = True) -> ErasureOutcome:
    """Erase every tier of one end user's memory: each of their conversations, in id order and
    one transaction each, with all it holds (messages, observations, reflections,
    Observer and Reflector runs, redaction findings, restricted originals, observation
    versions, released holds, pseudonym sightings, the stored idempotent replies that
    repeat them), forgetting the pseudonyms no other message holds. Then
    ``core.signals.rows_erased`` lets memory purge its search index of the deleted words
    (SQLite's FTS5 keeps them in older segments). A legal hold found at any point stops
    it as refused; what was erased before stays erased, with its receipts."""
    claimed = ErasureRequest.objects.filter(
        pk=request_id, status=ErasureRequest.Status.PENDING
    ).update(status=ErasureRequest.Status.RUNNING)
    request = ErasureRequest.objects.get(pk=request_id)
    if not claimed:
        return ErasureOutcome(request)
    actor = Actor.from_label(request.requested_by, role=request.requested_by_role)
    totals: Counter[str] = Counter()
    digest = hashlib.sha256()
    erased: set[str] = set()
    status, error = ErasureRequest.Status.COMPLETED, ""
    try:
        holds = holds_covering_end_user(
            workspace_id=request.workspace_id, end_user_id=request.end_user_id
        )
        if holds:
            raise _ErasureRefused(holds)
        last_pk = None
        while True:
            page = Conversation.objects.filter(
                workspace_id=request.workspace_id, user_id=request.end_user_id
            )
            if last_pk is not None:
                page = page.filter(pk__gt=last_pk)
            ids = list(page.order_by("pk").values_list("pk", flat=True)[:100])
            if not ids:
                break
            last_pk = ids[-1]
            for conversation_id in ids:
                removed = _erase_conversation(request, conversation_id, digest, actor)
                if removed is not None:
                    totals.update(removed)
                    erased.add(str(conversation_id))
                reset_queries()
    except _ErasureRefused as refused:
        status, error = ErasureRequest.Status.REFUSED, _refusal(refused.holds)
    except Exception as exc:  # noqa: BLE001 - recorded on the request; never the content
        logger.exception("erasure %s failed after %s conversations", request.pk, len(erased))
        if not final_attempt:
            # Erasure is idempotent (what is gone stays gone): give it back for a retry.
            ErasureRequest.objects.filter(pk=request.pk).update(
                status=ErasureRequest.Status.PENDING, counts=dict(totals)
            )
            request.refresh_from_db()
            return ErasureOutcome(request, retry=True)
        if isinstance(exc, SoftTimeLimitExceeded):
            error = (
                "the erasure reached its time limit of "
                f"{settings.CELERY_TASK_SOFT_TIME_LIMIT} s on its last attempt; "
                "request it again to erase the rest"
            )
        else:
            error = f"{type(exc).__name__} (see worker log)"
        status = ErasureRequest.Status.FAILED
    counts = {key: n for key, n in totals.items() if n}
    with transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(
            status=status, error=error[:500], counts=counts, completed_at=timezone.now()
        )
        request.refresh_from_db()
        audit_record(
            workspace_id=request.workspace_id,
            actor=actor,
            action={
                ErasureRequest.Status.COMPLETED: "erasure.complete",
                ErasureRequest.Status.REFUSED: "erasure.refuse",
            }.get(status, "erasure.fail"),
            target_type="erasure_request",
            target_id=str(request.pk),
            after={
                **_erasure_snapshot(request),
                "error": error,
                "idsSha256": digest.hexdigest(),
                "hashOf": ERASURE_HASH_OF,
            },
            reason=request.reason,
        )
    if erased:
        rows_erased.send(
            sender=ErasureRequest, workspace_id=request.workspace_id, conversation_ids=erased
        )
    logger.info("erasure %s: %s, deleted %s", request.pk, status, counts)
    return ErasureOutcome(request)
