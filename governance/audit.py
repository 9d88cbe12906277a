"""The audit trail's writer: every change to memory or governance appends one event to
its workspace's hash chain, in the transaction that makes the change."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.utils import timezone
from django.utils.ipv6 import clean_ipv6_address

from core.actors import Actor
from core.errors import MemdeskError
from governance.models import (
    AuditChainHead,
    AuditEvent,
)

GENESIS_HASH = "0" * 64


def audit_event_hash(event: AuditEvent) -> str:
    """SHA-256 over every field that matters and the previous event's hash.

    JSON with sorted keys, so the same event hashes the same after a round trip through
    PostgreSQL's jsonb (which reorders keys) or SQLite's text."""
    content = {
        "workspace": str(event.workspace_id),
        "sequence": event.sequence,
        "actor_type": event.actor_type,
        "actor_id": event.actor_id,
        "actor_role": event.actor_role,
        "action": event.action,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "before": event.before,
        "after": event.after,
        "reason": event.reason,
        "request_id": event.request_id,
        "ip_address": event.ip_address,
        "created_at": event.created_at.isoformat(),
        "prev_hash": event.prev_hash,
    }
    canonical = json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=DjangoJSONEncoder
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _json_safe(value: dict[str, Any] | None) -> dict[str, Any] | None:
    # Stored exactly as it will be read back, so the hash computed now still verifies.
    return None if value is None else json.loads(json.dumps(value, cls=DjangoJSONEncoder))


def audit_record(
    *,
    workspace_id: Any,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str = "",
) -> AuditEvent:
    """Append one event to the workspace's chain. Call it inside the transaction that
    makes the change: the change and its record commit or roll back together."""
    ip_address = actor.ip_address
    if ip_address and ":" in ip_address:
        ip_address = clean_ipv6_address(ip_address)
    with transaction.atomic():
        AuditChainHead.objects.get_or_create(
            workspace_id=workspace_id, defaults={"sequence": 0, "hash": GENESIS_HASH}
        )
        # The row lock serialises appends per workspace: one predecessor per event.
        head = AuditChainHead.objects.select_for_update().get(workspace_id=workspace_id)
        event = AuditEvent(
            workspace_id=workspace_id,
            sequence=head.sequence + 1,
            actor_type=actor.type,
            actor_id=actor.id,
            actor_role=actor.role,
            action=action,
            target_type=target_type,
            target_id=target_id,
            before=_json_safe(before),
            after=_json_safe(after),
            reason=reason,
            request_id=actor.request_id,
            ip_address=ip_address,
            created_at=timezone.now(),
            prev_hash=head.hash,
        )
        event.hash = audit_event_hash(event)
        event.save()
        AuditChainHead.objects.filter(pk=head.pk).update(sequence=event.sequence, hash=event.hash)
    return event


def require_reason(reason: str, *, message: str = "A reason is required.") -> str:
    """The reason, stripped; a human edit or deletion without one is refused."""
    reason = (reason or "").strip()
    if not reason:
        raise MemdeskError("reason_required", message, field="reason")
    return reason
