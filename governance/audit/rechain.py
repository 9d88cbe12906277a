"""Scrubbing the memory texts that stored audit events still hold, and re-chaining the
events from the first one scrubbed to the head, so the trail keeps no words that
erasure must remove and still verifies.

Events written before the trail recorded digests hold a note's text, a pin's quote or a
deleted conversation's title in the clear. Each such text becomes its keyed digest
(``audit_text_digest``, as new events record it); the events from the first one changed
to the head are hashed again under chain version 3, with the current key. Their old
hashes go into an ``AuditRechain`` record, so the signed checkpoints written before
still verify, and an ``audit.rechain`` event, itself checkpointed, records the re-chain
and a digest of that record."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, models, transaction
from django.db.models import Count, Min, Q

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.verify import audit_chain_verify
from governance.audit.writer import (
    audit_current_key,
    audit_event_hash,
    audit_record,
    audit_text_digest,
)
from governance.models import AuditChainHead, AuditEvent, AuditRechain

# Which key of ``before`` / ``after`` held a memory text, by action, and what it becomes.
NOTE_AND_PIN_ACTIONS = frozenset(
    {
        "observation.create",
        "observation.edit",
        "observation.reprioritise",
        "observation.revert",
        "observation.delete",
        "reflection.edit",
        "reflection.reprioritise",
        "reflection.revert",
        "reflection.delete",
        "pin.create",
        "pin.delete",
    }
)
TEXT_KEYS: dict[str, tuple[str, frozenset[str]]] = {
    "text": ("textDigest", NOTE_AND_PIN_ACTIONS),
    "title": ("titleDigest", frozenset({"conversation.delete"})),
}
REWRITTEN_FIELDS = ["before", "after", "prev_hash", "hash", "chain_version", "key_id"]
REWRITE_BATCH = 1000
APPEND_ONLY_TABLE = "governance_auditevent"
APPEND_ONLY_TRIGGER = "governance_auditevent_append_only"


@dataclass(frozen=True)
class ScrubReport:
    """What a scrub of one workspace did, or (a dry run) would do."""

    scrubbed_by_action: dict[str, int] = field(default_factory=dict)
    rechained: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    rechain_event: AuditEvent | None = None

    @property
    def scrubbed(self) -> int:
        return sum(self.scrubbed_by_action.values())


def _holding_text(workspace_id: uuid.UUID) -> models.QuerySet[AuditEvent]:
    """The workspace's events that still hold a memory text."""
    holding = Q()
    for key, (_, actions) in TEXT_KEYS.items():
        holding |= Q(action__in=actions) & (Q(before__has_key=key) | Q(after__has_key=key))
    return AuditEvent.objects.filter(workspace_id=workspace_id).filter(holding)


def _scrubbed(action: str, snapshot: Any) -> Any:
    """``snapshot`` (an event's before or after) with the memory text it holds replaced
    by its digest; every other key kept."""
    if not isinstance(snapshot, dict):
        return snapshot
    for key, (digest_key, actions) in TEXT_KEYS.items():
        if action in actions and key in snapshot:
            text = snapshot[key]
            snapshot = {k: v for k, v in snapshot.items() if k != key}
            snapshot[digest_key] = audit_text_digest("" if text is None else str(text))
    return snapshot


def audit_owner_check() -> None:
    """Refuse, with what to do, when this connection cannot switch the append-only
    trigger off: on PostgreSQL only the owner of the audit table (or a superuser) may,
    and the application's role should not be it (docs/deployment.md)."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, pg_has_role(current_user, c.relowner, 'USAGE') "
            "FROM pg_class c WHERE c.oid = %s::regclass",
            [APPEND_ONLY_TABLE],
        )
        user, owner = cursor.fetchone()
    if not owner:
        raise MemdeskError(
            "audit_owner_required",
            f"The database role {user} does not own {APPEND_ONLY_TABLE}, so it cannot "
            "switch the append-only trigger off to re-chain the events: run this command "
            "as the role that runs migrate (docs/deployment.md, 'The database role').",
        )


@contextmanager
def _append_only_suspended() -> Iterator[None]:
    """Let the caller's transaction rewrite audit events, and only it.

    On PostgreSQL the trigger is disabled and enabled again inside the transaction: DDL
    is transactional, so no other session ever sees it off, and a failure rolls the
    switch back with everything else (hence no ``finally``: the transaction is aborted
    then). ALTER TABLE locks the audit table until commit, so every audited write waits
    for the re-chain of one workspace. It also refuses while the transaction has
    deferred checks pending on the table, so those are run first.

    Elsewhere the model's manager refuses updates; the caller writes through a plain
    ``QuerySet`` of ``AuditEvent``, the narrowest way past it, used nowhere else."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE {APPEND_ONLY_TABLE} DISABLE TRIGGER {APPEND_ONLY_TRIGGER}")
    yield
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {APPEND_ONLY_TABLE} ENABLE TRIGGER {APPEND_ONLY_TRIGGER}")
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def audit_texts_scrub(
    *, workspace_id: uuid.UUID, actor: Actor, dry_run: bool = False
) -> ScrubReport:
    """Scrub the memory texts the workspace's audit events still hold and re-chain the
    events from the first one scrubbed to the head, in one transaction that holds the
    chain head's lock; then record the re-chain as an ``audit.rechain`` event, whose
    checkpoint is written after commit.

    Refuses (``audit_chain_broken``) when the chain does not verify as it stands: a
    re-chain must never launder a chain that was tampered with. With ``dry_run``,
    verifies and counts only. Nothing to scrub changes nothing and records nothing."""
    with transaction.atomic():
        head = AuditChainHead.objects.select_for_update().filter(workspace_id=workspace_id).first()
        if head is None:
            return ScrubReport()
        report = audit_chain_verify(workspace_id=workspace_id)
        if not report.ok:
            raise MemdeskError(
                "audit_chain_broken",
                f"The audit chain does not verify, so it is not re-chained: {report.problem}",
            )
        holding = _holding_text(workspace_id)
        counts = dict(holding.values_list("action").annotate(n=Count("id")).order_by("action"))
        if not counts:
            return ScrubReport()
        first = holding.aggregate(first=Min("sequence"))["first"]
        if dry_run:
            return ScrubReport(counts, head.sequence - first + 1, first, head.sequence)
        audit_owner_check()
        old_hashes, new_head = _rechain(workspace_id, first=first, last=head.sequence)
        AuditChainHead.objects.filter(pk=head.pk).update(hash=new_head)
        rechain = AuditRechain.objects.create(
            workspace_id=workspace_id,
            first_sequence=first,
            last_sequence=head.sequence,
            old_hashes=old_hashes,
            old_head_hash=head.hash,
            new_head_hash=new_head,
        )
        event = audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action=AuditRechain.ACTION,
            target_type="workspace",
            target_id=str(workspace_id),
            after={
                "eventsScrubbed": sum(counts.values()),
                "eventsRechained": len(old_hashes),
                "scrubbedByAction": counts,
                **rechain.summary(),
            },
            reason="memory texts in stored audit events replaced by their digests",
        )
    return ScrubReport(counts, len(old_hashes), first, head.sequence, event)


def _rechain(workspace_id: uuid.UUID, *, first: int, last: int) -> tuple[list[str], str]:
    """Scrub and re-hash events #``first`` to #``last``; return their old hashes, in
    order, and the new hash of #``last``."""
    key = audit_current_key()
    events = AuditEvent.objects.filter(workspace_id=workspace_id, sequence__lte=last)
    prev_hash = events.get(sequence=first).prev_hash
    old_hashes: list[str] = []
    # Past the append-only manager, here only: see _append_only_suspended.
    rewritable: models.QuerySet[AuditEvent] = models.QuerySet(model=AuditEvent)
    with _append_only_suspended():
        done = first - 1
        while batch := list(events.filter(sequence__gt=done).order_by("sequence")[:REWRITE_BATCH]):
            for event in batch:
                old_hashes.append(event.hash)
                event.before = _scrubbed(event.action, event.before)
                event.after = _scrubbed(event.action, event.after)
                event.prev_hash = prev_hash
                event.chain_version = AuditEvent.ChainVersion.HMAC_SHA256_RECHAINED
                event.key_id = key.id
                event.hash = prev_hash = audit_event_hash(event, secret=key.secret)
            rewritable.bulk_update(batch, REWRITTEN_FIELDS)
            done = batch[-1].sequence
    return old_hashes, prev_hash
