"""The scan of messages for personal data, after they are written.

A message is stored as the agent wrote it (unless the policy redacts at ingest). Once
the write commits, ``governance.tasks.message_scan_task`` runs Presidio over it and
records what it found as findings with status DETECTED: entity type, offsets into the
stored content, score, never the value. The message keeps its text; the findings serve
three readers:

- the dashboard masks them for viewers and reviewers; compliance and admin may reveal a
  value, with a reason, and every reveal is audited (``message_reveal``);
- the conversation's "PII found" flag (any finding that was not dismissed);
- the Observer, when the policy redacts before observation: it reads each message with
  its findings replaced by the policy's operators, and its speaker's name redacted the
  same way (``observer_texts``), reusing the scan when it is current instead of running
  Presidio again.

A write asks for the scan of its messages with one ScanRequest row, deleted once they
are scanned. A scan is *current* when the message has a MessageScan row whose digest is
that of its content now and whose policy version is the policy's version now. The Observer
never depends on the worker: it scans whatever is not current itself, before reading.

What a scan reads: a task takes the requests of its workspace still waiting, whatever
their conversation, up to ``TASK_BATCH`` messages, and spaCy reads them as one batch; a
message already current is not read, and a text the process read before for the same
policy (a greeting, a signature, a tool's output in many messages) is not read again
(``governance.redaction.reuse``), in the same batch or a later one.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit, enqueue_on_commit_unless_queued, queued_mark_clear
from governance.audit.writer import audit_record, require_reason
from governance.models import MessageScan, RedactionFinding, RedactionPolicy, ScanRequest
from governance.redaction import presidio
from governance.redaction.policy import redaction_policy_get_or_create
from governance.redaction.pseudonyms import WorkspacePseudonyms, pseudonym_sightings_record
from governance.redaction.speakers import speaker_redacted
from memory.models import Message

logger = logging.getLogger(__name__)

DIGEST_SALT = "memdesk.governance.scan.content_digest"
MESSAGE = RedactionFinding.TargetType.MESSAGE
# Findings whose value is still in the message's text, so a reader must not see it.
MASKED_STATUSES = (RedactionFinding.Status.DETECTED, RedactionFinding.Status.PENDING_REVIEW)
# Messages one task scans at most: those it was sent for, topped up with others of the
# same workspace still waiting, so a burst of single writes is parsed as one spaCy batch.
TASK_BATCH = 100
# A task reads its messages in rounds of at most this many characters, and starts no
# round after TASK_SECONDS: what is left waits for the next task (sent at once), so no
# task nears the soft time limit, however long or hard its texts.
TASK_ROUND_CHARS = 200_000
TASK_SECONDS = 120
# The finding that marks a message the scan could not read within
# MEMDESK_SCAN_TEXT_SECONDS: its whole text, masked for every role that sees masks,
# revealed only by compliance with a reason, and held out of what the Observer reads.
UNSCANNED = "UNSCANNED"
# The periodic sweep sends again scan requests whose task never arrived (broker down),
# oldest first, at most this many per sweep.
STALE_PENDING = timedelta(seconds=60)
SWEEP_LIMIT = 500
SWEEP_REQUESTS_PER_TASK = 10
SCAN_TASK = "governance.tasks.message_scan_task"


class ScanConflict(Exception):
    """A message changed between its scan and the storing of the findings."""


def content_digest(content: str) -> str:
    # Keyed with SECRET_KEY: a plain hash of a short message (a phone number, "yes")
    # could be found by hashing candidates.
    return salted_hmac(DIGEST_SALT, content, algorithm="sha256").hexdigest()


def is_masked(finding: RedactionFinding) -> bool:
    """Whether a reader without reveal rights must not see the finding's value: it is
    still in the text, and the policy does not keep its type."""
    return finding.status in MASKED_STATUSES and finding.operator != "keep"


@dataclass
class ScanOutcome:
    """What ``messages_scan`` did. ``findings``: the findings whose value is still in
    the text (``MASKED_STATUSES``), by message id, for every message now current."""

    findings: dict[uuid.UUID, list[RedactionFinding]] = field(default_factory=dict)
    scanned: int = 0  # messages Presidio read
    reused: int = 0  # messages already current
    new_findings: int = 0
    skipped: list[uuid.UUID] = field(default_factory=list)  # changed meanwhile
    unscanned: int = 0  # messages Presidio could not read in time (marked UNSCANNED)
    deferred: list[uuid.UUID] = field(default_factory=list)  # left for the next task

    def add(self, other: ScanOutcome) -> None:
        self.findings.update(other.findings)
        self.scanned += other.scanned
        self.reused += other.reused
        self.new_findings += other.new_findings
        self.skipped += other.skipped
        self.unscanned += other.unscanned
        self.deferred += other.deferred


def _entity_counts(findings: Iterable[RedactionFinding]) -> dict[str, int]:
    return dict(sorted(Counter(f.entity_type for f in findings).items()))


def messages_scan(
    *,
    policy: RedactionPolicy,
    messages: Sequence[Message],
    force: bool = False,
    actor: Actor = SYSTEM_ACTOR,
    batch_size: int = presidio.BATCH_SIZE,
    n_process: int = presidio.N_PROCESS,
) -> ScanOutcome:
    """Make the scans of ``messages`` (all of ``policy``'s workspace) current: run
    Presidio over those whose scan is not (all of them with ``force``, after an engine
    upgrade), replace their DETECTED findings, and mark them scanned, in one transaction
    with one ``message.scan`` audit event per conversation.

    A span at exactly the place of a finding a person or a gate already decided
    (applied, pending review, approved, dismissed) is not recorded again. A message whose
    content changed since it was read is left as it was and listed in ``skipped``."""
    outcome = ScanOutcome()
    if not messages:
        return outcome
    ids = [m.pk for m in messages]
    digests = {m.pk: content_digest(m.content) for m in messages}
    scans = {s.message_id: s for s in MessageScan.objects.filter(message_id__in=ids)}
    known: dict[uuid.UUID, list[RedactionFinding]] = defaultdict(list)
    for finding in RedactionFinding.objects.filter(target_type=MESSAGE, target_id__in=ids):
        known[finding.target_id].append(finding)

    def current(message: Message) -> bool:
        scan = scans.get(message.pk)
        return (
            scan is not None
            and scan.content_digest == digests[message.pk]
            and scan.policy_version == policy.version
        )

    stale = [m for m in messages if force or not current(m)]
    for message in messages:
        if not force and current(message):
            outcome.findings[message.pk] = [
                f for f in known[message.pk] if f.status in MASKED_STATUSES
            ]
            outcome.reused += 1
    if not stale:
        return outcome
    spec = presidio.PolicySpec.of(policy)
    # A text the process read before for this policy (a greeting, a signature, a tool's
    # output in many messages) is not read again; ``force`` reads everything anew.
    detections = presidio.engine().detect_within(
        [m.content for m in stale],
        spec=spec,
        seconds=settings.MEMDESK_SCAN_TEXT_SECONDS,
        batch_size=batch_size,
        n_process=n_process,
        known=WorkspacePseudonyms.known(
            policy.workspace_id,
            conversation_ids=(m.conversation_id for m in stale),
            speakers=(m.name for m in stale),
        ),
        reuse=not force,
    )
    now = timezone.now()
    with transaction.atomic():
        # Locked and compared: a redaction that rewrote a message meanwhile (a review
        # approval) wins, and this scan's offsets into the old text are thrown away.
        contents = dict(
            Message.objects.select_for_update()
            .filter(pk__in=[m.pk for m in stale])
            .order_by("pk")  # one lock order for every scan: no deadlock between two
            .values_list("pk", "content")
        )
        rows: list[RedactionFinding] = []
        scan_rows: list[MessageScan] = []
        by_conversation: dict[uuid.UUID, list[tuple[uuid.UUID, list[RedactionFinding]]]] = (
            defaultdict(list)
        )
        for message, found in zip(stale, detections, strict=True):
            if contents.get(message.pk) != message.content:
                outcome.skipped.append(message.pk)
                continue
            decided = {
                (f.start, f.end)
                for f in known[message.pk]
                if f.status != RedactionFinding.Status.DETECTED
            }
            if found is None:
                found = [_unscanned(message)]
                outcome.unscanned += 1
            new = [
                RedactionFinding(
                    workspace_id=policy.workspace_id,
                    conversation_id=message.conversation_id,
                    target_type=MESSAGE,
                    target_id=message.pk,
                    entity_type=d.entity_type,
                    start=d.start,
                    end=d.end,
                    score=round(d.score, 4),
                    operator=d.operator,
                    status=RedactionFinding.Status.DETECTED,
                    policy_version=policy.version,
                    recognizer=d.recognizer,
                    created_at=now,
                )
                for d in found
                if (d.start, d.end) not in decided
            ]
            rows += new
            scan_rows.append(
                MessageScan(
                    message_id=message.pk,
                    workspace_id=policy.workspace_id,
                    conversation_id=message.conversation_id,
                    content_digest=digests[message.pk],
                    policy_version=policy.version,
                    findings=len(new),
                    scanned_at=now,
                )
            )
            by_conversation[message.conversation_id].append((message.pk, new))
        written = [scan.message_id for scan in scan_rows]
        RedactionFinding.objects.filter(
            target_type=MESSAGE, target_id__in=written, status=RedactionFinding.Status.DETECTED
        ).delete()
        RedactionFinding.objects.bulk_create(rows)
        MessageScan.objects.bulk_create(
            scan_rows,
            update_conflicts=True,
            unique_fields=["message_id"],
            update_fields=["content_digest", "policy_version", "findings", "scanned_at"],
        )
        for conversation_id, items in by_conversation.items():
            found_here = [f for _, new in items for f in new]
            audit_record(
                workspace_id=policy.workspace_id,
                actor=actor,
                action="message.scan",
                target_type="conversation",
                target_id=str(conversation_id),
                after={
                    "messages": len(items),
                    "messageIds": [str(message_id) for message_id, _ in items],
                    "findings": len(found_here),
                    "entities": _entity_counts(found_here),
                    "policyVersion": policy.version,
                },
            )
    for message_id, new in (item for items in by_conversation.values() for item in items):
        decided_masked = [
            f for f in known[message_id] if f.status == RedactionFinding.Status.PENDING_REVIEW
        ]
        outcome.findings[message_id] = decided_masked + new
    outcome.scanned = len(written)
    outcome.new_findings = len(rows)
    return outcome


def _unscanned(message: Message) -> presidio.Detection:
    """The detection that stands for a whole message the engine could not read in time
    (``UNSCANNED``): logged by id and size only."""
    logger.warning(
        "message scan: message %s (%s characters) not read within %s s: marked %s",
        message.pk,
        len(message.content),
        settings.MEMDESK_SCAN_TEXT_SECONDS,
        UNSCANNED,
    )
    return presidio.Detection(
        entity_type=UNSCANNED,
        start=0,
        end=len(message.content),
        score=1.0,
        recognizer="scan_time_limit",
        operator="redact",
        status=presidio.APPLIED,
    )


def _rounds(messages: Sequence[Message]) -> Iterator[list[Message]]:
    """``messages`` in rounds of at most ``TASK_ROUND_CHARS`` characters (a longer
    message is a round of its own)."""
    round_: list[Message] = []
    size = 0
    for message in messages:
        if round_ and size + len(message.content) > TASK_ROUND_CHARS:
            yield round_
            round_, size = [], 0
        round_.append(message)
        size += len(message.content)
    if round_:
        yield round_


def _policies(workspace_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RedactionPolicy]:
    return {pk: redaction_policy_get_or_create(workspace_id=pk) for pk in set(workspace_ids)}


def _size(request: ScanRequest) -> int:
    return request.last_seq - request.first_seq + 1


def _holds(request: ScanRequest, message: Message) -> bool:
    return (
        message.conversation_id == request.conversation_id
        and request.first_seq <= message.seq <= request.last_seq
    )


def scan_queued_mark(workspace_id: uuid.UUID) -> str:
    """The mark under which a workspace's scan task waits for a worker."""
    return f"scan:{workspace_id}"


def message_scan_requests(
    *, request_ids: Sequence[int], workspace_id: uuid.UUID | None = None
) -> ScanOutcome:
    """The task's service: scan the messages of the given scan requests, and of other
    requests of the same workspaces still waiting (oldest first, up to ``TASK_BATCH``
    messages in all), so that what arrives together is parsed as one batch; then delete
    the requests whose messages are all scanned. Idempotent: a request already done is
    gone, and a message already current is not read again."""
    requests = list(ScanRequest.objects.filter(pk__in=request_ids))
    workspaces = {r.workspace_id for r in requests}
    # Before the waiting requests are read: one committed after this sends a new task.
    # (The workspace the task was sent for, too: its requests may be done already.)
    for marked in workspaces | ({workspace_id} if workspace_id else set()):
        queued_mark_clear(scan_queued_mark(marked))
    room = TASK_BATCH - sum(_size(r) for r in requests)
    if room > 0 and workspaces:
        waiting = (
            ScanRequest.objects.filter(workspace_id__in=workspaces)
            .exclude(pk__in=[r.pk for r in requests])
            .order_by("created_at", "pk")[:TASK_BATCH]
        )
        for extra in waiting:
            if _size(extra) > room:
                break
            requests.append(extra)
            room -= _size(extra)
    outcome = ScanOutcome()
    if not requests:
        return outcome
    ranges = Q()
    for request in requests:
        ranges |= Q(
            conversation_id=request.conversation_id,
            seq__gte=request.first_seq,
            seq__lte=request.last_seq,
        )
    messages = list(
        Message.objects.filter(ranges)
        .select_related("conversation")
        .defer("metadata", "conversation__metadata")
        .order_by("conversation_id", "seq")
    )
    by_workspace: dict[uuid.UUID, list[Message]] = defaultdict(list)
    for message in messages:
        by_workspace[message.conversation.workspace_id].append(message)
    started = time.monotonic()
    read_one = False  # a task reads one round at least, however long the last one took
    for workspace_id, policy in _policies(by_workspace).items():
        for round_ in _rounds(by_workspace[workspace_id]):
            if read_one and time.monotonic() - started > TASK_SECONDS:
                outcome.deferred += [m.pk for m in round_]
                continue
            outcome.add(messages_scan(policy=policy, messages=round_))
            read_one = True
    left = {*outcome.skipped, *outcome.deferred}
    unfinished = [m for m in messages if m.pk in left]
    done = [r.pk for r in requests if not any(_holds(r, m) for m in unfinished)]
    ScanRequest.objects.filter(pk__in=done).delete()
    # Requests whose messages changed meanwhile are this task's to retry; those with
    # messages it had no time for wait for the next task.
    deferred = set(outcome.deferred)
    left_for_next = {
        r.pk for r in requests for m in unfinished if m.pk in deferred and _holds(r, m)
    }
    # More than one batch was waiting, or this task ran out of time: the rest gets a
    # task now rather than from the sweeper, a minute later, if no other write sends one.
    for waiting_in in workspaces:
        rest = list(
            ScanRequest.objects.filter(workspace_id=waiting_in)
            .exclude(pk__in=[r.pk for r in requests if r.pk not in left_for_next])
            .order_by("created_at", "pk")
            .values_list("pk", flat=True)[:1]
        )
        if rest:
            with transaction.atomic():
                enqueue_on_commit_unless_queued(
                    SCAN_TASK, rest, str(waiting_in), mark=scan_queued_mark(waiting_in)
                )
    logger.info(
        "message scan: %s requests, %s scanned, %s already current, %s findings, %s skipped, "
        "%s not readable in time, %s left for the next task",
        len(done),
        outcome.scanned,
        outcome.reused,
        outcome.new_findings,
        len(outcome.skipped),
        outcome.unscanned,
        len(outcome.deferred),
    )
    return outcome


def message_scan_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic part: send again the scan requests whose task was lost (the broker
    was down when the messages were written), oldest first."""
    now = now or timezone.now()
    stale = list(
        ScanRequest.objects.filter(created_at__lt=now - STALE_PENDING)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:SWEEP_LIMIT]
    )
    # A few requests per task: each task tops itself up to TASK_BATCH messages anyway.
    for start in range(0, len(stale), SWEEP_REQUESTS_PER_TASK):
        with transaction.atomic():
            enqueue_on_commit(SCAN_TASK, stale[start : start + SWEEP_REQUESTS_PER_TASK])
    return {"requeued": len(stale)}


# --- what the Observer reads -------------------------------------------------------------------


def masked_text(
    content: str,
    findings: Sequence[RedactionFinding],
    spec: presidio.PolicySpec,
    pseudonyms: presidio.Pseudonymiser | None = None,
) -> str:
    """``content`` with the values of ``findings`` replaced by the policy's operators
    (``pseudonyms`` numbers the values of the ``pseudonym`` operator)."""
    detections = [
        presidio.Detection(
            entity_type=f.entity_type,
            start=f.start,
            end=f.end,
            score=f.score,
            recognizer=f.recognizer,
            operator=spec.operator_for(f.entity_type),
            status=presidio.APPLIED,
        )
        for f in findings
        if 0 <= f.start < f.end <= len(content)
    ]
    if not detections:
        return content
    return presidio.redact_text(content, detections, spec=spec, pseudonyms=pseudonyms).text


def observer_texts(
    *, policy: RedactionPolicy, messages: Sequence[Message]
) -> tuple[list[str], list[str]]:
    """What the Observer reads of ``messages`` when the policy redacts before
    observation: each content with its findings replaced (empty for a message the scan
    could not read in time), scanning first whatever is not current, and each speaker's
    name as the policy lets it be read (``governance.redaction.speakers``). Nothing is
    stored but the scan. Raises ScanConflict when a message changed during the scan (the
    run retries).

    A first name alone gets the full name's pseudonym when one person in scope has it:
    the people the conversations already name (their PERSON pseudonyms), the speakers
    of the window and the full names its findings hold."""
    outcome = messages_scan(policy=policy, messages=messages)
    if outcome.skipped:
        raise ScanConflict(str(outcome.skipped[0]))
    spec = presidio.PolicySpec.of(policy)
    names = [m.name for m in messages]
    contents: list[str] = []
    speakers: list[str] = []
    uses = []
    # Pseudonyms are numbered, and where their values are held recorded, in one
    # transaction: the message holds its own values (its speaker's name too).
    with transaction.atomic():
        pseudonyms = WorkspacePseudonyms(policy.workspace_id)
        pseudonyms.people_in_scope(
            conversation_ids=(m.conversation_id for m in messages),
            speakers=names,
            mentioned=(
                m.content[f.start : f.end]
                for m in messages
                for f in outcome.findings.get(m.pk, [])
                if f.entity_type == "PERSON"
            ),
        )
        for message, name in zip(messages, names, strict=True):
            findings = outcome.findings.get(message.pk, [])
            contents.append(
                ""  # not scanned in time: held out of memory (UNSCANNED)
                if any(f.entity_type == UNSCANNED for f in findings)
                else masked_text(message.content, findings, spec, pseudonyms)
            )
            speakers.append(
                speaker_redacted(name, spec=spec, pseudonyms=pseudonyms) if name else ""
            )
            uses.append((message, pseudonyms.take_used()))
        pseudonym_sightings_record(target_type=MESSAGE, uses=uses)
    return contents, speakers


# --- people reading findings -----------------------------------------------------------------


def message_reveal(
    *,
    message: Message,
    workspace_id: uuid.UUID,
    actor: Actor,
    reason: str,
    finding_ids: Sequence[int] = (),
) -> list[RedactionFinding]:
    """The masked findings of ``message`` a person with reveal rights asked to see: the
    ones named in ``finding_ids``, or all of them. Needs a reason, as every reveal does
    (``reason_required`` otherwise, before anything is read). Audited (``message.reveal``:
    which findings and their types, never a value; the reason) in the same transaction,
    before anything is shown. The caller checks the role. A finding id that is not a
    masked finding of this message is a 404."""
    reason = require_reason(
        reason, message="Give a reason: every reveal of personal data is recorded with one."
    )
    findings = [
        f
        for f in RedactionFinding.objects.filter(
            workspace_id=workspace_id, target_type=MESSAGE, target_id=message.pk
        ).order_by("start", "pk")
        if is_masked(f) and 0 <= f.start < f.end <= len(message.content)
    ]
    if finding_ids:
        wanted = set(finding_ids)
        findings = [f for f in findings if f.pk in wanted]
        if len(findings) != len(wanted):
            raise MemdeskError(
                "not_found",
                "No such finding in this message (it may have been rescanned: reload).",
                status_code=404,
            )
    if not findings:
        return []
    with transaction.atomic():
        audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action="message.reveal",
            target_type=MESSAGE,
            target_id=str(message.pk),
            after={
                "conversationId": str(message.conversation_id),
                "findingIds": [f.pk for f in findings],
                "entities": _entity_counts(findings),
                "whole": not finding_ids,
            },
            reason=reason,
        )
    return findings
