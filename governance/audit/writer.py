"""The audit trail's writer: every change to memory or governance appends one event to
its workspace's hash chain, in the transaction that makes the change.

The chain is keyed: each event's hash is an HMAC-SHA256, with a key derived from
``MEMDESK_AUDIT_KEY`` (or, unset, SECRET_KEY), over its content and its predecessor's
hash. After the transaction commits, a signed checkpoint of the workspace's new head goes
to a sink outside the database (governance/audit/checkpoints.py). Someone who can write the
table can neither recompute the chain without the key nor change what the checkpoints
already say."""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone
from django.utils.crypto import salted_hmac
from django.utils.ipv6 import clean_ipv6_address

from core.actors import Actor
from core.api import REASON_MAX_CHARS
from core.errors import MemdeskError
from governance.audit.checkpoints import checkpoint_line, checkpoint_sink
from governance.models import (
    AuditChainHead,
    AuditEvent,
)

logger = logging.getLogger(__name__)

GENESIS_HASH = "0" * 64
CHAIN_SALT = "memdesk.audit.chain"
KEY_ID_SALT = "memdesk.audit.key-id"


@dataclass(frozen=True)
class AuditKey:
    id: str  # recorded with every event and checkpoint; reveals nothing about the secret
    secret: str = field(repr=False)


@functools.lru_cache(maxsize=16)
def audit_key(secret: str) -> AuditKey:
    key_id = salted_hmac(KEY_ID_SALT, "audit key", secret=secret, algorithm="sha256")
    return AuditKey(key_id.hexdigest()[:16], secret)


def audit_current_key() -> AuditKey:
    """The key new events and checkpoints are made with."""
    return audit_key(settings.MEMDESK_AUDIT_KEY or settings.SECRET_KEY)


def audit_keys() -> dict[str, str]:
    """Every key this server can verify with, by id: the current one and the old ones."""
    keys = {}
    for secret in [*settings.MEMDESK_AUDIT_OLD_KEYS, audit_current_key().secret]:
        key = audit_key(secret)
        keys[key.id] = key.secret
    return keys


# Hashed alike (HMAC-SHA256 over the content, the chain version and the key id); a
# re-chained event names its own version, so the scheme it was hashed under is part of
# what its hash covers.
KEYED_CHAIN_VERSIONS = frozenset(
    {AuditEvent.ChainVersion.HMAC_SHA256, AuditEvent.ChainVersion.HMAC_SHA256_RECHAINED}
)


def audit_event_hash(event: AuditEvent, *, secret: str = "") -> str:
    """The hash of ``event`` under its own chain version: plain SHA-256 for the events
    written before keyed chains, HMAC-SHA256 with ``secret`` (the key its ``key_id``
    names) since, over the chain version and key id too (versions 2 and 3).

    JSON with sorted keys, so the same event hashes the same after a round trip through
    PostgreSQL's jsonb (which reorders keys) or SQLite's text."""
    content: dict[str, Any] = {
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
    # A data migration's historical model from before chain versions has no such field:
    # what it writes is unkeyed, and migration 0004 marks it so.
    chain_version = getattr(event, "chain_version", AuditEvent.ChainVersion.SHA256)
    if chain_version == AuditEvent.ChainVersion.SHA256:
        return hashlib.sha256(_canonical(content)).hexdigest()
    if chain_version in KEYED_CHAIN_VERSIONS:
        if not secret:
            raise ValueError("a keyed audit event needs its key to be hashed")
        content |= {"chain_version": event.chain_version, "key_id": event.key_id}
        return salted_hmac(
            CHAIN_SALT, _canonical(content), secret=secret, algorithm="sha256"
        ).hexdigest()
    raise ValueError(f"unknown audit chain version {chain_version!r}")


def _canonical(content: dict[str, Any]) -> bytes:
    return json.dumps(
        content, sort_keys=True, separators=(",", ":"), ensure_ascii=False, cls=DjangoJSONEncoder
    ).encode()


def _json_safe(value: dict[str, Any] | None) -> dict[str, Any] | None:
    # Stored exactly as it will be read back, so the hash computed now still verifies.
    return None if value is None else json.loads(json.dumps(value, cls=DjangoJSONEncoder))


@dataclass(frozen=True)
class AuditChange:
    """One change for ``audit_record_many``: what ``audit_record`` takes besides the
    workspace and the actor."""

    action: str
    target_type: str
    target_id: str
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str = ""


TEXT_DIGEST_SALT = "memdesk.audit.text"


def audit_text_digest(text: str) -> str:
    """What the trail records of a memory text (a note, a pin's quote, a title): a keyed
    digest, never the text. Two events' digests tell whether the text changed; without
    the server's secret nobody can test a guessed text against one. The text itself is
    kept where the data is (the note's versions, which go with it at erasure)."""
    return salted_hmac(TEXT_DIGEST_SALT, text, algorithm="sha256").hexdigest()[:32]


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
    makes the change: the change and its record commit or roll back together, and the
    checkpoint of the new head is written only once they have committed."""
    change = AuditChange(action, target_type, target_id, before, after, reason)
    [event] = audit_record_many(workspace_id=workspace_id, actor=actor, changes=[change])
    return event


def audit_record_many(
    *, workspace_id: Any, actor: Actor, changes: Sequence[AuditChange]
) -> list[AuditEvent]:
    """Append one event per change to the workspace's chain, in order, as one extension
    of it: the head locked once, the events inserted together with consecutive sequence
    numbers, each chained to the one before, and the head moved once. For a run that
    changes many rows (the redaction gate), where a lock and five queries per event were
    a fifth of its time. The same transaction rules as ``audit_record``."""
    if not changes:
        return []
    ip_address = actor.ip_address
    if ip_address and ":" in ip_address:
        ip_address = clean_ipv6_address(ip_address)
    key = audit_current_key()
    with transaction.atomic():
        AuditChainHead.objects.get_or_create(
            workspace_id=workspace_id, defaults={"sequence": 0, "hash": GENESIS_HASH}
        )
        # The row lock serialises appends per workspace: one predecessor per event.
        head = AuditChainHead.objects.select_for_update().get(workspace_id=workspace_id)
        sequence, prev_hash = head.sequence, head.hash
        created_at = timezone.now()
        events = []
        for change in changes:
            sequence += 1
            event = AuditEvent(
                workspace_id=workspace_id,
                sequence=sequence,
                actor_type=actor.type,
                actor_id=actor.id,
                actor_role=actor.role,
                action=change.action,
                target_type=change.target_type,
                target_id=change.target_id,
                before=_json_safe(change.before),
                after=_json_safe(change.after),
                reason=change.reason,
                request_id=actor.request_id,
                ip_address=ip_address,
                created_at=created_at,
                prev_hash=prev_hash,
                chain_version=AuditEvent.ChainVersion.HMAC_SHA256,
                key_id=key.id,
            )
            event.hash = prev_hash = audit_event_hash(event, secret=key.secret)
            events.append(event)
        if len(events) == 1:
            events[0].save()
        else:
            AuditEvent.objects.bulk_create(events)
        last = events[-1]
        if last.pk is None:  # a database that does not return ids from a bulk insert
            last.pk = (
                AuditEvent.objects.filter(workspace_id=workspace_id, sequence=last.sequence)
                .values_list("pk", flat=True)
                .get()
            )
        AuditChainHead.objects.filter(pk=head.pk).update(sequence=last.sequence, hash=last.hash)
        # One line per committed extension, naming its last event (which covers the
        # ones before it): a rolled-back savepoint drops its callback with it, so no
        # checkpoint ever names an event that was not committed. What a line costs:
        # docs/benchmarks/2026-11-30.md, "Audit trail: keyed chain and checkpoints".
        transaction.on_commit(
            lambda: _checkpoint_after_commit(
                workspace_id=workspace_id,
                sequence=last.sequence,
                event_id=last.pk,
                event_hash=last.hash,
            )
        )
    return events


def audit_checkpoint_write(
    *, workspace_id: Any, sequence: int, event_id: int, event_hash: str
) -> None:
    """Append a signed checkpoint of one chain head to the configured sink."""
    key = audit_current_key()
    line = checkpoint_line(
        workspace_id=workspace_id,
        sequence=sequence,
        event_id=event_id,
        event_hash=event_hash,
        written_at=timezone.now(),
        key_id=key.id,
        secret=key.secret,
    )
    checkpoint_sink().append(line)


def _checkpoint_after_commit(
    *, workspace_id: Any, sequence: int, event_id: int, event_hash: str
) -> None:
    # The change has committed: a sink that is down must not turn it into an error. The
    # head stays uncovered until the next event or the daily audit_checkpoint_heads,
    # and verify_audit says which events no checkpoint covers.
    try:
        audit_checkpoint_write(
            workspace_id=workspace_id, sequence=sequence, event_id=event_id, event_hash=event_hash
        )
    except Exception:
        logger.exception(
            "audit checkpoint not written: workspace %s event %s (#%s)",
            workspace_id,
            event_id,
            sequence,
        )


def audit_checkpoint_heads() -> int:
    """Write a checkpoint of every workspace's current chain head; return how many.

    Run daily by beat, and once after upgrading: it covers chains whose last checkpoint
    was lost, and seals the events written before checkpoints existed."""
    last_event = AuditEvent.objects.filter(
        workspace_id=OuterRef("workspace_id"), sequence=OuterRef("sequence")
    )
    heads = (
        AuditChainHead.objects.filter(sequence__gt=0)
        .annotate(
            event_id=Subquery(last_event.values("id")[:1]),
            event_hash=Subquery(last_event.values("hash")[:1]),
        )
        .order_by("workspace_id")
    )
    written = 0
    for head in heads:
        if head.event_id is None:  # the head names an event that is not there
            logger.warning(
                "audit checkpoint skipped: workspace %s has no event #%s",
                head.workspace_id,
                head.sequence,
            )
            continue
        audit_checkpoint_write(
            workspace_id=head.workspace_id,
            sequence=head.sequence,
            event_id=head.event_id,
            event_hash=head.event_hash,
        )
        written += 1
    return written


def require_reason(reason: str, *, message: str = "A reason is required.") -> str:
    """The reason, stripped; a human edit or deletion without one is refused, and so is
    one longer than ``REASON_MAX_CHARS`` (whichever door it came by: the API bounds its
    fields, a crafted dashboard form would otherwise be stored whole, or cut)."""
    reason = (reason or "").strip()
    if not reason:
        raise MemdeskError("reason_required", message, field="reason")
    if len(reason) > REASON_MAX_CHARS:
        raise MemdeskError(
            "reason_too_long",
            f"A reason is at most {REASON_MAX_CHARS} characters; this one has {len(reason)}.",
            field="reason",
        )
    return reason
