"""Writes of the governance app."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone
from django.utils.ipv6 import clean_ipv6_address

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from governance import redaction
from governance.models import (
    AuditChainHead,
    AuditEvent,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
)
from memory.engines.base import EngineError
from memory.models import Conversation, Message, Observation, Reflection
from memory.tokens import token_count

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


# --- redaction --------------------------------------------------------------------------------
# Imports beside the section (as in selectors.py): several features append to this module.
# governance.redaction imports neither Presidio nor spaCy until the engine is first used.


# Which field of which model holds a target's text.
REDACTION_TARGETS: dict[str, tuple[type[Message | Observation | Reflection], str]] = {
    RedactionFinding.TargetType.MESSAGE: (Message, "content"),
    RedactionFinding.TargetType.OBSERVATION: (Observation, "text"),
    RedactionFinding.TargetType.REFLECTION: (Reflection, "text"),
}
POLICY_LIST_LIMIT = 1000
POLICY_VALUE_MAX_CHARS = 200
CUSTOM_RECOGNIZERS_LIMIT = 50
CUSTOM_PATTERN_MAX_CHARS = 500
CONTEXT_WORDS_LIMIT = 20
# The policy's fields and their names on the wire (and in validation errors).
POLICY_FIELDS = {
    "entities": "entities",
    "score_threshold": "scoreThreshold",
    "operators": "operators",
    "default_operator": "defaultOperator",
    "allow_list": "allowList",
    "deny_list": "denyList",
    "custom_recognizers": "customRecognizers",
    "review_min_score": "reviewMinScore",
    "review_max_score": "reviewMaxScore",
    "redact_at_ingest": "redactAtIngest",
    "redact_before_observation": "redactBeforeObservation",
    "reflection_waits_for_review": "reflectionWaitsForReview",
    "keep_originals": "keepOriginals",
}


class RedactionConflict(Exception):
    """A target's text changed between analysis and storage (a person edited it)."""


def _list_digests(values: Sequence[str], *, workspace_id: object) -> list[str]:
    # Audit events are append-only: an erasure request could never remove a value written
    # into one. Allow and deny lists hold (candidate) personal data, so the trail records
    # keyed digests, enough to tell which entries changed, never the entries.
    key = f"{workspace_id}|policy-list".encode()
    return sorted(hashlib.sha256(key + v.encode()).hexdigest()[:16] for v in values)


def redaction_policy_snapshot(policy: RedactionPolicy) -> dict[str, Any]:
    """The policy as the audit trail records it (list values as digests)."""
    snapshot: dict[str, Any] = {
        wire: getattr(policy, name)
        for name, wire in POLICY_FIELDS.items()
        if name not in ("allow_list", "deny_list")
    }
    for name in ("allow_list", "deny_list"):
        snapshot[POLICY_FIELDS[name]] = {
            "count": len(getattr(policy, name)),
            "digests": _list_digests(getattr(policy, name), workspace_id=policy.workspace_id),
        }
    snapshot["version"] = policy.version
    return snapshot


def redaction_policy_get_or_create(*, workspace_id: object) -> RedactionPolicy:
    """The workspace's policy; a workspace that has none gets the defaults, stored on
    first use (and audited, so the trail shows which policy was in force)."""
    policy = RedactionPolicy.objects.filter(workspace_id=workspace_id).first()
    if policy is not None:
        return policy
    try:
        with transaction.atomic():
            policy = RedactionPolicy.objects.create(workspace_id=workspace_id)
            audit_record(
                workspace_id=workspace_id,
                actor=SYSTEM_ACTOR,
                action="redaction_policy.create",
                target_type="redaction_policy",
                target_id=str(policy.pk),
                after=redaction_policy_snapshot(policy),
            )
    except IntegrityError:  # created by a concurrent request a moment earlier
        policy = RedactionPolicy.objects.get(workspace_id=workspace_id)
    return policy


def _invalid(field: str, message: str) -> MemdeskError:
    return MemdeskError("invalid_policy", f"{field}: {message}", field=field)


def _string_list(value: Any, field: str, *, limit: int, max_chars: int) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(field, "must be a list of strings.")
    if len(value) > limit:
        raise _invalid(field, f"at most {limit} entries; got {len(value)}.")
    cleaned = [v.strip() for v in value]
    if any(not v or len(v) > max_chars for v in cleaned):
        raise _invalid(field, f"each entry must be 1 to {max_chars} characters.")
    return list(dict.fromkeys(cleaned))


def _score(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise _invalid(field, f"must be a number from 0 to 1; got {value!r}.")
    return float(value)


def _entity_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not redaction.ENTITY_NAME.match(value):
        raise _invalid(
            field, f"entity types are UPPER_CASE names such as EMAIL_ADDRESS; got {value!r}."
        )
    return value


def _custom_recognizers(value: Any) -> list[dict[str, Any]]:
    field = "customRecognizers"
    if not isinstance(value, list) or len(value) > CUSTOM_RECOGNIZERS_LIMIT:
        raise _invalid(field, f"must be a list of at most {CUSTOM_RECOGNIZERS_LIMIT} objects.")
    cleaned: list[dict[str, Any]] = []
    for index, item in enumerate(value):
        at = f"{field}[{index}]"
        if not isinstance(item, dict):
            raise _invalid(at, "must be an object with name, entity, pattern, score, context.")
        unknown = set(item) - {"name", "entity", "pattern", "score", "context"}
        if unknown:
            raise _invalid(at, f"unknown keys {sorted(unknown)}.")
        name = item.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[\w.-]{1,50}", name):
            raise _invalid(f"{at}.name", "1 to 50 letters, digits, '_', '.', '-'.")
        pattern = item.get("pattern")
        if not isinstance(pattern, str) or not 0 < len(pattern) <= CUSTOM_PATTERN_MAX_CHARS:
            raise _invalid(
                f"{at}.pattern",
                f"a regular expression of 1 to {CUSTOM_PATTERN_MAX_CHARS} characters.",
            )
        problem = redaction.validate_pattern(pattern)
        if problem:
            raise _invalid(f"{at}.pattern", f"does not compile ({problem}).")
        context = _string_list(
            item.get("context", []), f"{at}.context", limit=CONTEXT_WORDS_LIMIT, max_chars=50
        )
        cleaned.append(
            {
                "name": name,
                "entity": _entity_name(item.get("entity"), f"{at}.entity"),
                "pattern": pattern,
                "score": _score(item.get("score", 0.5), f"{at}.score"),
                "context": context,
            }
        )
    if len({c["name"] for c in cleaned}) != len(cleaned):
        raise _invalid(field, "names must be unique.")
    return cleaned


def _validated_policy_fields(values: dict[str, Any], current: RedactionPolicy) -> dict[str, Any]:
    unknown = set(values) - set(POLICY_FIELDS)
    if unknown:
        raise MemdeskError("invalid_policy", f"Unknown policy fields: {sorted(unknown)}.")
    cleaned: dict[str, Any] = {}
    for name, value in values.items():
        field = POLICY_FIELDS[name]
        if name in ("score_threshold", "review_min_score", "review_max_score"):
            cleaned[name] = _score(value, field)
        elif name in (
            "redact_at_ingest",
            "redact_before_observation",
            "reflection_waits_for_review",
            "keep_originals",
        ):
            if not isinstance(value, bool):
                raise _invalid(field, f"must be true or false; got {value!r}.")
            cleaned[name] = value
        elif name == "default_operator":
            if value not in redaction.OPERATORS:
                raise _invalid(field, f"must be one of {', '.join(redaction.OPERATORS)}.")
            cleaned[name] = value
        elif name == "operators":
            if not isinstance(value, dict):
                raise _invalid(field, "must be an object: entity type -> operator.")
            for entity, operator in value.items():
                _entity_name(entity, field)
                if operator not in redaction.OPERATORS:
                    raise _invalid(
                        f"{field}.{entity}", f"must be one of {', '.join(redaction.OPERATORS)}."
                    )
            cleaned[name] = dict(value)
        elif name == "custom_recognizers":
            cleaned[name] = _custom_recognizers(value)
        elif name == "entities":
            if not isinstance(value, list):
                raise _invalid(field, "must be a list of entity types.")
            cleaned[name] = list(dict.fromkeys(_entity_name(v, field) for v in value))
        else:  # allow_list, deny_list
            cleaned[name] = _string_list(
                value, field, limit=POLICY_LIST_LIMIT, max_chars=POLICY_VALUE_MAX_CHARS
            )
    custom = {c["entity"] for c in cleaned.get("custom_recognizers", current.custom_recognizers)}
    known = redaction.SUPPORTED_ENTITIES | custom | {redaction.DENY_LIST_ENTITY}
    for entity in cleaned.get("entities", []):
        if entity not in known:
            raise _invalid(
                "entities",
                f"{entity} is not a type this engine detects; add a custom recognizer for "
                f"it, or use one of {', '.join(sorted(redaction.SUPPORTED_ENTITIES))}.",
            )
    review_min = cleaned.get("review_min_score", current.review_min_score)
    review_max = cleaned.get("review_max_score", current.review_max_score)
    if review_min > review_max:
        raise _invalid("reviewMinScore", "must not be above reviewMaxScore.")
    return cleaned


def redaction_policy_update(
    *, workspace_id: object, actor: Actor, values: dict[str, Any], replace: bool = False
) -> RedactionPolicy:
    """Change the workspace's policy (``values`` keyed by model field name). With
    ``replace`` every field not given returns to its default (PUT); otherwise only the
    given fields change (PATCH). Bumps the version and audits before and after; a change
    that changes nothing is neither."""
    with transaction.atomic():
        # Inside the transaction: a refused change must not leave a policy (and its
        # creation event) that nobody saved.
        redaction_policy_get_or_create(workspace_id=workspace_id)
        policy = RedactionPolicy.objects.select_for_update().get(workspace_id=workspace_id)
        cleaned = _validated_policy_fields(values, policy if not replace else RedactionPolicy())
        before = redaction_policy_snapshot(policy)
        if replace:
            defaults = RedactionPolicy()
            for name in POLICY_FIELDS:
                setattr(policy, name, getattr(defaults, name))
        for name, value in cleaned.items():
            setattr(policy, name, value)
        after = redaction_policy_snapshot(policy)
        after["version"] = before["version"]
        if after == before:
            return policy
        policy.version += 1
        policy.updated_at = timezone.now()
        policy.save()
        audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action="redaction_policy.update",
            target_type="redaction_policy",
            target_id=str(policy.pk),
            before=before,
            after=redaction_policy_snapshot(policy),
        )
    return policy


def _finding_summary(findings: Sequence[redaction.Finding]) -> dict[str, Any]:
    by_type: dict[str, int] = defaultdict(int)
    for finding in findings:
        by_type[finding.entity_type] += 1
    return {
        "findings": len(findings),
        "applied": sum(f.status == redaction.APPLIED for f in findings),
        "pendingReview": sum(f.status == redaction.PENDING_REVIEW for f in findings),
        "entities": dict(sorted(by_type.items())),
    }


def _keep_original(
    *,
    policy: RedactionPolicy,
    target_type: str,
    target_id: object,
    conversation_id: object,
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


def _shift_findings(
    findings: Sequence[RedactionFinding], edits: Sequence[tuple[int, int, int]]
) -> None:
    """Keep earlier findings' offsets pointing into the text after an edit."""
    changed = []
    for finding in findings:
        start = redaction.shift_offset(finding.start, edits, at_end=False)
        end = redaction.shift_offset(finding.end, edits, at_end=True)
        if (start, end) != (finding.start, finding.end):
            finding.start, finding.end = start, max(start, end)
            changed.append(finding)
    if changed:
        RedactionFinding.objects.bulk_update(changed, ["start", "end"])


def _store_target_text(
    target: Message | Observation | Reflection, field: str, old: str, new: str
) -> None:
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
    for name, value in fields.items():
        setattr(target, name, value)


def _finding_rows(
    *,
    policy: RedactionPolicy,
    conversation_id: Any,
    target_type: str,
    target_id: Any,
    findings: Sequence[Any],
) -> list[RedactionFinding]:
    """Rows recording what the engine found in one object: where, what, how sure, what was
    done, never the value."""
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
        )
        for f in findings
    ]


def _redact_targets(
    *,
    target_type: str,
    targets: Sequence[Message | Observation | Reflection],
    policy: RedactionPolicy,
    actor: Actor = SYSTEM_ACTOR,
    batch_size: int = redaction.BATCH_SIZE,
    n_process: int = redaction.N_PROCESS,
) -> dict[str, str]:
    """Analyse stored texts in one batch, store the redacted texts with their findings
    (and originals, per policy), and return what an engine may read, by target id.

    A span at exactly the place of a finding the target already has is not a finding
    again: one pending review is still waiting (and masked for the engine), a dismissed
    one was judged to stay, an applied one is its own replacement. Raises
    RedactionConflict (storing nothing) when a target's text changed since it was read."""
    if not targets:
        return {}
    _, field = REDACTION_TARGETS[target_type]
    spec = redaction.PolicySpec.of(policy)
    texts = [getattr(t, field) for t in targets]
    known: dict[str, list[RedactionFinding]] = defaultdict(list)
    for finding in RedactionFinding.objects.filter(
        target_type=target_type, target_id__in=[t.pk for t in targets]
    ):
        known[str(finding.target_id)].append(finding)
    detections = redaction.engine().detect(
        texts, spec=spec, batch_size=batch_size, n_process=n_process
    )
    engine_texts: dict[str, str] = {}
    plans = []
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
        result = redaction.redact_text(text, fresh, spec=spec, pending=waiting)
        engine_texts[str(target.pk)] = result.engine_text
        if result.changed or result.findings:
            plans.append((target, text, result, earlier))
    if not plans:
        return engine_texts
    changed_conversations: set[object] = set()
    with transaction.atomic():
        new_findings = []
        for target, text, result, earlier in plans:
            kept = False
            if result.changed:
                _store_target_text(target, field, text, result.text)
                _shift_findings(earlier, result.edits)
                kept = _keep_original(
                    policy=policy,
                    target_type=target_type,
                    target_id=target.pk,
                    conversation_id=target.conversation_id,
                    text=text,
                )
                changed_conversations.add(target.conversation_id)
            new_findings += _finding_rows(
                policy=policy,
                conversation_id=target.conversation_id,
                target_type=target_type,
                target_id=target.pk,
                findings=result.findings,
            )
            audit_record(
                workspace_id=policy.workspace_id,
                actor=actor,
                action=f"{target_type}.redact",
                target_type=target_type,
                target_id=str(target.pk),
                after={
                    **_finding_summary(result.findings),
                    "textChanged": result.changed,
                    "originalKept": kept,
                    "policyVersion": policy.version,
                },
            )
        RedactionFinding.objects.bulk_create(new_findings)
        for conversation_id in changed_conversations:
            # The rendered context (and its ETag) is keyed on memory_version.
            Conversation.objects.filter(pk=conversation_id).update(
                memory_version=F("memory_version") + 1
            )
    return engine_texts


def redaction_gate_for_reflection(
    *, conversation: Conversation, observations: Sequence[Observation]
) -> dict[str, str]:
    """The gate in front of the Reflector: redact the observations it is about to read
    (storing the redacted text, the findings, and the originals per policy) and return
    the text it may read, by observation id, with findings pending review masked too.

    Raises a retryable EngineError, so the run goes back to PENDING, while the policy
    makes reflection wait for reviews and one is pending in this conversation, and when
    an observation was edited during the redaction."""
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    try:
        texts = _redact_targets(
            target_type=RedactionFinding.TargetType.OBSERVATION,
            targets=observations,
            policy=policy,
        )
    except RedactionConflict:
        raise EngineError(
            "an observation changed while it was being redacted; the run will retry",
            retryable=True,
        ) from None
    if policy.reflection_waits_for_review:
        pending = RedactionFinding.objects.filter(
            conversation_id=conversation.pk, status=RedactionFinding.Status.PENDING_REVIEW
        ).count()
        if pending:
            raise EngineError(
                f"reflection waits for {pending} redaction finding(s) pending review "
                "(the workspace's policy); the run will retry",
                retryable=True,
            )
    return texts


def redaction_for_observer(*, conversation: Conversation, messages: Sequence[Message]) -> list[str]:
    """What the Observer reads of ``messages``. When the policy redacts before
    observation, the messages are redacted (stored, with findings and originals per
    policy) and findings pending review are masked in the Observer's copy; otherwise the
    contents as stored, without loading the engine."""
    redact = (
        RedactionPolicy.objects.filter(workspace_id=conversation.workspace_id)
        .values_list("redact_before_observation", flat=True)
        .first()
    )
    if not redact or not messages:
        return [m.content for m in messages]
    policy = redaction_policy_get_or_create(workspace_id=conversation.workspace_id)
    try:
        texts = _redact_targets(
            target_type=RedactionFinding.TargetType.MESSAGE, targets=messages, policy=policy
        )
    except RedactionConflict:
        raise EngineError(
            "a message changed while it was being redacted; the run will retry", retryable=True
        ) from None
    return [texts[str(m.pk)] for m in messages]


@dataclass
class IngestRedaction:
    policy: RedactionPolicy
    originals: list[str]
    results: list[redaction.Redaction]

    @property
    def texts(self) -> list[str]:
        return [r.text for r in self.results]


def redaction_at_ingest(*, workspace_id: object, contents: Sequence[str]) -> IngestRedaction | None:
    """Redact message contents before they are stored, when the policy says so (None
    otherwise, after one indexed query and without loading the engine). Findings pending
    review stay in the stored text until a person decides; engines never read them
    unmasked (the observation and reflection gates mask them)."""
    redact = (
        RedactionPolicy.objects.filter(workspace_id=workspace_id)
        .values_list("redact_at_ingest", flat=True)
        .first()
    )
    if not redact:
        return None
    policy = RedactionPolicy.objects.get(workspace_id=workspace_id)
    spec = redaction.PolicySpec.of(policy)
    detections = redaction.engine().detect(list(contents), spec=spec)
    return IngestRedaction(
        policy=policy,
        originals=list(contents),
        results=[
            redaction.redact_text(text, found, spec=spec)
            for text, found in zip(contents, detections, strict=True)
        ],
    )


def redaction_at_ingest_record(
    *, conversation: Conversation, messages: Sequence[Message], ingest: IngestRedaction
) -> None:
    """Store the findings (and originals, per policy) of ``redaction_at_ingest`` for the
    messages just inserted. Call inside the transaction that inserts them."""
    policy = ingest.policy
    findings = []
    for message, original, result in zip(messages, ingest.originals, ingest.results, strict=True):
        if not result.findings:
            continue
        kept = False
        if result.changed:
            kept = _keep_original(
                policy=policy,
                target_type=RedactionFinding.TargetType.MESSAGE,
                target_id=message.pk,
                conversation_id=conversation.pk,
                text=original,
            )
        findings += _finding_rows(
            policy=policy,
            conversation_id=conversation.pk,
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=message.pk,
            findings=result.findings,
        )
        audit_record(
            workspace_id=policy.workspace_id,
            actor=SYSTEM_ACTOR,
            action="message.redact",
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id=str(message.pk),
            after={
                **_finding_summary(result.findings),
                "textChanged": result.changed,
                "originalKept": kept,
                "policyVersion": policy.version,
                "atIngest": True,
            },
        )
    RedactionFinding.objects.bulk_create(findings)


def _finding_target(
    finding: RedactionFinding, *, lock: bool
) -> Message | Observation | Reflection | None:
    model, _ = REDACTION_TARGETS[finding.target_type]
    rows = model.objects.select_for_update() if lock else model.objects
    return rows.filter(pk=finding.target_id).first()


def _finding_value(finding: RedactionFinding, text: str, policy: RedactionPolicy) -> str:
    """The value a pending finding points at in the current text. Its offsets are only
    trusted while a detector still finds that entity type there: a person may have
    edited the text since (an observation edit keeps no record of findings)."""
    value = text[finding.start : finding.end]
    spec = redaction.PolicySpec.of(policy)
    if not value.strip() or not redaction.engine().locates(
        text, spec=spec, entity_type=finding.entity_type, start=finding.start, end=finding.end
    ):
        raise MemdeskError(
            "finding_stale",
            "The text of this finding's object changed since it was recorded, so its "
            "offsets no longer point at the value. Dismiss it, or run "
            "rescan_redaction to record the current findings.",
            status_code=409,
        )
    return value


def _pending(finding_id: object) -> RedactionFinding:
    finding = RedactionFinding.objects.select_for_update().get(pk=finding_id)
    if finding.status != RedactionFinding.Status.PENDING_REVIEW:
        raise MemdeskError(
            "finding_not_pending",
            f"This finding was already decided ({finding.status}).",
            status_code=409,
        )
    return finding


def _finding_snapshot(finding: RedactionFinding) -> dict[str, Any]:
    return {
        "status": finding.status,
        "entityType": finding.entity_type,
        "targetType": finding.target_type,
        "targetId": str(finding.target_id),
        "start": finding.start,
        "end": finding.end,
        "operator": finding.operator,
    }


def redaction_finding_approve(
    *, finding: RedactionFinding, actor: Actor, reason: str = ""
) -> RedactionFinding:
    """A reviewer confirms a finding: its value is replaced in the stored text with the
    operator recorded on the finding (the original kept per policy), the target's other
    findings are moved to the new offsets, and the context's version is bumped."""
    with transaction.atomic():
        locked = _pending(finding.pk)
        before = _finding_snapshot(locked)
        policy = redaction_policy_get_or_create(workspace_id=locked.workspace_id)
        target = _finding_target(locked, lock=True)
        text_changed = False
        if target is not None:
            _, field = REDACTION_TARGETS[locked.target_type]
            text = getattr(target, field)
            value = _finding_value(locked, text, policy)
            replacement = redaction.operate(
                value,
                entity_type=locked.entity_type,
                operator=locked.operator,
                spec=redaction.PolicySpec.of(policy),
            )
            if replacement != value:
                edits = [(locked.start, locked.end, len(replacement))]
                new_text = text[: locked.start] + replacement + text[locked.end :]
                _store_target_text(target, field, text, new_text)
                others = RedactionFinding.objects.filter(
                    target_type=locked.target_type, target_id=locked.target_id
                ).exclude(pk=locked.pk)
                _shift_findings(list(others), edits)
                _keep_original(
                    policy=policy,
                    target_type=locked.target_type,
                    target_id=locked.target_id,
                    conversation_id=locked.conversation_id,
                    text=text,
                )
                locked.end = locked.start + len(replacement)
                text_changed = True
                Conversation.objects.filter(pk=locked.conversation_id).update(
                    memory_version=F("memory_version") + 1
                )
        locked.status = RedactionFinding.Status.APPROVED
        locked.reviewed_by = actor.label[:200]
        locked.reviewed_at = timezone.now()
        locked.save(update_fields=["status", "end", "reviewed_by", "reviewed_at"])
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="redaction_finding.approve",
            target_type="redaction_finding",
            target_id=str(locked.pk),
            before=before,
            after={
                **_finding_snapshot(locked),
                "textChanged": text_changed,
                "targetMissing": target is None,
            },
            reason=reason,
        )
    return locked


def redaction_finding_dismiss(
    *,
    finding: RedactionFinding,
    actor: Actor,
    add_to_allow_list: bool = False,
    reason: str = "",
) -> RedactionFinding:
    """A reviewer decides a finding is not personal data: the value stays in the text.
    With ``add_to_allow_list`` the value (read from the current text at the finding's
    offsets, checked to still be there) joins the policy's allow list, so it is never
    reported again; that is a policy change, audited and versioned as such."""
    with transaction.atomic():
        locked = _pending(finding.pk)
        before = _finding_snapshot(locked)
        added = False
        if add_to_allow_list:
            target = _finding_target(locked, lock=False)
            if target is None:
                raise MemdeskError(
                    "target_missing",
                    "The object of this finding no longer exists, so there is no value to "
                    "add to the allow list.",
                    status_code=409,
                )
            _, field = REDACTION_TARGETS[locked.target_type]
            policy = redaction_policy_get_or_create(workspace_id=locked.workspace_id)
            value = _finding_value(locked, getattr(target, field), policy)
            policy = RedactionPolicy.objects.select_for_update().get(pk=policy.pk)
            if value not in policy.allow_list:
                if len(policy.allow_list) >= POLICY_LIST_LIMIT:
                    raise _invalid("allowList", f"is full ({POLICY_LIST_LIMIT} entries).")
                policy_before = redaction_policy_snapshot(policy)
                policy.allow_list = [*policy.allow_list, value]
                policy.version += 1
                policy.updated_at = timezone.now()
                policy.save(update_fields=["allow_list", "version", "updated_at"])
                audit_record(
                    workspace_id=locked.workspace_id,
                    actor=actor,
                    action="redaction_policy.update",
                    target_type="redaction_policy",
                    target_id=str(policy.pk),
                    before=policy_before,
                    after=redaction_policy_snapshot(policy),
                    reason=f"finding {locked.pk} dismissed",
                )
                added = True
        locked.status = RedactionFinding.Status.DISMISSED
        locked.reviewed_by = actor.label[:200]
        locked.reviewed_at = timezone.now()
        locked.save(update_fields=["status", "reviewed_by", "reviewed_at"])
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="redaction_finding.dismiss",
            target_type="redaction_finding",
            target_id=str(locked.pk),
            before=before,
            after={**_finding_snapshot(locked), "addedToAllowList": added},
            reason=reason,
        )
    return locked


def restricted_original_read(
    *, workspace: Any, target_type: str, target_id: object, actor: Actor
) -> RestrictedOriginal:
    """The text of a message, observation or reflection as it was before redaction, for
    the compliance role. Every read is audited (``restricted_original.read``), in the
    same transaction, before the text is returned. The caller checks the role."""
    if target_type not in REDACTION_TARGETS:
        raise MemdeskError(
            "invalid_target_type",
            f"target_type must be one of {', '.join(REDACTION_TARGETS)}; got {target_type!r}.",
            field="targetType",
        )
    try:
        target_uuid = uuid.UUID(str(target_id))
    except ValueError:
        raise MemdeskError(
            "invalid_id", f"targetId must be a UUID; got {target_id!r}.", field="targetId"
        ) from None
    with transaction.atomic():
        original = RestrictedOriginal.objects.filter(
            workspace_id=workspace.pk, target_type=target_type, target_id=target_uuid
        ).first()
        if original is None:
            raise MemdeskError(
                "not_found",
                "No original is kept for this object (nothing was redacted, or the policy "
                "destroys originals).",
                status_code=404,
            )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="restricted_original.read",
            target_type=target_type,
            target_id=str(target_uuid),
            after={"originalId": original.pk, "characters": len(original.text)},
        )
    return original


RESCAN_TIERS = ("messages", "observations", "reflections")
_TIER_TARGETS = {
    "messages": RedactionFinding.TargetType.MESSAGE,
    "observations": RedactionFinding.TargetType.OBSERVATION,
    "reflections": RedactionFinding.TargetType.REFLECTION,
}


def redaction_rescan(
    *,
    workspace: Any,
    tiers: Sequence[str] | None = None,
    batch_size: int = 200,
    n_process: int = redaction.N_PROCESS,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Scan a workspace's stored memory again under its current policy, in batches of
    ``batch_size`` (each batch one transaction), e.g. after the policy changed.

    Default tiers: observations and reflections, and messages too when the policy
    redacts messages (at ingest or before observation). Returns per tier the objects
    scanned, the findings recorded and the objects skipped because someone edited them
    during the scan (scan again to pick them up)."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    if tiers is None:
        tiers = ["observations", "reflections"]
        if policy.redact_at_ingest or policy.redact_before_observation:
            tiers.insert(0, "messages")
    report: dict[str, dict[str, int]] = {}
    for tier in tiers:
        target_type = _TIER_TARGETS[tier]
        model, _ = REDACTION_TARGETS[target_type]
        rows = model.objects.filter(conversation__workspace_id=workspace.pk).order_by("pk")
        total = rows.count()
        counts = {"scanned": 0, "findings": 0, "skipped": 0}
        last_pk = None
        while True:
            page = rows.filter(pk__gt=last_pk) if last_pk is not None else rows
            batch = list(page[:batch_size])
            if not batch:
                break
            last_pk = batch[-1].pk
            before = RedactionFinding.objects.filter(
                workspace_id=workspace.pk, target_type=target_type
            ).count()
            try:
                _redact_targets(
                    target_type=target_type,
                    targets=batch,
                    policy=policy,
                    batch_size=min(batch_size, redaction.BATCH_SIZE),
                    n_process=n_process,
                )
            except RedactionConflict:
                # One edited object rolls its batch back; one at a time, the others go in.
                for target in batch:
                    try:
                        _redact_targets(target_type=target_type, targets=[target], policy=policy)
                    except RedactionConflict:
                        counts["skipped"] += 1
            counts["findings"] += (
                RedactionFinding.objects.filter(
                    workspace_id=workspace.pk, target_type=target_type
                ).count()
                - before
            )
            counts["scanned"] += len(batch)
            if progress:
                progress(tier, counts["scanned"], total)
        report[tier] = counts
    return report
