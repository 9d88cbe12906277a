"""Writes sent with an ``Idempotency-Key``: run once, replayed after."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.db import IntegrityError, transaction

from core.errors import MemdeskError
from memory.models import Conversation, IdempotencyRecord
from tenancy.models import Workspace


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def idempotent_write(
    *,
    workspace: Workspace,
    key: str | None,
    fingerprint: str,
    write: Callable[[], tuple[int, Any, Conversation]],
) -> tuple[int, Any, bool]:
    """Run ``write`` once per ``Idempotency-Key``; replay its response for repeats.

    ``write`` returns (status, body, the conversation written to); the function returns
    (status, body, replayed). The record is inserted in the write's own
    transaction, so a crash leaves neither, and of two concurrent requests with one key
    the loser's insert fails, its write rolls back, and it replays the winner's response.
    """
    if not key:
        status, body, _ = write()
        return status, body, False
    if len(key) > 255:
        raise MemdeskError(
            "invalid_idempotency_key", "Idempotency-Key is longer than 255 characters."
        )
    existing = IdempotencyRecord.objects.filter(workspace=workspace, key=key).first()
    if existing is None:
        try:
            with transaction.atomic():
                status, body, conversation = write()
                IdempotencyRecord.objects.create(
                    workspace=workspace,
                    conversation=conversation,
                    key=key,
                    request_fingerprint=fingerprint,
                    response_status=status,
                    response_body=body,
                )
            return status, body, False
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
