"""A workspace's redaction policy: read (created with the defaults on first use),
validated, updated, and recorded in the audit trail without the list values."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError, wire_field
from governance.audit.writer import audit_record
from governance.models import (
    RedactionPolicy,
)
from governance.redaction import presidio

POLICY_LIST_LIMIT = 1000
LIST_DIGEST_SALT = "memdesk.governance.redaction_policy.list_digest"
POLICY_VALUE_MAX_CHARS = 200
# The policy's fields and their names on the wire.
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
    "agents_see_reidentified": "agentsSeeReidentified",
}


def _list_digests(values: Sequence[str], *, workspace_id: uuid.UUID) -> list[str]:
    # Audit events are append-only: an erasure request could never remove a value written
    # into one. Allow and deny lists hold (candidate) personal data, so the trail records
    # keyed digests, enough to tell which entries changed, never the entries. The key is
    # SECRET_KEY: the workspace id is public, and a short value (a name, a phone number)
    # digested without a secret could be found by trying candidates.
    digests = (
        salted_hmac(LIST_DIGEST_SALT, f"{workspace_id}|{value}", algorithm="sha256")
        for value in values
    )
    return sorted(digest.hexdigest()[:16] for digest in digests)


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


def redaction_policy_get_or_create(*, workspace_id: uuid.UUID) -> RedactionPolicy:
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


def invalid_policy(field: str, message: str) -> MemdeskError:
    return MemdeskError("invalid_policy", f"{wire_field(field)}: {message}", field=field)


def _string_list(values: list[str], field: str) -> list[str]:
    cleaned = [v.strip() for v in values]
    if len(cleaned) > POLICY_LIST_LIMIT:
        raise invalid_policy(field, f"at most {POLICY_LIST_LIMIT} entries; got {len(cleaned)}.")
    if any(not v or len(v) > POLICY_VALUE_MAX_CHARS for v in cleaned):
        raise invalid_policy(field, f"each entry must be 1 to {POLICY_VALUE_MAX_CHARS} characters.")
    return list(dict.fromkeys(cleaned))


def _entity_name(value: str, field: str) -> str:
    if not presidio.ENTITY_NAME.match(value):
        raise invalid_policy(
            field, f"entity types are UPPER_CASE names such as EMAIL_ADDRESS; got {value!r}."
        )
    return value


def _validated_policy_fields(values: dict[str, Any], current: RedactionPolicy) -> dict[str, Any]:
    """The rules between fields and against the engine, which every caller needs. The
    types and ranges of single values are the caller's to check (the API's serializer,
    the dashboard's form), as are custom recognizers, which only the API sets."""
    unknown = set(values) - set(POLICY_FIELDS)
    if unknown:
        raise MemdeskError("invalid_policy", f"Unknown policy fields: {sorted(unknown)}.")
    cleaned = dict(values)
    if "entities" in values:
        cleaned["entities"] = list(
            dict.fromkeys(_entity_name(v, "entities") for v in values["entities"])
        )
    if "operators" in values:
        for entity, operator in values["operators"].items():
            _entity_name(entity, "operators")
            if operator not in presidio.OPERATORS:
                raise invalid_policy(
                    f"operators.{entity}", f"must be one of {', '.join(presidio.OPERATORS)}."
                )
        cleaned["operators"] = dict(values["operators"])
    for name in ("allow_list", "deny_list"):
        if name in values:
            cleaned[name] = _string_list(values[name], name)
    custom = {c["entity"] for c in cleaned.get("custom_recognizers", current.custom_recognizers)}
    known = presidio.SUPPORTED_ENTITIES | custom | {presidio.DENY_LIST_ENTITY}
    for entity in cleaned.get("entities", []):
        if entity not in known:
            raise invalid_policy(
                "entities",
                f"{entity} is not a type this engine detects; add a custom recognizer for "
                f"it, or use one of {', '.join(sorted(presidio.SUPPORTED_ENTITIES))}.",
            )
    review_min = cleaned.get("review_min_score", current.review_min_score)
    review_max = cleaned.get("review_max_score", current.review_max_score)
    if review_min > review_max:
        raise invalid_policy("review_min_score", "must not be above reviewMaxScore.")
    return cleaned


def redaction_policy_draft(*, workspace_id: uuid.UUID, values: dict[str, Any]) -> RedactionPolicy:
    """The stored policy (or the defaults) with ``values`` applied, validated as a save
    would be, but not saved: what a preview of unsaved changes runs under."""
    current = RedactionPolicy.objects.filter(workspace_id=workspace_id).first()
    draft = current or RedactionPolicy(workspace_id=workspace_id)
    cleaned = _validated_policy_fields(values, draft)
    if current is not None:
        draft = RedactionPolicy.objects.get(pk=current.pk)  # a copy: the caller may hold one
    for name, value in cleaned.items():
        setattr(draft, name, value)
    return draft


def redaction_policy_update(
    *,
    workspace_id: uuid.UUID,
    actor: Actor,
    values: dict[str, Any],
    replace: bool = False,
    reason: str = "",
) -> RedactionPolicy:
    """Change the workspace's policy (``values`` keyed by model field name). With
    ``replace`` every field not given returns to its default (PUT); otherwise only the
    given fields change (PATCH). Bumps the version and audits before and after; a change
    that changes nothing is neither. The reason is kept with each value the new policy
    finds masked as its type: it may quote the data the change is about, and the trail
    outlives every erasure."""
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
        from governance.redaction.gates import texts_masked_for_display  # gates imports this

        [reason] = texts_masked_for_display(workspace_id=workspace_id, texts=[reason])
        audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action="redaction_policy.update",
            target_type="redaction_policy",
            target_id=str(policy.pk),
            before=before,
            after=redaction_policy_snapshot(policy),
            reason=reason,
        )
    return policy
