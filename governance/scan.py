"""The scan of messages for personal data, after they are written.

A message is stored as the agent wrote it (unless the policy redacts at ingest). Once
the write commits, ``governance.tasks.message_scan_task`` runs Presidio over it and
records what it found as findings with status DETECTED: entity type, offsets into the
stored content, score, never the value. The message keeps its text; the findings serve
three readers:

- the dashboard masks them for viewers and reviewers; compliance and admin may reveal a
  value, and every reveal is audited (``message_reveal``);
- the conversation's "PII found" flag (any finding that was not dismissed);
- the Observer, when the policy redacts before observation: it reads each message with
  its findings replaced by the policy's operators (``observer_texts``), reusing the scan
  when it is current instead of running Presidio again.

A scan is *current* when its MessageScan row is SCANNED, its digest is that of the
message's content now, and its policy version is the policy's version now. The Observer
never depends on the worker: it scans whatever is not current itself, before reading.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from governance import redaction
from governance.audit import audit_record
from governance.models import MessageScan, RedactionFinding, RedactionPolicy
from governance.redaction_policy import redaction_policy_get_or_create
from memory.models import Message

logger = logging.getLogger(__name__)

DIGEST_SALT = "memdesk.governance.scan.content_digest"
MESSAGE = RedactionFinding.TargetType.MESSAGE
# Findings whose value is still in the message's text, so a reader must not see it.
MASKED_STATUSES = (RedactionFinding.Status.DETECTED, RedactionFinding.Status.PENDING_REVIEW)
# Messages one task scans at most: those it was sent for, topped up with others of the
# same workspace still waiting, so a burst of single writes is parsed as one spaCy batch.
TASK_BATCH = 100
# The periodic sweep sends again scans whose task never arrived (broker down), oldest
# first, at most this many per sweep.
STALE_PENDING = timedelta(seconds=60)
SWEEP_LIMIT = 2000
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

    def add(self, other: ScanOutcome) -> None:
        self.findings.update(other.findings)
        self.scanned += other.scanned
        self.reused += other.reused
        self.new_findings += other.new_findings
        self.skipped += other.skipped


def _entity_counts(findings: Iterable[RedactionFinding]) -> dict[str, int]:
    return dict(sorted(Counter(f.entity_type for f in findings).items()))


def messages_scan(
    *,
    policy: RedactionPolicy,
    messages: Sequence[Message],
    force: bool = False,
    actor: Actor = SYSTEM_ACTOR,
    batch_size: int = redaction.BATCH_SIZE,
    n_process: int = redaction.N_PROCESS,
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
            and scan.status == MessageScan.Status.SCANNED
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
    spec = redaction.PolicySpec.of(policy)
    detections = redaction.engine().detect(
        [m.content for m in stale], spec=spec, batch_size=batch_size, n_process=n_process
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
                    status=MessageScan.Status.SCANNED,
                    content_digest=digests[message.pk],
                    policy_version=policy.version,
                    findings=len(new),
                    created_at=now,
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
            update_fields=["status", "content_digest", "policy_version", "findings", "scanned_at"],
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


def _policies(workspace_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, RedactionPolicy]:
    return {pk: redaction_policy_get_or_create(workspace_id=pk) for pk in set(workspace_ids)}


def message_scan_pending(*, message_ids: Sequence[uuid.UUID | str]) -> ScanOutcome:
    """The task's service: scan the given messages, and with them other messages of the
    same workspaces still waiting for a scan (up to ``TASK_BATCH`` in all), so that what
    arrives together is parsed together. Idempotent: a message already current is not
    read again, and a task that finds its messages done by another does nothing."""
    wanted = [uuid.UUID(str(pk)) for pk in message_ids]
    workspaces = set(
        MessageScan.objects.filter(message_id__in=wanted).values_list("workspace_id", flat=True)
    )
    room = TASK_BATCH - len(wanted)
    if room > 0 and workspaces:
        wanted += list(
            MessageScan.objects.filter(
                status=MessageScan.Status.PENDING, workspace_id__in=workspaces
            )
            .exclude(message_id__in=wanted)
            .order_by("created_at")
            .values_list("message_id", flat=True)[:room]
        )
    messages = list(
        Message.objects.filter(pk__in=wanted)
        .select_related("conversation")
        .defer("metadata")
        .order_by("conversation_id", "seq")
    )
    by_workspace: dict[uuid.UUID, list[Message]] = defaultdict(list)
    for message in messages:
        by_workspace[message.conversation.workspace_id].append(message)
    outcome = ScanOutcome()
    for workspace_id, policy in _policies(by_workspace).items():
        outcome.add(messages_scan(policy=policy, messages=by_workspace[workspace_id]))
    logger.info(
        "message scan: %s scanned, %s already current, %s findings, %s skipped",
        outcome.scanned,
        outcome.reused,
        outcome.new_findings,
        len(outcome.skipped),
    )
    return outcome


def message_scan_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic part: send again the scans whose task was lost (the broker was down
    when the message was written), oldest first."""
    now = now or timezone.now()
    counts = {"requeued": 0}
    pending = list(
        MessageScan.objects.filter(
            status=MessageScan.Status.PENDING, created_at__lt=now - STALE_PENDING
        )
        .order_by("created_at")
        .values_list("message_id", flat=True)[:SWEEP_LIMIT]
    )
    for start in range(0, len(pending), TASK_BATCH):
        with transaction.atomic():
            enqueue_on_commit(SCAN_TASK, [str(pk) for pk in pending[start : start + TASK_BATCH]])
    counts["requeued"] = len(pending)
    return counts


# --- what the Observer reads -------------------------------------------------------------------


def masked_text(
    content: str, findings: Sequence[RedactionFinding], spec: redaction.PolicySpec
) -> str:
    """``content`` with the values of ``findings`` replaced by the policy's operators."""
    detections = [
        redaction.Detection(
            entity_type=f.entity_type,
            start=f.start,
            end=f.end,
            score=f.score,
            recognizer=f.recognizer,
            operator=spec.operator_for(f.entity_type),
            status=redaction.APPLIED,
        )
        for f in findings
        if 0 <= f.start < f.end <= len(content)
    ]
    if not detections:
        return content
    return redaction.redact_text(content, detections, spec=spec).text


def observer_texts(*, policy: RedactionPolicy, messages: Sequence[Message]) -> list[str]:
    """What the Observer reads of ``messages`` when the policy redacts before
    observation: each content with its findings replaced, scanning first whatever is not
    current. Nothing is stored but the scan. Raises ScanConflict when a message changed
    during the scan (the run retries)."""
    outcome = messages_scan(policy=policy, messages=messages)
    if outcome.skipped:
        raise ScanConflict(str(outcome.skipped[0]))
    spec = redaction.PolicySpec.of(policy)
    return [masked_text(m.content, outcome.findings.get(m.pk, []), spec) for m in messages]


# --- people reading findings -----------------------------------------------------------------


def message_reveal(
    *, message: Message, workspace_id: uuid.UUID, actor: Actor, finding_ids: Sequence[int] = ()
) -> list[RedactionFinding]:
    """The masked findings of ``message`` a person with reveal rights asked to see: the
    ones named in ``finding_ids``, or all of them. Audited (``message.reveal``: which
    findings and their types, never a value) in the same transaction, before anything is
    shown. The caller checks the role. A finding id that is not a masked finding of this
    message is a 404."""
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
        )
    return findings
