"""Reads of the governance app."""

from __future__ import annotations

from dataclasses import dataclass

from governance.models import AuditChainHead, AuditEvent
from governance.services import GENESIS_HASH, audit_event_hash

VERIFY_BATCH = 2000


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    events: int
    broken_event_id: int | None = None
    broken_sequence: int | None = None
    problem: str = ""


def audit_chain_verify(*, workspace_id: object) -> ChainReport:
    """Walk the workspace's chain in order; report the first event that does not verify.

    Catches an edited event (its hash no longer matches), a removed or inserted event (a
    gap in the sequence, or a broken link), and a removed tail (the chain head, kept in
    a separate row, names a later event than the last one found)."""
    expected_prev = GENESIS_HASH
    expected_sequence = 1
    count = 0
    last_id = 0
    while True:
        batch = list(
            AuditEvent.objects.filter(workspace_id=workspace_id, id__gt=last_id).order_by("id")[
                :VERIFY_BATCH
            ]
        )
        if not batch:
            break
        for event in sorted(batch, key=lambda e: e.sequence):
            problem = ""
            if event.sequence != expected_sequence:
                problem = f"expected event #{expected_sequence}, found #{event.sequence}"
            elif event.prev_hash != expected_prev:
                problem = "its link to the previous event does not match"
            elif audit_event_hash(event) != event.hash:
                problem = "its content does not match its hash (it was altered)"
            if problem:
                return ChainReport(False, count, event.pk, event.sequence, problem)
            expected_prev = event.hash
            expected_sequence += 1
            count += 1
        last_id = batch[-1].pk
    head = AuditChainHead.objects.filter(workspace_id=workspace_id).first()
    if head and (head.sequence != count or head.hash != expected_prev):
        return ChainReport(
            False,
            count,
            None,
            count + 1,
            f"the chain head records {head.sequence} events but {count} were found "
            "(events were removed from the end)",
        )
    return ChainReport(True, count)


def audit_event_list(
    *,
    workspace: object,
    filters: dict[str, object],
    before_sequence: int | None,
    limit: int,
) -> tuple[list[AuditEvent], int | None]:
    """Newest first, keyset-paged on the chain sequence."""
    events = AuditEvent.objects.filter(workspace=workspace, **filters)
    if before_sequence is not None:
        events = events.filter(sequence__lt=before_sequence)
    page = list(events.order_by("-sequence")[: limit + 1])
    next_cursor = page[limit - 1].sequence if len(page) > limit else None
    return page[:limit], next_cursor
