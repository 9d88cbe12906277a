"""The governance API's answers: one output serializer per body, which both writes the
body (``FooOut(row).data``) and describes it in the OpenAPI document. None of these
routes is hot: a serializer's cost does not show next to the queries behind each.

Times are ``isoformat()`` of the stored value (``+00:00``, not DRF's ``Z``), except the
chain report's, which has always gone through DRF's encoder; a blank optional text is
sent as null."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.api import ErrorOut
from governance.models import (
    ContextRead,
    ErasureRequest,
    RedactionFinding,
    RedactionPolicy,
    RetentionSweep,
)
from governance.redaction import presidio
from governance.redaction.preview import RedactionPreview
from governance.retention.common import TIERS


class IsoDateTimeField(serializers.DateTimeField):
    """The stored time's ``isoformat()``."""

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class NullIfBlankCharField(serializers.CharField):
    """A text that is null when blank."""

    def to_representation(self, value: Any) -> str | None:  # type: ignore[override]
        return str(value) or None


class StoredAsIs(serializers.ListSerializer):
    """A list the policy's validation already wrote in its wire shape: sent as stored."""

    def to_representation(self, data: Any) -> Any:
        return data


class CustomRecognizerWire(serializers.Serializer):
    class Meta:
        list_serializer_class = StoredAsIs

    name = serializers.CharField()
    entity = serializers.CharField()
    pattern = serializers.CharField()
    score = serializers.FloatField()
    context = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]  # a clash with Serializer.context in the stubs only


class RedactionPolicyOut(serializers.Serializer):
    # context["admin"]: the deny list itself is sent. It names values to hide: agents see
    # how many, not which.
    entities = serializers.ListField(
        child=serializers.CharField(), help_text="Empty: the engine's default set."
    )
    effectiveEntities = serializers.SerializerMethodField()
    supportedEntities = serializers.SerializerMethodField()
    scoreThreshold = serializers.FloatField(source="score_threshold")
    operators = serializers.DictField(child=serializers.ChoiceField(choices=presidio.OPERATORS))
    defaultOperator = serializers.ChoiceField(choices=presidio.OPERATORS, source="default_operator")
    allowList = serializers.ListField(child=serializers.CharField(), source="allow_list")
    denyListCount = serializers.SerializerMethodField()
    customRecognizers = CustomRecognizerWire(many=True, source="custom_recognizers")
    reviewMinScore = serializers.FloatField(source="review_min_score")
    reviewMaxScore = serializers.FloatField(source="review_max_score")
    redactAtIngest = serializers.BooleanField(source="redact_at_ingest")
    redactBeforeObservation = serializers.BooleanField(source="redact_before_observation")
    reflectionWaitsForReview = serializers.BooleanField(source="reflection_waits_for_review")
    keepOriginals = serializers.BooleanField(source="keep_originals")
    agentsSeeReidentified = serializers.BooleanField(
        source="agents_see_reidentified",
        help_text="API keys read memory with pseudonyms replaced by their values.",
    )
    version = serializers.IntegerField()
    updatedAt = IsoDateTimeField(source="updated_at")
    denyList = serializers.ListField(
        child=serializers.CharField(),
        source="deny_list",
        required=False,
        help_text="Compliance keys and above.",
    )

    def get_effectiveEntities(self, policy: RedactionPolicy) -> list[str]:  # noqa: N802
        return list(presidio.PolicySpec.of(policy).analysed_entities)

    def get_supportedEntities(self, policy: RedactionPolicy) -> list[str]:  # noqa: N802
        return sorted(presidio.SUPPORTED_ENTITIES)

    def get_denyListCount(self, policy: RedactionPolicy) -> int:  # noqa: N802
        return len(policy.deny_list)

    def to_representation(self, instance: RedactionPolicy) -> dict[str, Any]:
        body: dict[str, Any] = super().to_representation(instance)
        if not self.context.get("admin"):
            del body["denyList"]
        return body


class FindingOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    conversationId = serializers.UUIDField(source="conversation_id")
    targetType = serializers.ChoiceField(
        choices=RedactionFinding.TargetType.values, source="target_type"
    )
    targetId = serializers.UUIDField(source="target_id")
    entityType = serializers.CharField(source="entity_type")
    start = serializers.IntegerField(help_text="In the object's text as stored now.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=presidio.OPERATORS)
    status = serializers.ChoiceField(choices=RedactionFinding.Status.values)
    policyVersion = serializers.IntegerField(source="policy_version")
    recognizer = serializers.CharField()
    createdAt = IsoDateTimeField(source="created_at")
    reviewedBy = serializers.CharField(source="reviewed_by")
    reviewedAt = IsoDateTimeField(allow_null=True, source="reviewed_at")
    pseudonym = serializers.CharField(
        allow_null=True,
        source="pseudonym.label",
        help_text="The pseudonym the value became (pending: becomes), e.g. <PERSON_2>.",
    )


class FindingPageOut(serializers.Serializer):
    findings = FindingOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class PreviewFindingOut(serializers.Serializer):
    # One finding of a RedactionPreview, the root serializer's instance. (A docstring
    # here would become the schema's description.)
    entityType = serializers.CharField(source="entity_type")
    start = serializers.IntegerField(help_text="In the text sent.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=presidio.OPERATORS)
    status = serializers.ChoiceField(choices=[presidio.APPLIED, presidio.PENDING_REVIEW])
    recognizer = serializers.CharField()
    pseudonym = NullIfBlankCharField(
        allow_null=True,
        help_text="The pseudonym the value has or would get (pseudonym operator). "
        "Compliance keys and above; null for other keys, and under other operators.",
    )
    newPseudonym = serializers.SerializerMethodField(
        help_text="The value has no pseudonym yet: this number would be given to it. "
        "Compliance keys and above; null for other keys."
    )

    def get_newPseudonym(self, finding: presidio.Finding) -> bool | None:  # noqa: N802
        preview = cast(RedactionPreview, self.root.instance)
        if preview.new_pseudonyms is None:
            return None
        return finding.pseudonym in preview.new_pseudonyms


class PreviewOut(serializers.Serializer):
    redactedText = serializers.CharField(
        source="text",
        help_text="What the Reflector would read: every finding redacted. A value the "
        "pseudonym operator replaces is written as its pseudonym for compliance keys and "
        "above, as its type (<EMAIL_ADDRESS>) for other keys.",
    )
    findings = PreviewFindingOut(many=True)
    newPseudonyms = serializers.ListField(
        child=serializers.CharField(),
        source="new_pseudonyms",
        allow_null=True,
        help_text="Pseudonyms this text would number first, in order. A preview numbers "
        "nothing: a write in between may take these numbers. Compliance keys and above; "
        "null for other keys.",
    )
    pseudonymsShown = serializers.BooleanField(
        source="labelled",
        help_text="Whether this key is shown pseudonyms: true for compliance keys and above "
        "(a preview that names one is audited as redaction.preview), false for other keys, "
        "which are told each value's type and never whether the workspace knows it.",
    )
    policyVersion = serializers.IntegerField(source="policy_version")


class PseudonymOut(serializers.Serializer):
    # Of a PseudonymReveal: the row, and its value while held.
    label = serializers.CharField(help_text="e.g. <PERSON_2>", source="pseudonym.label")  # type: ignore[assignment]  # a clash with Field.label in the stubs only
    entityType = serializers.CharField(source="pseudonym.entity_type")
    number = serializers.IntegerField(source="pseudonym.number")
    held = serializers.BooleanField(
        source="pseudonym.is_held",
        help_text="False once the last message holding the value was deleted: the "
        "pseudonym is anonymous and value is null.",
    )
    value = serializers.CharField(allow_null=True)
    createdAt = IsoDateTimeField(source="pseudonym.created_at")
    forgottenAt = IsoDateTimeField(allow_null=True, source="pseudonym.forgotten_at")


class OriginalOut(serializers.Serializer):
    targetType = serializers.ChoiceField(
        choices=RedactionFinding.TargetType.values, source="target_type"
    )
    targetId = serializers.UUIDField(source="target_id")
    conversationId = serializers.UUIDField(source="conversation_id")
    text = serializers.CharField()
    createdAt = IsoDateTimeField(source="created_at")


RETENTION_CONFLICT = OpenApiResponse(
    ErrorOut, description="Refused: the state does not allow it (see error)."
)


class LegalHoldOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    conversationId = serializers.CharField(allow_null=True, source="conversation_id")
    userId = NullIfBlankCharField(allow_null=True, source="end_user_id")
    reason = serializers.CharField()
    placedBy = serializers.CharField(source="placed_by")
    placedAt = IsoDateTimeField(source="placed_at")
    active = serializers.BooleanField(source="is_active")
    releasedBy = NullIfBlankCharField(allow_null=True, source="released_by")
    releasedAt = IsoDateTimeField(allow_null=True, source="released_at")
    releaseReason = NullIfBlankCharField(allow_null=True, source="release_reason")


class LegalHoldListOut(serializers.Serializer):
    holds = LegalHoldOut(many=True)


class ErasureRequestOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    userId = serializers.CharField(source="end_user_id")
    reason = serializers.CharField()
    requestedBy = serializers.CharField(source="requested_by")
    status = serializers.ChoiceField(choices=ErasureRequest.Status.values)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Rows deleted, per kind."
    )
    error = NullIfBlankCharField(allow_null=True)
    createdAt = IsoDateTimeField(source="created_at")
    completedAt = IsoDateTimeField(allow_null=True, source="completed_at")


class ErasureRequestListOut(serializers.Serializer):
    erasureRequests = ErasureRequestOut(many=True)


class ErasureRefusedOut(serializers.Serializer):
    error = serializers.CharField(help_text="Which hold covers the end user, in a sentence.")
    code = serializers.CharField(help_text="legal_hold")
    message = serializers.CharField(help_text="The same sentence as error.")
    erasureRequestId = serializers.IntegerField(help_text="The request, recorded as refused.")


class RetentionPolicyOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    name = serializers.CharField()
    conversationTag = serializers.CharField(allow_blank=True, source="conversation_tag")
    messageDays = serializers.IntegerField(allow_null=True, source="message_days")
    observationDays = serializers.IntegerField(allow_null=True, source="observation_days")
    reflectionDays = serializers.IntegerField(allow_null=True, source="reflection_days")
    contextReadDays = serializers.IntegerField(
        allow_null=True,
        source="context_read_days",
        help_text="Days the read ledger keeps what agents were served; null: forever.",
    )
    enabled = serializers.BooleanField()
    createdAt = IsoDateTimeField(source="created_at")
    updatedAt = IsoDateTimeField(source="updated_at")


class RetentionPolicyListOut(serializers.Serializer):
    policies = RetentionPolicyOut(many=True)


class SweepCountsOut(serializers.Serializer):
    # Every tier's count, 0 for a tier the sweep's stored counts do not name.
    messages = serializers.IntegerField()
    observations = serializers.IntegerField()
    reflections = serializers.IntegerField()
    # Absent from sweeps recorded before reasoning memory was kept.
    reasoningSteps = serializers.IntegerField(
        required=False, help_text="Reasoning steps (kept as long as messages)."
    )
    toolCalls = serializers.IntegerField(
        required=False, help_text="Tool calls (kept as long as messages)."
    )
    # Absent from sweeps recorded before the read ledger was kept.
    contextReads = serializers.IntegerField(
        required=False, help_text="Rows of the read ledger (their own period)."
    )

    def to_representation(self, instance: RetentionSweep) -> dict[str, int]:
        counts = instance.counts or {}
        return {tier.kind: int(counts.get(tier.kind, 0)) for tier in TIERS}


class SweepProgressOut(serializers.Serializer):
    done = serializers.IntegerField(help_text="Rows deleted so far.")
    total = serializers.IntegerField(
        help_text="Rows due when the sweep started (dry run: due now)."
    )


class RetentionSweepOut(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    policyId = serializers.IntegerField(allow_null=True, source="policy_id")
    dryRun = serializers.BooleanField(source="dry_run")
    status = serializers.ChoiceField(choices=RetentionSweep.Status.values)
    progress = SweepProgressOut(source="*")
    counts = SweepCountsOut(source="*", help_text="Per tier: deleted (sweep) or due (dry run).")
    triggeredBy = serializers.CharField(source="triggered_by")
    error = NullIfBlankCharField(allow_null=True)
    createdAt = IsoDateTimeField(source="created_at")
    startedAt = IsoDateTimeField(allow_null=True, source="started_at")
    finishedAt = IsoDateTimeField(allow_null=True, source="finished_at")


class RetentionSweepListOut(serializers.Serializer):
    sweeps = RetentionSweepOut(many=True)


class AuditEventOut(serializers.Serializer):
    id = serializers.IntegerField()
    sequence = serializers.IntegerField()
    actorType = serializers.CharField()
    actorId = serializers.CharField()
    actorRole = serializers.CharField()
    action = serializers.CharField()
    targetType = serializers.CharField()
    targetId = serializers.CharField()
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)
    reason = serializers.CharField()
    requestId = serializers.CharField()
    ipAddress = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    prevHash = serializers.CharField()
    hash = serializers.CharField()
    chainVersion = serializers.IntegerField(
        help_text="1: plain SHA-256 (events written before keyed chains); 2: HMAC-SHA256"
    )
    keyId = serializers.CharField(help_text="the audit key that made the hash (version 2)")


class AuditPageOut(serializers.Serializer):
    events = AuditEventOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class ChainReportOut(serializers.Serializer):
    ok = serializers.BooleanField()
    events = serializers.IntegerField()
    brokenEventId = serializers.IntegerField(allow_null=True, source="broken_event_id")
    brokenSequence = serializers.IntegerField(allow_null=True, source="broken_sequence")
    problem = serializers.CharField()
    problems = serializers.ListField(child=serializers.CharField())
    checkpoints = serializers.IntegerField(help_text="signed checkpoints compared")
    checkpointedThrough = serializers.IntegerField(
        source="checkpointed_through", help_text="the last event a signed checkpoint covers"
    )
    lastCheckpointAt = serializers.DateTimeField(allow_null=True, source="last_checkpoint_at")


class ContextReadOut(serializers.Serializer):
    id = serializers.CharField()
    conversationId = serializers.CharField()
    servedAt = IsoDateTimeField()
    apiKeyId = serializers.CharField(allow_null=True, help_text="null once the key is deleted")
    keyScope = serializers.CharField()
    edge = serializers.ChoiceField(choices=ContextRead.Edge.values)
    format = serializers.CharField()
    maxTokens = serializers.IntegerField(allow_null=True)
    queryDigest = serializers.CharField(
        allow_null=True,
        help_text="the keyed digest of the query asked with the read, as the audit trail "
        "records texts",
    )
    recall = serializers.IntegerField(allow_null=True)
    memoryVersion = serializers.IntegerField()
    lastSeq = serializers.IntegerField()
    bodySha256 = serializers.CharField(help_text="SHA-256 (hex) of the body served")
    baseSha256 = serializers.CharField(
        allow_null=True,
        help_text="with a query: SHA-256 (hex) of the body before its recalled section",
    )
    tokenCount = serializers.IntegerField(allow_null=True)
    status = serializers.IntegerField(help_text="200, or 304 when the caller had the body")
    reidentified = serializers.BooleanField(
        help_text="the body held values in place of pseudonyms (the policy let agents see them)"
    )
    renderVersion = serializers.IntegerField(help_text="the version of the context's shapes")
    writer = serializers.CharField(help_text="the web process that recorded it")
    writerSeq = serializers.IntegerField(
        help_text="its n-th read: a gap is a row lost or gone with its conversation"
    )


class ContextReadPageOut(serializers.Serializer):
    contextReads = ContextReadOut(many=True)
    nextCursor = serializers.CharField(allow_null=True)
