"""The redaction gates the memory pipeline calls: at ingest, after the write (the scan),
before the Observer and before the Reflector. A gate that cannot let a run through
raises ``RedactionGateError``; the caller decides what that means for its run."""

from __future__ import annotations

import importlib.util
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from django.db import transaction
from django.db.models import F, Subquery
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.queue import enqueue_on_commit_unless_queued
from governance.audit.writer import AuditChange, audit_record, audit_record_many
from governance.models import (
    REDACTION_TARGETS,
    MessageScan,
    Pseudonym,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
    ScanRequest,
)
from governance.redaction import presidio, scan
from governance.redaction.policy import redaction_policy_get_or_create
from governance.redaction.pseudonyms import (
    PseudonymForgotten,
    Reidentifier,
    WorkspacePseudonyms,
    pseudonym_ids_seen_in,
    pseudonym_sightings_record,
    pseudonyms_check_held,
    pseudonyms_forget_unheld,
)
from memory.models import Conversation, Message, Observation, Pin, Reflection
from memory.tokens import token_count


class RedactionGateError(Exception):
    """A gate cannot let a pipeline run through now; ``retryable`` says whether the same
    run may pass later (a pending review, a concurrent edit)."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class RedactionConflict(Exception):
    """A target's text changed between analysis and storage (a person edited it)."""


def finding_summary(findings: Sequence[presidio.Finding]) -> dict[str, Any]:
    by_type: dict[str, int] = defaultdict(int)
    for finding in findings:
        by_type[finding.entity_type] += 1
    return {
        "findings": len(findings),
        "applied": sum(f.status == presidio.APPLIED for f in findings),
        "pendingReview": sum(f.status == presidio.PENDING_REVIEW for f in findings),
        "entities": dict(sorted(by_type.items())),
    }


def keep_original(
    *,
    policy: RedactionPolicy,
    target_type: str,
    target_id: uuid.UUID,
    conversation_id: uuid.UUID,
    text: str,
) -> bool:
    """Keep the text as it was before its first redaction, when the policy says so.
    Otherwise the original is destroyed: it is simply never written anywhere."""
    if not policy.keep_originals:
        return False
    _, created = RestrictedOriginal.objects.get_or_create(
        target_type=target_type,
        target_id=target_id,
        defaults={
            "workspace_id": policy.workspace_id,
            "conversation_id": conversation_id,
            "text": text,
        },
    )
    return created


def shift_findings(
    findings: Sequence[RedactionFinding], edits: Sequence[tuple[int, int, int]]
) -> None:
    """Keep earlier findings' offsets pointing into the text after an edit."""
    changed = []
    for finding in findings:
        start = presidio.shift_offset(finding.start, edits, at_end=False)
        end = presidio.shift_offset(finding.end, edits, at_end=True)
        if (start, end) != (finding.start, finding.end):
            finding.start, finding.end = start, max(start, end)
            changed.append(finding)
    if changed:
        RedactionFinding.objects.bulk_update(changed, ["start", "end"])


def store_target_text(
    target: Message | Observation | Reflection, field: str, old: str, new: str
) -> None:
    """Store one target's new text and, for a message, quote its pins again from it."""
    _store_text(target, field, old, new)
    if type(target) is Message:
        requote_pins(changes=[(target.pk, old, new)])


def _store_text(target: Message | Observation | Reflection, field: str, old: str, new: str) -> None:
    """Store the new text if the stored one is still ``old`` (else RedactionConflict).
    A message's pins are the caller's to quote again (``requote_pins``)."""
    model = type(target)
    fields: dict[str, Any] = {field: new, "token_count": token_count(new)}
    if model is Observation:
        # The redaction is recorded by its findings and audit event. The observation's
        # version and history are left alone: a kept version would keep the value.
        fields["updated_at"] = timezone.now()
    # Conditional on the text analysed: a person's edit in between wins, and the
    # caller analyses again.
    if not model.objects.filter(pk=target.pk, **{field: old}).update(**fields):
        raise RedactionConflict(str(target.pk))
    if model is Message:
        # The message's findings were moved to the new text (shift_findings) or replaced
        # by this redaction's: a scan that was current stays current.
        MessageScan.objects.filter(
            message_id=target.pk, content_digest=scan.content_digest(old)
        ).update(content_digest=scan.content_digest(new))
    for name, value in fields.items():
        setattr(target, name, value)


def _requote(pin: Pin, old: str, new: str) -> None:
    """Move one pin's span from its message's ``old`` text onto its ``new`` text."""
    if pin.start is None or pin.end is None:
        pin.text = new
    else:
        limit = min(len(old), len(new))
        prefix = 0
        while prefix < limit and old[prefix] == new[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
            suffix += 1
        changed_end_old, changed_end_new = len(old) - suffix, len(new) - suffix

        def moved(offset: int, *, is_end: bool) -> int:
            if offset <= prefix:
                return offset
            if offset >= changed_end_old:
                return offset + len(new) - len(old)
            return changed_end_new if is_end else prefix

        pin.start = moved(pin.start, is_end=False)
        pin.end = moved(pin.end, is_end=True)
        pin.text = new[pin.start : pin.end]
    pin.token_count = token_count(pin.text)


def requote_pins(*, changes: Sequence[tuple[Any, str, str]]) -> None:
    """Quote redacted messages' pins again from their new text: a pin must never keep a
    value its message no longer holds. ``changes``: (message id, old text, new text) per
    message. Redaction rewrites one stretch of a text (the common prefix and suffix
    stay); a span that reaches into that stretch is widened to all of it, so the quote
    keeps its place and takes the replacement. A quote left empty (the value was all it
    held, and the operator removes values) is deleted. One query reads the pins of every
    message in ``changes``, one updates them and one deletes the emptied ones."""
    texts = {message_id: (old, new) for message_id, old, new in changes}
    if not texts:
        return
    pins = list(Pin.objects.select_for_update().filter(message_id__in=texts))
    if not pins:
        return
    kept: list[Pin] = []
    emptied: list[Pin] = []
    for pin in pins:
        _requote(pin, *texts[pin.message_id])
        (kept if pin.text.strip() else emptied).append(pin)
    Pin.objects.bulk_update(kept, ["start", "end", "text", "token_count"])
    if emptied:
        Pin.objects.filter(pk__in=[pin.pk for pin in emptied]).delete()


def finding_rows(
    *,
    policy: RedactionPolicy,
    conversation_id: Any,
    target_type: str,
    target_id: Any,
    findings: Sequence[Any],
    pseudonyms: WorkspacePseudonyms | None = None,
) -> list[RedactionFinding]:
    """Rows recording what the engine found in one object: where, what, how sure, what was
    done (with the pseudonym it became, from the ``pseudonyms`` that gave it), never the
    value."""
    return [
        RedactionFinding(
            workspace_id=policy.workspace_id,
            conversation_id=conversation_id,
            target_type=target_type,
            target_id=target_id,
            entity_type=f.entity_type,
            start=f.start,
            end=f.end,
            score=f.score,
            operator=f.operator,
            status=f.status,
            policy_version=policy.version,
            recognizer=f.recognizer,
            pseudonym_id=pseudonyms.id_of(f.pseudonym) if pseudonyms and f.pseudonym else None,
        )
        for f in findings
    ]


def _pseudonym_values(
    text: str,
    detections: Sequence[presidio.Detection],
    pending: Sequence[tuple[int, int, str]],
    spec: presidio.PolicySpec,
) -> list[tuple[str, str]]:
    """The (entity type, value) pairs the pseudonym operator will be asked about."""
    spans = [(d.start, d.end, d.entity_type, d.operator) for d in detections]
    spans += [(s, e, t, spec.operator_for(t)) for s, e, t in pending]
    return [(t, text[s:e]) for s, e, t, op in spans if op == presidio.PSEUDONYM]


def redact_targets(
    *,
    target_type: str,
    targets: Sequence[Message | Observation | Reflection],
    policy: RedactionPolicy,
    actor: Actor = SYSTEM_ACTOR,
    batch_size: int = presidio.BATCH_SIZE,
    n_process: int = presidio.N_PROCESS,
) -> dict[str, str]:
    """Analyse stored texts in one batch, store the redacted texts with their findings
    (and originals, per policy), and return what an engine may read, by target id.

    A span at exactly the place of a finding the target already has is not a finding
    again: one pending review is still waiting (and masked for the engine), a dismissed
    one was judged to stay, an applied one is its own replacement. New values of the
    pseudonym operator are numbered in the same transaction, and where each value is
    held is recorded. Raises RedactionConflict (storing nothing) when a target's text
    changed since it was read, or a pseudonym it used was forgotten meanwhile."""
    if not targets:
        return {}
    _, text_field = REDACTION_TARGETS[target_type]
    spec = presidio.PolicySpec.of(policy)
    texts = [getattr(t, text_field) for t in targets]
    known: dict[str, list[RedactionFinding]] = defaultdict(list)
    # A message's DETECTED findings are the scan's, not a decision: their values are
    # still in the text, detected again here and redacted, and the rows replaced.
    for finding in RedactionFinding.objects.filter(
        target_type=target_type, target_id__in=[t.pk for t in targets]
    ).exclude(status=RedactionFinding.Status.DETECTED):
        known[str(finding.target_id)].append(finding)
    detections = presidio.engine().detect(
        texts, spec=spec, batch_size=batch_size, n_process=n_process
    )
    work = []
    for target, text, found in zip(targets, texts, detections, strict=True):
        earlier = known[str(target.pk)]
        # Only an exact match counts as already known: offsets go stale when a person
        # edits the text, and a stale span must never shield a value that moved.
        spans = {(f.start, f.end) for f in earlier}
        fresh = [d for d in found if (d.start, d.end) not in spans]
        waiting = [
            (f.start, f.end, f.entity_type)
            for f in earlier
            if f.status == RedactionFinding.Status.PENDING_REVIEW
        ]
        work.append((target, text, fresh, waiting, earlier))
    if not any(fresh or waiting for _, _, fresh, waiting, _ in work):
        return {str(target.pk): text for target, text, *_ in work}
    changed_conversations: set[uuid.UUID] = set()
    engine_texts: dict[str, str] = {}
    try:
        # One transaction from the first pseudonym numbered to the last finding stored:
        # a redaction that rolls back gives its numbers back.
        with transaction.atomic():
            pseudonyms = WorkspacePseudonyms(policy.workspace_id)
            pseudonyms.preload(
                pair
                for _, text, fresh, waiting, _ in work
                for pair in _pseudonym_values(text, fresh, waiting, spec)
            )
            plans = []
            for target, text, fresh, waiting, earlier in work:
                result = presidio.redact_text(
                    text, fresh, spec=spec, pending=waiting, pseudonyms=pseudonyms
                )
                engine_texts[str(target.pk)] = result.engine_text
                used = pseudonyms.take_used()
                if result.changed or result.findings or used:
                    plans.append((target, text, result, earlier, used))
            new_findings = []
            requoted: list[tuple[Any, str, str]] = []  # messages whose pins quote them again
            announced: set[int] = set()  # new pseudonyms already named in an event
            changes: list[AuditChange] = []
            for target, text, result, earlier, used in plans:
                kept = False
                if result.changed:
                    _store_text(target, text_field, text, result.text)
                    if type(target) is Message:
                        requoted.append((target.pk, text, result.text))
                    shift_findings(earlier, result.edits)
                    kept = keep_original(
                        policy=policy,
                        target_type=target_type,
                        target_id=target.pk,
                        conversation_id=target.conversation_id,
                        text=text,
                    )
                    changed_conversations.add(target.conversation_id)
                new_findings += finding_rows(
                    policy=policy,
                    conversation_id=target.conversation_id,
                    target_type=target_type,
                    target_id=target.pk,
                    findings=result.findings,
                    pseudonyms=pseudonyms,
                )
                numbered = {p.pk for p, _ in used} & pseudonyms.allocated - announced
                announced |= numbered
                if result.changed or result.findings or numbered:
                    changes.append(
                        AuditChange(
                            action=f"{target_type}.redact",
                            target_type=target_type,
                            target_id=str(target.pk),
                            after={
                                **finding_summary(result.findings),
                                "textChanged": result.changed,
                                "originalKept": kept,
                                "policyVersion": policy.version,
                                "newPseudonyms": len(numbered),
                            },
                        )
                    )
            # One event per redacted row, appended to the chain in one extension.
            audit_record_many(workspace_id=policy.workspace_id, actor=actor, changes=changes)
            if target_type == RedactionFinding.TargetType.MESSAGE:
                # Replaced by this pass's findings of the same values (applied or pending).
                RedactionFinding.objects.filter(
                    target_type=target_type,
                    target_id__in=[target.pk for target, *_ in plans],
                    status=RedactionFinding.Status.DETECTED,
                ).delete()
            RedactionFinding.objects.bulk_create(new_findings)
            requote_pins(changes=requoted)
            uses = [(target, used) for target, _, _, _, used in plans]
            pseudonym_sightings_record(target_type=target_type, uses=uses)
            pseudonyms_check_held(p.pk for _, used in uses for p, _ in used)
            for conversation_id in changed_conversations:
                # The rendered context (and its ETag) is keyed on memory_version.
                Conversation.objects.filter(pk=conversation_id).update(
                    memory_version=F("memory_version") + 1
                )
    except PseudonymForgotten:
        raise RedactionConflict("a pseudonym was forgotten while it was being used") from None
    return engine_texts


def redaction_gate_for_reflection(
    *, conversation: Conversation, observations: Sequence[Observation]
) -> dict[str, str]:
    """The gate in front of the Reflector: redact the observations it is about to read
    (storing the redacted text, the findings, and the originals per policy) and return
    the text it may read, by observation id, with findings pending review masked too.

    Raises RedactionGateError (retryable), so the run goes back to PENDING, while the policy
    makes reflection wait for reviews and one is pending in this conversation, and when
    an observation was edited during the redaction."""
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    try:
        texts = redact_targets(
            target_type=RedactionFinding.TargetType.OBSERVATION,
            targets=observations,
            policy=policy,
        )
    except RedactionConflict:
        raise RedactionGateError(
            "an observation changed while it was being redacted; the run will retry",
            retryable=True,
        ) from None
    if policy.reflection_waits_for_review:
        pending = RedactionFinding.objects.filter(
            conversation_id=conversation.pk, status=RedactionFinding.Status.PENDING_REVIEW
        ).count()
        if pending:
            raise RedactionGateError(
                f"reflection waits for {pending} redaction finding(s) pending review "
                "(the workspace's policy); the run will retry",
                retryable=True,
            )
    return texts


def conversations_with_pii(*, conversation_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these conversations hold detected personal data: any finding a person
    did not dismiss, in any tier, redacted or not (the dashboard's "PII found")."""
    return set(
        RedactionFinding.objects.filter(conversation_id__in=conversation_ids)
        .exclude(status=RedactionFinding.Status.DISMISSED)
        .values_list("conversation_id", flat=True)
        .distinct()
    )


def redacts_before_observation(*, conversation: Conversation) -> bool:
    """Does the workspace's policy redact messages before the Observer reads them? A
    workspace that has no policy row yet has the defaults, which do."""
    redact = (
        RedactionPolicy.objects.filter(workspace_id=conversation.workspace_id)
        .values_list("redact_before_observation", flat=True)
        .first()
    )
    return RedactionPolicy().redact_before_observation if redact is None else redact


def redaction_for_observer(*, conversation: Conversation, messages: Sequence[Message]) -> list[str]:
    """What the Observer reads of ``messages``. When the policy redacts before
    observation, each message with its findings replaced by the policy's operators: the
    scan's findings when the scan is current, else it scans them first (recording the
    findings, as the scan task would). The stored messages are not changed. Otherwise
    the contents as stored, without loading the engine."""
    if not messages or not redacts_before_observation(conversation=conversation):
        return [m.content for m in messages]
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    try:
        return scan.observer_texts(policy=policy, messages=messages)
    except scan.ScanConflict:
        raise RedactionGateError(
            "a message changed while it was being scanned; the run will retry", retryable=True
        ) from None


def _typed_redaction(*, workspace_id: uuid.UUID, texts: Sequence[str]) -> list[str]:
    """``texts`` with what the workspace's policy finds replaced by its operators, the
    pseudonym operator by the entity type (``<CREDIT_CARD>``), pending findings
    included. For rows that are no redaction target (no findings, no sightings are
    recorded for them): no pseudonym is numbered for a value they hold. Empty texts
    do not load the engine."""
    if not any(texts):
        return list(texts)
    policy = redaction_policy_get_or_create(workspace_id=workspace_id)
    spec = presidio.PolicySpec.of(policy)
    detections = presidio.engine().detect(list(texts), spec=spec)
    redacted = []
    for text, found in zip(texts, detections, strict=True):
        typed = [replace(d, operator="replace") if d.operator == "pseudonym" else d for d in found]
        redacted.append(presidio.redact_text(text, typed, spec=spec).engine_text)
    return redacted


def redaction_for_run_summary(*, conversation: Conversation, texts: Sequence[str]) -> list[str]:
    """What an Observer run may keep of what its engine said beside the observations
    (the current task, the suggested response). Read from redacted messages, it holds
    nothing to redact. Read from messages as stored, its values are replaced by their
    entity type (``<CREDIT_CARD>``), pending ones included: a run row is no redaction
    target, so a value left in it would outlive the redaction of memory, and no
    pseudonym is numbered for it."""
    if not any(texts) or redacts_before_observation(conversation=conversation):
        return list(texts)
    return _typed_redaction(workspace_id=conversation.workspace_id, texts=texts)


# --- reasoning steps and tool calls --------------------------------------------------------------


def _redacts_at_ingest(workspace_id: uuid.UUID) -> bool:
    """The policy's ``redact_at_ingest``, in one indexed query."""
    return bool(
        RedactionPolicy.objects.filter(workspace_id=workspace_id)
        .values_list("redact_at_ingest", flat=True)
        .first()
    )


def reasoning_redaction_at_ingest(
    *, workspace_id: uuid.UUID, texts: Sequence[str]
) -> list[str] | None:
    """The texts of a reasoning step or tool call to store, when the policy redacts
    messages at ingest: what it finds replaced by entity type (a tool's arguments and
    output hold personal data as often as messages do). None (one indexed query,
    without loading the engine) when it does not."""
    if not _redacts_at_ingest(workspace_id):
        return None
    return _typed_redaction(workspace_id=workspace_id, texts=texts)


def redaction_for_observer_tool_output(
    *, conversation: Conversation, texts: Sequence[str]
) -> list[str]:
    """What the Observer reads of tool calls' output: redacted when the policy redacts
    messages before observation (the same gate as ``redaction_for_observer``), as
    stored otherwise."""
    if not redacts_before_observation(conversation=conversation):
        return list(texts)
    return _typed_redaction(workspace_id=conversation.workspace_id, texts=texts)


def reasoning_masked_for_display(*, workspace_id: uuid.UUID, texts: Sequence[str]) -> list[str]:
    """Reasoning texts as the dashboard shows them to anyone: each value the policy's
    recognizers find masked as its entity type, as messages are masked on the page."""
    return _typed_redaction(workspace_id=workspace_id, texts=texts)


def redaction_engine_status() -> str:
    """ "loaded" when this process has loaded the PII engine, "loadable" when its spaCy
    pipeline is installed (it loads on first use), "missing" when it is not: then every
    redaction, and every run of a policy that redacts, fails."""
    if presidio.engine_loaded():
        return "loaded"
    return "loadable" if importlib.util.find_spec(presidio.spacy_model_name()) else "missing"


def message_scan_request(*, conversation: Conversation, messages: Sequence[Message]) -> None:
    """Have ``messages`` (one write's: consecutive seq numbers) scanned once the write
    commits: one ScanRequest row (the sweep sends again what a lost task never did) and
    one task. Call inside the transaction that inserts them; nothing here loads the
    engine."""
    # One row per write rather than one per message: 100 rows cost a 100-message bulk
    # write 3 ms of CPU more (of 5), one row costs nothing measurable.
    request = ScanRequest.objects.create(
        workspace_id=conversation.workspace_id,
        conversation_id=conversation.pk,
        first_seq=min(m.seq for m in messages),
        last_seq=max(m.seq for m in messages),
    )
    # A scan task still waiting for a worker takes this request too (a task tops itself
    # up with its workspace's waiting requests): under a stream of writes the worker gets
    # one task per batch it can take, not one per write.
    enqueue_on_commit_unless_queued(
        scan.SCAN_TASK,
        [request.pk],
        str(conversation.workspace_id),
        mark=scan.scan_queued_mark(conversation.workspace_id),
    )


@dataclass
class IngestRedaction:
    """What the engine found in message contents before they are stored; ``redact``
    applies it inside the transaction that stores them."""

    policy: RedactionPolicy
    originals: list[str]
    detections: list[list[presidio.Detection]]
    results: list[presidio.Redaction] = field(default_factory=list)
    used: list[list[tuple[Pseudonym, str]]] = field(default_factory=list)
    pseudonyms: WorkspacePseudonyms | None = None

    def redact(self) -> list[str]:
        """The contents to store. Call inside the transaction that stores the messages:
        it numbers the new pseudonyms, which must not outlive a failed write."""
        spec = presidio.PolicySpec.of(self.policy)
        pseudonyms = WorkspacePseudonyms(self.policy.workspace_id)
        pseudonyms.preload(
            pair
            for text, found in zip(self.originals, self.detections, strict=True)
            for pair in _pseudonym_values(text, found, [], spec)
        )
        self.results, self.used = [], []
        for text, found in zip(self.originals, self.detections, strict=True):
            result = presidio.redact_text(text, found, spec=spec, pseudonyms=pseudonyms)
            self.results.append(result)
            self.used.append(pseudonyms.take_used())
        self.pseudonyms = pseudonyms
        return self.texts

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.results]


def redaction_at_ingest(
    *, workspace_id: uuid.UUID, contents: Sequence[str], redact: bool | None = None
) -> IngestRedaction | None:
    """Find what to redact in message contents before they are stored, when the policy
    says so (None otherwise, without loading the engine, after one indexed query unless
    the caller knows the policy's ``redact_at_ingest`` already: ``redact``).
    The caller stores ``redact()`` of the result, in its transaction. Findings pending
    review stay in the stored text until a person decides; engines never read them
    unmasked (the observation and reflection gates mask them)."""
    if not (_redacts_at_ingest(workspace_id) if redact is None else redact):
        return None
    policy = RedactionPolicy.objects.get(workspace_id=workspace_id)
    spec = presidio.PolicySpec.of(policy)
    return IngestRedaction(
        policy=policy,
        originals=list(contents),
        detections=presidio.engine().detect(list(contents), spec=spec),
    )


def redaction_at_ingest_record(
    *, conversation: Conversation, messages: Sequence[Message], ingest: IngestRedaction
) -> None:
    """Store the findings (and originals, per policy), and where the pseudonyms' values
    were seen, of ``ingest.redact()`` for the messages just inserted. Call inside the
    transaction that inserts them."""
    policy = ingest.policy
    findings = []
    # Redacted by the scan's engine under the current policy: the scans are current.
    MessageScan.objects.bulk_create(
        MessageScan(
            message_id=message.pk,
            workspace_id=conversation.workspace_id,
            conversation_id=conversation.pk,
            content_digest=scan.content_digest(message.content),
            policy_version=policy.version,
            findings=len(result.findings),
            scanned_at=timezone.now(),
        )
        for message, result in zip(messages, ingest.results, strict=True)
    )
    allocated = ingest.pseudonyms.allocated if ingest.pseudonyms else set()
    announced: set[int] = set()  # new pseudonyms already named in an event
    for message, original, result, used in zip(
        messages, ingest.originals, ingest.results, ingest.used, strict=True
    ):
        if not result.findings:
            continue
        numbered = {p.pk for p, _ in used} & allocated - announced
        announced |= numbered
        kept = False
        if result.changed:
            kept = keep_original(
                policy=policy,
                target_type=RedactionFinding.TargetType.MESSAGE,
                target_id=message.pk,
                conversation_id=conversation.pk,
                text=original,
            )
        findings += finding_rows(
            policy=policy,
            conversation_id=conversation.pk,
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=message.pk,
            findings=result.findings,
            pseudonyms=ingest.pseudonyms,
        )
        audit_record(
            workspace_id=policy.workspace_id,
            actor=SYSTEM_ACTOR,
            action="message.redact",
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=str(message.pk),
            after={
                **finding_summary(result.findings),
                "textChanged": result.changed,
                "originalKept": kept,
                "policyVersion": policy.version,
                "newPseudonyms": len(numbered),
                "atIngest": True,
            },
        )
    RedactionFinding.objects.bulk_create(findings)
    pseudonym_sightings_record(
        target_type=RedactionFinding.TargetType.MESSAGE,
        uses=list(zip(messages, ingest.used, strict=True)),
    )


# --- pseudonyms in what memory serves and deletes ----------------------------------------------


def policy_flags_of(workspace_id: Any) -> dict[str, Subquery]:
    """The workspace's redaction policy flags that the API's requests ask about, as
    expressions of the workspace ``workspace_id`` (a value or an ``OuterRef``): a query
    for something of the workspace (the API's conversation lookup) answers them without
    queries of their own. ``agents_see_reidentified``: agents are served values, not
    pseudonyms; ``redact_at_ingest``: messages are redacted before they are stored."""
    policy = RedactionPolicy.objects.filter(workspace_id=workspace_id)
    return {
        flag: Subquery(policy.values(flag)[:1])
        for flag in ("agents_see_reidentified", "redact_at_ingest")
    }


def agents_see_reidentified_sql(workspace_id_column: str) -> str:
    """``policy_flags_of`` for ``agents_see_reidentified``, as SQL, for a statement
    written by hand."""
    table = RedactionPolicy._meta.db_table
    return (
        f'SELECT p.agents_see_reidentified FROM "{table}" p '
        f"WHERE p.workspace_id = {workspace_id_column}"
    )


def reidentifier_for_api(
    *, workspace_id: uuid.UUID, allowed: bool | None = None
) -> Reidentifier | None:
    """What puts the values back into memory served to API keys, when the workspace's
    policy lets agents see re-identified memory; None otherwise. ``allowed`` is that
    answer when the caller has it already (``agents_see_reidentified_of``); without it,
    one indexed query."""
    if allowed is None:
        allowed = (
            RedactionPolicy.objects.filter(workspace_id=workspace_id)
            .values_list("agents_see_reidentified", flat=True)
            .first()
        )
    return Reidentifier.for_workspace(workspace_id) if allowed else None


def reidentifier_for_measurement(*, workspace_id: uuid.UUID) -> Reidentifier:
    """What puts the values back into memory texts that are compared with the messages
    (the recall estimate) and never shown nor stored."""
    return Reidentifier.for_workspace(workspace_id)


def conversation_pseudonyms(*, conversation_id: uuid.UUID) -> set[int]:
    """The pseudonyms seen in a conversation: read before deleting it, then passed to
    ``pseudonyms_release``."""
    return pseudonym_ids_seen_in(conversation_ids=[conversation_id])


def pseudonyms_release(
    *,
    workspace_id: uuid.UUID,
    pseudonym_ids: set[int],
    actor: Actor,
    conversation_id: uuid.UUID,
    reason: str = "",
) -> int:
    """After a conversation was deleted (its sightings with it): forget the pseudonyms
    no remaining message holds, audited. Returns how many."""
    return pseudonyms_forget_unheld(
        workspace_id=workspace_id,
        pseudonym_ids=pseudonym_ids,
        actor=actor,
        target_type="conversation",
        target_id=str(conversation_id),
        reason=reason,
    )
