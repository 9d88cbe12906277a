"""Governance rows as the API sends them (camelCase keys, ISO 8601 times)."""

from __future__ import annotations

from typing import Any

from governance import retention
from governance.models import (
    ErasureRequest,
    LegalHold,
    Pseudonym,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
    RetentionPolicy,
    RetentionSweep,
)
from governance.redaction import presidio


def redaction_policy_to_wire(policy: RedactionPolicy, *, admin: bool) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "entities": policy.entities,
        "effectiveEntities": presidio.PolicySpec.of(policy).analysed_entities,
        "supportedEntities": sorted(presidio.SUPPORTED_ENTITIES),
        "scoreThreshold": policy.score_threshold,
        "operators": policy.operators,
        "defaultOperator": policy.default_operator,
        "allowList": policy.allow_list,
        "denyListCount": len(policy.deny_list),
        "customRecognizers": policy.custom_recognizers,
        "reviewMinScore": policy.review_min_score,
        "reviewMaxScore": policy.review_max_score,
        "redactAtIngest": policy.redact_at_ingest,
        "redactBeforeObservation": policy.redact_before_observation,
        "reflectionWaitsForReview": policy.reflection_waits_for_review,
        "keepOriginals": policy.keep_originals,
        "agentsSeeReidentified": policy.agents_see_reidentified,
        "version": policy.version,
        "updatedAt": policy.updated_at.isoformat(),
    }
    if admin:
        # The deny list names values to hide: agents see how many, not which.
        wire["denyList"] = policy.deny_list
    return wire


def finding_to_wire(finding: RedactionFinding) -> dict[str, Any]:
    return {
        "id": finding.pk,
        "conversationId": str(finding.conversation_id),
        "targetType": finding.target_type,
        "targetId": str(finding.target_id),
        "entityType": finding.entity_type,
        "start": finding.start,
        "end": finding.end,
        "score": finding.score,
        "operator": finding.operator,
        "status": finding.status,
        "policyVersion": finding.policy_version,
        "recognizer": finding.recognizer,
        "createdAt": finding.created_at.isoformat(),
        "reviewedBy": finding.reviewed_by,
        "reviewedAt": finding.reviewed_at.isoformat() if finding.reviewed_at else None,
        "pseudonym": finding.pseudonym.label if finding.pseudonym else None,
    }


def pseudonym_to_wire(pseudonym: Pseudonym, *, value: str | None) -> dict[str, Any]:
    return {
        "label": pseudonym.label,
        "entityType": pseudonym.entity_type,
        "number": pseudonym.number,
        "held": pseudonym.is_held,
        "value": value,
        "createdAt": pseudonym.created_at.isoformat(),
        "forgottenAt": iso(pseudonym.forgotten_at),
    }


def original_to_wire(original: RestrictedOriginal) -> dict[str, Any]:
    return {
        "targetType": original.target_type,
        "targetId": str(original.target_id),
        "conversationId": str(original.conversation_id),
        "text": original.text,
        "createdAt": original.created_at.isoformat(),
    }


def iso(value: Any) -> str | None:
    return value.isoformat() if value else None


def legal_hold_to_wire(hold: LegalHold) -> dict[str, Any]:
    return {
        "id": hold.pk,
        "conversationId": str(hold.conversation_id) if hold.conversation_id else None,
        "userId": hold.end_user_id or None,
        "reason": hold.reason,
        "placedBy": hold.placed_by,
        "placedAt": iso(hold.placed_at),
        "active": hold.is_active,
        "releasedBy": hold.released_by or None,
        "releasedAt": iso(hold.released_at),
        "releaseReason": hold.release_reason or None,
    }


def erasure_request_to_wire(request: ErasureRequest) -> dict[str, Any]:
    return {
        "id": request.pk,
        "userId": request.end_user_id,
        "reason": request.reason,
        "requestedBy": request.requested_by,
        "status": request.status,
        "counts": request.counts,
        "error": request.error or None,
        "createdAt": iso(request.created_at),
        "completedAt": iso(request.completed_at),
    }


def retention_policy_to_wire(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "id": policy.pk,
        "name": policy.name,
        "conversationTag": policy.conversation_tag,
        "messageDays": policy.message_days,
        "observationDays": policy.observation_days,
        "reflectionDays": policy.reflection_days,
        "enabled": policy.enabled,
        "createdAt": iso(policy.created_at),
        "updatedAt": iso(policy.updated_at),
    }


def retention_sweep_to_wire(sweep: RetentionSweep) -> dict[str, Any]:
    counts = sweep.counts or {}
    return {
        "id": sweep.pk,
        "policyId": sweep.policy_id,
        "dryRun": sweep.dry_run,
        "status": sweep.status,
        "progress": {"done": sweep.done, "total": sweep.total},
        "counts": {tier.kind: int(counts.get(tier.kind, 0)) for tier in retention.TIERS},
        "triggeredBy": sweep.triggered_by,
        "error": sweep.error or None,
        "createdAt": iso(sweep.created_at),
        "startedAt": iso(sweep.started_at),
        "finishedAt": iso(sweep.finished_at),
    }
