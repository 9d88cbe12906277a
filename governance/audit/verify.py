"""Verifying the audit chain: each event's keyed hash and link to the one before, and
the signed checkpoints kept outside the database against the events they cover."""

from __future__ import annotations

import hmac
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from governance.audit.checkpoints import (
    Checkpoint,
    CheckpointLine,
    checkpoint_sink,
    checkpoints_read,
    utc_text,
)
from governance.audit.writer import (
    GENESIS_HASH,
    KEYED_CHAIN_VERSIONS,
    audit_event_hash,
    audit_keys,
)
from governance.models import AuditChainHead, AuditEvent, AuditRechain

VERIFY_BATCH = 2000
# A checkpoint is written just after its transaction commits: events younger than this
# may not have reached the sink yet when a verification reads it.
CHECKPOINT_GRACE = timedelta(minutes=1)


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    events: int
    broken_event_id: int | None = None
    broken_sequence: int | None = None
    problem: str = ""  # the first problem, in plain words
    problems: tuple[str, ...] = ()  # every problem found, the first one first
    checkpoints: int = 0  # signed checkpoints of this workspace that were compared
    checkpointed_through: int = 0  # the last event a verified checkpoint covers
    last_checkpoint_at: datetime | None = None
    # When set, the time of the first event after ``checkpointed_through``: old enough
    # to have reached the sink, yet no checkpoint covers it (one was lost or removed, or
    # the events are from before checkpoints existed).
    uncovered_since: datetime | None = None


def _event_words(event: AuditEvent) -> str:
    return f"event {event.pk} ({event.action}, {utc_text(event.created_at)})"


def _event_problem(
    event: AuditEvent,
    *,
    expected_sequence: int,
    expected_prev: str,
    previous: AuditEvent | None,
    keyed_seen: bool,
    keys: Mapping[str, str],
) -> str:
    """Why ``event`` does not verify as the next event of its chain, or ""."""
    if event.sequence != expected_sequence:
        return (
            f"{_event_words(event)} is #{event.sequence} where #{expected_sequence} was "
            "expected: events were removed or inserted before it"
        )
    if event.prev_hash != expected_prev:
        after = f"event {previous.pk}" if previous else "the start of the chain"
        return (
            f"{_event_words(event)} does not follow {after}: its link to the previous event "
            "does not match (an event before it was removed, inserted or rewritten)"
        )
    versions = AuditEvent.ChainVersion
    if event.chain_version == versions.SHA256:
        if keyed_seen:
            return (
                f"{_event_words(event)} carries an unkeyed SHA-256 hash after keyed events: "
                "it was rewritten by someone without the audit key"
            )
        if audit_event_hash(event) != event.hash:
            return (
                f"{_event_words(event)} does not verify: its content changed after it was "
                "written (its SHA-256 hash no longer matches)"
            )
        return ""
    if event.chain_version not in KEYED_CHAIN_VERSIONS:
        return (
            f"{_event_words(event)} names hash scheme {event.chain_version}, which this "
            "release does not know: it was rewritten"
        )
    secret = keys.get(event.key_id)
    if secret is None:
        return (
            f"{_event_words(event)} was hashed with key {event.key_id or '(none)'}, which "
            "this server does not hold: add that key to MEMDESK_AUDIT_OLD_KEYS, or the "
            "event was forged"
        )
    if not hmac.compare_digest(audit_event_hash(event, secret=secret), event.hash):
        after = f"follow event {previous.pk}" if previous else "start the chain"
        return (
            f"{_event_words(event)} does not {after}: its hash was computed with another "
            "key or its content changed after it was written"
        )
    return ""


def _checkpoint_problem(
    event: AuditEvent,
    checkpoints: Iterable[Checkpoint],
    *,
    last_matching: int,
    old_hashes: Collection[str],
) -> str:
    for checkpoint in checkpoints:
        if checkpoint.hash == event.hash or checkpoint.hash in old_hashes:
            continue
        rewritten = (
            f"event #{event.sequence} was rewritten"
            if last_matching + 1 == event.sequence
            else f"one or more of events #{last_matching + 1} to #{event.sequence} were rewritten"
        )
        return (
            f"the checkpoint of {utc_text(checkpoint.written_at)} says event "
            f"#{checkpoint.sequence} had hash {checkpoint.hash[:16]}…; the table now has "
            f"{event.hash[:16]}… there (event {event.pk}): {rewritten} and the chain "
            "recomputed"
        )
    return ""


def _rechained_old_hashes(workspace_id: uuid.UUID) -> dict[int, set[str]]:
    """The hashes events had before they were re-chained, by sequence: what checkpoints
    written before a re-chain name. Only from the re-chain records that an
    ``audit.rechain`` event of the chain agrees with; the walk verifies that event with
    the rest, so a record nobody with the key wrote into the chain excuses nothing."""
    vouched = [
        after
        for after in AuditEvent.objects.filter(
            workspace_id=workspace_id, action=AuditRechain.ACTION
        ).values_list("after", flat=True)
        if isinstance(after, dict)
    ]
    old_hashes: dict[int, set[str]] = defaultdict(set)
    for rechain in AuditRechain.objects.filter(workspace_id=workspace_id).order_by("id"):
        summary = rechain.summary().items()
        if not any(summary <= after.items() for after in vouched):
            continue
        for offset, old_hash in enumerate(rechain.old_hashes):
            old_hashes[rechain.first_sequence + offset].add(old_hash)
    return old_hashes


def audit_checkpoint_lines(*, workspace_id: uuid.UUID | None = None) -> list[CheckpointLine]:
    """The sink's checkpoint lines, verified (all of them, or one workspace's)."""
    return list(
        checkpoints_read(sink=checkpoint_sink(), keys=audit_keys(), workspace_id=workspace_id)
    )


def audit_chain_verify(
    *,
    workspace_id: uuid.UUID,
    checkpoint_lines: Sequence[CheckpointLine] | None = None,
    grace: timedelta | None = None,
) -> ChainReport:
    """Walk the workspace's chain in order and compare it with the signed checkpoints;
    report the first event that does not verify, in plain words.

    Catches an edited event (its hash no longer matches under its own scheme and key), a
    removed or inserted event (a gap in the sequence, or a broken link), a chain rewritten
    with recomputed hashes (it no longer matches a checkpoint), a removed tail (a
    checkpoint, or the chain head kept in a separate row, names a later event than the
    last one found) and a checkpoint line edited or forged (its signature fails). A
    checkpoint written before ``audit_scrub_texts`` re-chained its event matches the
    event's old hash, kept in the re-chain record.
    ``checkpoint_lines`` are the sink's lines for this workspace; read when not given."""
    started = timezone.now()
    if checkpoint_lines is None:
        checkpoint_lines = audit_checkpoint_lines(workspace_id=workspace_id)
    keys = audit_keys()
    line_problems = [line.problem for line in checkpoint_lines if line.problem]
    by_sequence: dict[int, dict[str, Checkpoint]] = defaultdict(dict)
    valid = 0
    last_checkpoint_at: datetime | None = None
    for line in checkpoint_lines:
        if line.checkpoint is None:
            continue
        valid += 1
        by_sequence[line.checkpoint.sequence].setdefault(line.checkpoint.hash, line.checkpoint)
        if last_checkpoint_at is None or line.checkpoint.written_at > last_checkpoint_at:
            last_checkpoint_at = line.checkpoint.written_at

    rechained = _rechained_old_hashes(workspace_id)
    expected_prev = GENESIS_HASH
    expected_sequence = 1
    count = 0
    last_id = 0
    previous: AuditEvent | None = None
    keyed_seen = False
    last_matching = 0  # the last event a checkpoint was found to match
    uncovered_since: datetime | None = None

    def broken(event: AuditEvent | None, sequence: int | None, problem: str) -> ChainReport:
        return ChainReport(
            False,
            count,
            event.pk if event else None,
            sequence,
            problem,
            (problem, *(p for p in line_problems if p != problem)),
            valid,
            last_matching,
            last_checkpoint_at,
        )

    while True:
        batch = list(
            AuditEvent.objects.filter(workspace_id=workspace_id, id__gt=last_id).order_by("id")[
                :VERIFY_BATCH
            ]
        )
        if not batch:
            break
        for event in sorted(batch, key=lambda e: e.sequence):
            problem = _event_problem(
                event,
                expected_sequence=expected_sequence,
                expected_prev=expected_prev,
                previous=previous,
                keyed_seen=keyed_seen,
                keys=keys,
            ) or _checkpoint_problem(
                event,
                by_sequence.get(event.sequence, {}).values(),
                last_matching=last_matching,
                old_hashes=rechained.get(event.sequence, ()),
            )
            if problem:
                return broken(event, event.sequence, problem)
            # A checkpoint excused by a re-chain vouches for the event's old hash only.
            if event.hash in by_sequence.get(event.sequence, {}):
                last_matching = event.sequence
                uncovered_since = None
            elif uncovered_since is None:
                uncovered_since = event.created_at
            keyed_seen = keyed_seen or event.chain_version != AuditEvent.ChainVersion.SHA256
            expected_prev = event.hash
            expected_sequence += 1
            count += 1
            previous = event
        last_id = batch[-1].pk

    beyond = [cp for seq, cps in by_sequence.items() if seq > count for cp in cps.values()]
    if beyond:
        furthest = max(beyond, key=lambda cp: cp.sequence)
        return broken(
            None,
            count + 1,
            f"the checkpoint of {utc_text(furthest.written_at)} says the chain reached event "
            f"#{furthest.sequence} (id {furthest.event_id}) with hash {furthest.hash[:16]}…; "
            f"the table now ends at #{count}: events after #{count} were removed",
        )
    head = AuditChainHead.objects.filter(workspace_id=workspace_id).first()
    if head and (head.sequence != count or head.hash != expected_prev):
        return broken(
            None,
            count + 1,
            f"the chain head row says the chain reached event #{head.sequence} but the table "
            f"ends at #{count}: events after #{count} were removed",
        )
    if line_problems:
        return broken(None, None, line_problems[0])
    grace = CHECKPOINT_GRACE if grace is None else grace
    if uncovered_since is not None and uncovered_since > started - grace:
        uncovered_since = None  # still on its way to the sink, most likely
    return ChainReport(
        True,
        count,
        checkpoints=valid,
        checkpointed_through=last_matching,
        last_checkpoint_at=last_checkpoint_at,
        uncovered_since=uncovered_since,
    )
