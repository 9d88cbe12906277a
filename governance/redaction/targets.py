"""Redacting texts already stored: the rows that record findings, the restricted
original kept per policy, the conditional store of a target's new text (messages,
observations, reflections) and the pins that quote a redacted message, quoted again.
Used by the gates (at ingest, before the Reflector) and by review and rescan."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from governance.audit.writer import AuditChange, audit_record_many
from governance.models import (
    REDACTION_TARGETS,
    MessageScan,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
)
from governance.redaction import presidio, scan
from governance.redaction.pseudonyms import (
    PseudonymForgotten,
    WorkspacePseudonyms,
    pseudonym_sightings_record,
    pseudonyms_check_held,
)
from memory.models import (
    Conversation,
    IdempotencyRecord,
    Message,
    Observation,
    Pin,
    Reflection,
)
from memory.tokens import token_count


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
        replies_forget(messages=[target])


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


def replies_forget(*, messages: Sequence[Message]) -> int:
    """Delete the stored idempotent replies that repeat any of these messages, whose
    text a redaction just rewrote: a replay must not answer with the values the
    redaction took out. The client's retry of such a key runs as a new request."""
    if not messages:
        return 0
    return IdempotencyRecord.objects.repeating(messages).delete()[0]


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


def pseudonym_values(
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
    allow: Sequence[str] = (),
    review: bool = True,
) -> dict[str, str]:
    """Analyse stored texts in one batch, store the redacted texts with their findings
    (and originals, per policy), and return what an engine may read, by target id.
    ``allow``: words left as written beside the policy's allow list, for this scan only.
    ``review`` False: a finding in the policy's review band is applied at once rather
    than left in the text for a person to review (a note someone typed would be served
    with the value meanwhile).

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
    if allow:
        spec = replace(spec, allow_list=(*spec.allow_list, *allow))
    if not review:
        spec = replace(
            spec, score_threshold=spec.detection_floor, review_min_score=1.0, review_max_score=1.0
        )
    texts = [getattr(t, text_field) for t in targets]
    known: dict[str, list[RedactionFinding]] = defaultdict(list)
    # A message's DETECTED findings are the scan's, not a decision: their values are
    # still in the text, detected again here and redacted, and the rows replaced.
    for finding in RedactionFinding.objects.filter(
        target_type=target_type, target_id__in=[t.pk for t in targets]
    ).exclude(status=RedactionFinding.Status.DETECTED):
        known[str(finding.target_id)].append(finding)
    detections = presidio.engine().detect(
        texts,
        spec=spec,
        batch_size=batch_size,
        n_process=n_process,
        known=WorkspacePseudonyms.known(
            policy.workspace_id, conversation_ids=(t.conversation_id for t in targets)
        ),
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
            # A note's people are its conversation's, as a message's are: "Monica" in an
            # observation of a conversation Monica Geller speaks in is her label.
            pseudonyms.people_in_scope(
                conversation_ids=(t.conversation_id for t in targets), speakers=(), mentioned=()
            )
            pseudonyms.preload(
                pair
                for _, text, fresh, waiting, _ in work
                for pair in pseudonym_values(text, fresh, waiting, spec)
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
            rewritten: list[Message] = []  # and whose idempotent replies go
            announced: set[int] = set()  # new pseudonyms already named in an event
            changes: list[AuditChange] = []
            for target, text, result, earlier, used in plans:
                kept = False
                if result.changed:
                    _store_text(target, text_field, text, result.text)
                    if type(target) is Message:
                        requoted.append((target.pk, text, result.text))
                        rewritten.append(target)
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
            replies_forget(messages=rewritten)
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
