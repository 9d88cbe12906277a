"""Serializers that only describe the governance API's answers in the OpenAPI schema."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from core.api import (
    ErrorOut,
)
from governance.models import (
    ErasureRequest,
    RedactionFinding,
    RetentionSweep,
)
from governance.redaction import presidio


class CustomRecognizerWire(serializers.Serializer):
    name = serializers.CharField()
    entity = serializers.CharField()
    pattern = serializers.CharField()
    score = serializers.FloatField()
    context = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]  # a clash with Serializer.context in the stubs only


class RedactionPolicyOut(serializers.Serializer):
    entities = serializers.ListField(
        child=serializers.CharField(), help_text="Empty: the engine's default set."
    )
    effectiveEntities = serializers.ListField(child=serializers.CharField())
    supportedEntities = serializers.ListField(child=serializers.CharField())
    scoreThreshold = serializers.FloatField()
    operators = serializers.DictField(child=serializers.ChoiceField(choices=presidio.OPERATORS))
    defaultOperator = serializers.ChoiceField(choices=presidio.OPERATORS)
    allowList = serializers.ListField(child=serializers.CharField())
    denyList = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Compliance keys and above."
    )
    denyListCount = serializers.IntegerField()
    customRecognizers = CustomRecognizerWire(many=True)
    reviewMinScore = serializers.FloatField()
    reviewMaxScore = serializers.FloatField()
    redactAtIngest = serializers.BooleanField()
    redactBeforeObservation = serializers.BooleanField()
    reflectionWaitsForReview = serializers.BooleanField()
    keepOriginals = serializers.BooleanField()
    agentsSeeReidentified = serializers.BooleanField(
        help_text="API keys read memory with pseudonyms replaced by their values."
    )
    version = serializers.IntegerField()
    updatedAt = serializers.DateTimeField()


class FindingOut(serializers.Serializer):
    id = serializers.IntegerField()
    conversationId = serializers.UUIDField()
    targetType = serializers.ChoiceField(choices=RedactionFinding.TargetType.values)
    targetId = serializers.UUIDField()
    entityType = serializers.CharField()
    start = serializers.IntegerField(help_text="In the object's text as stored now.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=presidio.OPERATORS)
    status = serializers.ChoiceField(choices=RedactionFinding.Status.values)
    policyVersion = serializers.IntegerField()
    recognizer = serializers.CharField()
    createdAt = serializers.DateTimeField()
    reviewedBy = serializers.CharField()
    reviewedAt = serializers.DateTimeField(allow_null=True)
    pseudonym = serializers.CharField(
        allow_null=True,
        help_text="The pseudonym the value became (pending: becomes), e.g. <PERSON_2>.",
    )


class FindingPageOut(serializers.Serializer):
    findings = FindingOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class PreviewFindingOut(serializers.Serializer):
    entityType = serializers.CharField()
    start = serializers.IntegerField(help_text="In the text sent.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=presidio.OPERATORS)
    status = serializers.ChoiceField(choices=[presidio.APPLIED, presidio.PENDING_REVIEW])
    recognizer = serializers.CharField()
    pseudonym = serializers.CharField(
        allow_null=True, help_text="The pseudonym it would become (pseudonym operator)."
    )
    newPseudonym = serializers.BooleanField(
        help_text="The value has no pseudonym yet: this number would be given to it."
    )


class PreviewOut(serializers.Serializer):
    redactedText = serializers.CharField(
        help_text="What the Reflector would read: every finding redacted."
    )
    findings = PreviewFindingOut(many=True)
    newPseudonyms = serializers.ListField(
        child=serializers.CharField(),
        help_text="Pseudonyms this text would number first, in order. A preview numbers "
        "nothing: a write in between may take these numbers.",
    )
    policyVersion = serializers.IntegerField()


class PseudonymOut(serializers.Serializer):
    label = serializers.CharField(help_text="e.g. <PERSON_2>")  # type: ignore[assignment]  # a clash with Field.label in the stubs only
    entityType = serializers.CharField()
    number = serializers.IntegerField()
    held = serializers.BooleanField(
        help_text="False once the last message holding the value was deleted: the "
        "pseudonym is anonymous and value is null."
    )
    value = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    forgottenAt = serializers.DateTimeField(allow_null=True)


class OriginalOut(serializers.Serializer):
    targetType = serializers.ChoiceField(choices=RedactionFinding.TargetType.values)
    targetId = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    text = serializers.CharField()
    createdAt = serializers.DateTimeField()


RETENTION_CONFLICT = OpenApiResponse(
    ErrorOut, description="Refused: the state does not allow it (see error)."
)


class LegalHoldOut(serializers.Serializer):
    id = serializers.IntegerField()
    conversationId = serializers.CharField(allow_null=True)
    userId = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    placedBy = serializers.CharField()
    placedAt = serializers.DateTimeField()
    active = serializers.BooleanField()
    releasedBy = serializers.CharField(allow_null=True)
    releasedAt = serializers.DateTimeField(allow_null=True)
    releaseReason = serializers.CharField(allow_null=True)


class LegalHoldListOut(serializers.Serializer):
    holds = LegalHoldOut(many=True)


class ErasureRequestOut(serializers.Serializer):
    id = serializers.IntegerField()
    userId = serializers.CharField()
    reason = serializers.CharField()
    requestedBy = serializers.CharField()
    status = serializers.ChoiceField(choices=ErasureRequest.Status.values)
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Rows deleted, per kind."
    )
    error = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    completedAt = serializers.DateTimeField(allow_null=True)


class ErasureRequestListOut(serializers.Serializer):
    erasureRequests = ErasureRequestOut(many=True)


class ErasureRefusedOut(serializers.Serializer):
    error = serializers.CharField(help_text="Which hold covers the end user, in a sentence.")
    code = serializers.CharField(help_text="legal_hold")
    message = serializers.CharField(help_text="The same sentence as error.")
    erasureRequestId = serializers.IntegerField(help_text="The request, recorded as refused.")


class RetentionPolicyOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    conversationTag = serializers.CharField(allow_blank=True)
    messageDays = serializers.IntegerField(allow_null=True)
    observationDays = serializers.IntegerField(allow_null=True)
    reflectionDays = serializers.IntegerField(allow_null=True)
    enabled = serializers.BooleanField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


class RetentionPolicyListOut(serializers.Serializer):
    policies = RetentionPolicyOut(many=True)


class SweepCountsOut(serializers.Serializer):
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


class SweepProgressOut(serializers.Serializer):
    done = serializers.IntegerField(help_text="Rows deleted so far.")
    total = serializers.IntegerField(
        help_text="Rows due when the sweep started (dry run: due now)."
    )


class RetentionSweepOut(serializers.Serializer):
    id = serializers.IntegerField()
    policyId = serializers.IntegerField(allow_null=True)
    dryRun = serializers.BooleanField()
    status = serializers.ChoiceField(choices=RetentionSweep.Status.values)
    progress = SweepProgressOut()
    counts = SweepCountsOut(help_text="Per tier: deleted (sweep) or due (dry run).")
    triggeredBy = serializers.CharField()
    error = serializers.CharField(allow_null=True)
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)


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
    brokenEventId = serializers.IntegerField(allow_null=True)
    brokenSequence = serializers.IntegerField(allow_null=True)
    problem = serializers.CharField()
    problems = serializers.ListField(child=serializers.CharField())
    checkpoints = serializers.IntegerField(help_text="signed checkpoints compared")
    checkpointedThrough = serializers.IntegerField(
        help_text="the last event a signed checkpoint covers"
    )
    lastCheckpointAt = serializers.DateTimeField(allow_null=True)
