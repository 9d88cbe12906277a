"""Governance routes of the agent API under /v1/ (redaction; other features append
their own sections). Views parse and check input, call one service or selector, and
shape the answer; the services own every rule."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ADMIN_ERRORS,
    ERRORS,
    AdminApiView,
    ApiView,
    ErrorOut,
    ReasonIn,
    StrictCharField,
    request_reason,
    text_field,
    validated,
)
from core.auth import AdminKeyRequired
from core.errors import MemdeskError, error_body
from core.paging import parse_limit, parse_uuid
from governance import holds, redaction, redaction_policy, retention, review, selectors
from governance.erasure import erasure_request_create
from governance.models import (
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
    RetentionPolicy,
    RetentionSweep,
)
from memory.models import ApiKey
from memory.selectors import conversation_get

# --- redaction ---------------------------------------------------------------------------------


REDACTION_CONFLICT = {
    409: OpenApiResponse(
        ErrorOut, description="Already decided, or the text changed since (finding_stale)."
    )
}


class CustomRecognizerWire(serializers.Serializer):
    name = serializers.CharField()
    entity = serializers.CharField()
    pattern = serializers.CharField()
    score = serializers.FloatField()
    context = serializers.ListField(child=serializers.CharField())


class RedactionPolicyOut(serializers.Serializer):
    entities = serializers.ListField(
        child=serializers.CharField(), help_text="Empty: the engine's default set."
    )
    effectiveEntities = serializers.ListField(child=serializers.CharField())
    supportedEntities = serializers.ListField(child=serializers.CharField())
    scoreThreshold = serializers.FloatField()
    operators = serializers.DictField(child=serializers.ChoiceField(choices=redaction.OPERATORS))
    defaultOperator = serializers.ChoiceField(choices=redaction.OPERATORS)
    allowList = serializers.ListField(child=serializers.CharField())
    denyList = serializers.ListField(
        child=serializers.CharField(), required=False, help_text="Admin keys only."
    )
    denyListCount = serializers.IntegerField()
    customRecognizers = CustomRecognizerWire(many=True)
    reviewMinScore = serializers.FloatField()
    reviewMaxScore = serializers.FloatField()
    redactAtIngest = serializers.BooleanField()
    redactBeforeObservation = serializers.BooleanField()
    reflectionWaitsForReview = serializers.BooleanField()
    keepOriginals = serializers.BooleanField()
    version = serializers.IntegerField()
    updatedAt = serializers.DateTimeField()


class RedactionPolicyIn(serializers.Serializer):
    # Types are checked by the service (redaction_policy_update), which the dashboard
    # calls too; here only the names.
    entities = serializers.JSONField(required=False)
    scoreThreshold = serializers.JSONField(required=False)
    operators = serializers.JSONField(required=False)
    defaultOperator = serializers.JSONField(required=False)
    allowList = serializers.JSONField(required=False)
    denyList = serializers.JSONField(required=False)
    customRecognizers = serializers.JSONField(required=False)
    reviewMinScore = serializers.JSONField(required=False)
    reviewMaxScore = serializers.JSONField(required=False)
    redactAtIngest = serializers.JSONField(required=False)
    redactBeforeObservation = serializers.JSONField(required=False)
    reflectionWaitsForReview = serializers.JSONField(required=False)
    keepOriginals = serializers.JSONField(required=False)


class FindingOut(serializers.Serializer):
    id = serializers.IntegerField()
    conversationId = serializers.UUIDField()
    targetType = serializers.ChoiceField(choices=RedactionFinding.TargetType.values)
    targetId = serializers.UUIDField()
    entityType = serializers.CharField()
    start = serializers.IntegerField(help_text="In the object's text as stored now.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=redaction.OPERATORS)
    status = serializers.ChoiceField(choices=RedactionFinding.Status.values)
    policyVersion = serializers.IntegerField()
    recognizer = serializers.CharField()
    createdAt = serializers.DateTimeField()
    reviewedBy = serializers.CharField()
    reviewedAt = serializers.DateTimeField(allow_null=True)


class FindingPageOut(serializers.Serializer):
    findings = FindingOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class PreviewIn(serializers.Serializer):
    text = text_field(allow_blank=True)


class PreviewFindingOut(serializers.Serializer):
    entityType = serializers.CharField()
    start = serializers.IntegerField(help_text="In the text sent.")
    end = serializers.IntegerField()
    score = serializers.FloatField()
    operator = serializers.ChoiceField(choices=redaction.OPERATORS)
    status = serializers.ChoiceField(choices=[redaction.APPLIED, redaction.PENDING_REVIEW])
    recognizer = serializers.CharField()


class PreviewOut(serializers.Serializer):
    redactedText = serializers.CharField(
        help_text="What the Reflector would read: every finding redacted."
    )
    findings = PreviewFindingOut(many=True)
    policyVersion = serializers.IntegerField()


class ReviewIn(serializers.Serializer):
    reason = text_field(required=False, allow_blank=True)


class DismissIn(ReviewIn):
    addToAllowList = serializers.BooleanField(required=False, default=False)


class OriginalOut(serializers.Serializer):
    targetType = serializers.ChoiceField(choices=RedactionFinding.TargetType.values)
    targetId = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    text = serializers.CharField()
    createdAt = serializers.DateTimeField()


def redaction_policy_to_wire(policy: RedactionPolicy, *, admin: bool) -> dict[str, Any]:
    wire: dict[str, Any] = {
        "entities": policy.entities,
        "effectiveEntities": redaction.PolicySpec.of(policy).analysed_entities,
        "supportedEntities": sorted(redaction.SUPPORTED_ENTITIES),
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
    }


def original_to_wire(original: RestrictedOriginal) -> dict[str, Any]:
    return {
        "targetType": original.target_type,
        "targetId": str(original.target_id),
        "conversationId": str(original.conversation_id),
        "text": original.text,
        "createdAt": original.created_at.isoformat(),
    }


class RedactionPolicyApi(ApiView):
    def get_permissions(self) -> list[BasePermission]:
        # Any key reads the policy; only admin keys change it.
        if self.request.method in ("PUT", "PATCH"):
            return [IsAuthenticated(), AdminKeyRequired()]
        return [IsAuthenticated()]

    @property
    def is_admin(self) -> bool:
        return self.api_key.scope == ApiKey.Scope.ADMIN

    @extend_schema(
        operation_id="redaction_policy_get",
        responses={200: RedactionPolicyOut, **ERRORS},
        description="The workspace's redaction policy (the defaults until it is changed). "
        "Agent keys see denyListCount but not the deny list itself.",
    )
    def get(self, request: Request) -> Response:
        policy = redaction_policy.redaction_policy_get_or_create(workspace_id=self.workspace.pk)
        return Response(redaction_policy_to_wire(policy, admin=self.is_admin))

    def _write(self, request: Request, *, replace: bool) -> Response:
        data = validated(RedactionPolicyIn, request.data)
        unknown = set(request.data) - set(RedactionPolicyIn().fields) if request.data else set()
        if unknown:
            raise MemdeskError(
                "invalid_policy", f"Unknown policy fields: {sorted(unknown)}.", field="body"
            )
        names = {wire: name for name, wire in redaction_policy.POLICY_FIELDS.items()}
        policy = redaction_policy.redaction_policy_update(
            workspace_id=self.workspace.pk,
            actor=self.actor(),
            values={names[wire]: value for wire, value in data.items()},
            replace=replace,
        )
        return Response(redaction_policy_to_wire(policy, admin=True))

    @extend_schema(
        operation_id="redaction_policy_replace",
        request=RedactionPolicyIn,
        responses={200: RedactionPolicyOut, **ADMIN_ERRORS},
        description="Replace the policy: fields left out return to their defaults. "
        "Admin keys only; audited; bumps version.",
    )
    def put(self, request: Request) -> Response:
        return self._write(request, replace=True)

    @extend_schema(
        operation_id="redaction_policy_update",
        request=RedactionPolicyIn,
        responses={200: RedactionPolicyOut, **ADMIN_ERRORS},
        description="Change the fields given. Admin keys only; audited; bumps version.",
    )
    def patch(self, request: Request) -> Response:
        return self._write(request, replace=False)


class RedactionPreviewApi(ApiView):
    @extend_schema(
        operation_id="redaction_preview",
        request=PreviewIn,
        responses={200: PreviewOut, **ERRORS},
        description="What the workspace's policy finds in a text, and the text as the "
        "Reflector would read it. Nothing is stored.",
    )
    def post(self, request: Request) -> Response:
        text = validated(PreviewIn, request.data)["text"]
        limit = settings.MEMDESK_MAX_MESSAGE_CHARS
        if len(text) > limit:
            raise MemdeskError(
                "content_too_long",
                f"text is {len(text)} characters; the limit is {limit}.",
                field="text",
            )
        preview = selectors.redaction_preview(workspace_id=self.workspace.pk, text=text)
        return Response(
            {
                "redactedText": preview.text,
                "findings": [
                    {
                        "entityType": f.entity_type,
                        "start": f.start,
                        "end": f.end,
                        "score": f.score,
                        "operator": f.operator,
                        "status": f.status,
                        "recognizer": f.recognizer,
                    }
                    for f in preview.findings
                ],
                "policyVersion": preview.policy_version,
            }
        )


class RedactionFindingListApi(AdminApiView):
    @extend_schema(
        operation_id="redaction_findings_list",
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=RedactionFinding.Status.values,
                description="e.g. the review queue: pending_review",
            ),
            OpenApiParameter("conversationId", str, description="One conversation."),
            OpenApiParameter("limit", int, description="1..200, default 50."),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page."),
        ],
        responses={200: FindingPageOut, **ADMIN_ERRORS},
        description="Newest first. Findings never carry the value found.",
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        limit = parse_limit(params.get("limit"))
        conversation_id = params.get("conversationId")
        if conversation_id:
            parse_uuid(conversation_id, field="conversationId")
        findings, next_cursor = selectors.redaction_finding_list(
            workspace_id=self.workspace.pk,
            status=params.get("status") or None,
            conversation_id=conversation_id or None,
            limit=limit,
            cursor=params.get("cursor") or None,
        )
        return Response(
            {"findings": [finding_to_wire(f) for f in findings], "next_cursor": next_cursor}
        )


class RedactionFindingApproveApi(AdminApiView):
    @extend_schema(
        operation_id="redaction_findings_approve",
        request=ReviewIn,
        responses={200: FindingOut, **ADMIN_ERRORS, **REDACTION_CONFLICT},
        description="Redact the value of a finding pending review. Audited.",
    )
    def post(self, request: Request, finding_id: str) -> Response:
        finding = selectors.redaction_finding_get(
            workspace_id=self.workspace.pk, finding_id=finding_id
        )
        data = validated(ReviewIn, request.data or {})
        approved = review.redaction_finding_approve(
            finding=finding, actor=self.actor(), reason=data.get("reason") or ""
        )
        return Response(finding_to_wire(approved))


class RedactionFindingDismissApi(AdminApiView):
    @extend_schema(
        operation_id="redaction_findings_dismiss",
        request=DismissIn,
        responses={200: FindingOut, **ADMIN_ERRORS, **REDACTION_CONFLICT},
        description="Keep the value of a finding pending review; addToAllowList adds the "
        "value to the policy's allow list (a policy change: audited, version bumped).",
    )
    def post(self, request: Request, finding_id: str) -> Response:
        finding = selectors.redaction_finding_get(
            workspace_id=self.workspace.pk, finding_id=finding_id
        )
        data = validated(DismissIn, request.data or {})
        dismissed = review.redaction_finding_dismiss(
            finding=finding,
            actor=self.actor(),
            add_to_allow_list=data.get("addToAllowList", False),
            reason=data.get("reason") or "",
        )
        return Response(finding_to_wire(dismissed))


class RestrictedOriginalGetApi(AdminApiView):
    @extend_schema(
        operation_id="redaction_originals_get",
        responses={200: OriginalOut, **ADMIN_ERRORS},
        description="The text of a message, observation or reflection before redaction, "
        "when the policy keeps originals. Admin keys only; every read is audited.",
    )
    def get(self, request: Request, target_type: str, target_id: str) -> Response:
        original = review.restricted_original_read(
            workspace=self.workspace,
            target_type=target_type,
            target_id=target_id,
            actor=self.actor(),
        )
        return Response(original_to_wire(original))


# --- retention, legal holds, erasure ----------------------------------------------------------


def _retention_iso(value: Any) -> str | None:
    return value.isoformat() if value else None


_RETENTION_CONFLICT = OpenApiResponse(
    ErrorOut, description="Refused: the state does not allow it (see error)."
)


class LegalHoldPlaceIn(serializers.Serializer):
    conversationId = StrictCharField(required=False, allow_null=True, allow_blank=True)
    userId = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    reason = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)


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


def legal_hold_to_wire(hold: LegalHold) -> dict[str, Any]:
    return {
        "id": hold.pk,
        "conversationId": str(hold.conversation_id) if hold.conversation_id else None,
        "userId": hold.end_user_id or None,
        "reason": hold.reason,
        "placedBy": hold.placed_by,
        "placedAt": _retention_iso(hold.placed_at),
        "active": hold.is_active,
        "releasedBy": hold.released_by or None,
        "releasedAt": _retention_iso(hold.released_at),
        "releaseReason": hold.release_reason or None,
    }


def _hold_active_param(raw: str | None) -> bool | None:
    if raw is None or raw == "":
        return None
    value = raw.strip().lower()
    if value in {"true", "1", "yes"}:
        return True
    if value in {"false", "0", "no"}:
        return False
    raise MemdeskError("invalid_active", "active must be true or false.", field="active")


class LegalHoldListCreateApi(AdminApiView):
    @extend_schema(
        operation_id="legal_holds_list",
        parameters=[
            OpenApiParameter(
                "active", bool, description="true: only holds in force; false: released."
            ),
            OpenApiParameter(
                "conversationId", str, description="Holds placed on this conversation."
            ),
            OpenApiParameter("userId", str, description="Holds placed on this end user."),
            OpenApiParameter("limit", int, description="1..200, default 50; newest first."),
        ],
        responses={200: LegalHoldListOut, **ADMIN_ERRORS},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        limit = parse_limit(params.get("limit"))
        conversation_id = params.get("conversationId") or None
        holds = selectors.legal_hold_list(
            workspace=self.workspace,
            active=_hold_active_param(params.get("active")),
            conversation_id=(
                parse_uuid(conversation_id, field="conversationId") if conversation_id else None
            ),
            end_user_id=params.get("userId") or None,
        )
        return Response({"holds": [legal_hold_to_wire(h) for h in holds[:limit]]})

    @extend_schema(
        operation_id="legal_holds_place",
        request=LegalHoldPlaceIn,
        responses={201: LegalHoldOut, **ADMIN_ERRORS},
        description="Hold one conversation (conversationId) or every conversation of one "
        "end user, present and future (userId), against retention, deletion and erasure. "
        "`reason` is required.",
    )
    def post(self, request: Request) -> Response:
        data = validated(LegalHoldPlaceIn, request.data)
        conversation = None
        if data.get("conversationId"):
            conversation = conversation_get(
                workspace=self.workspace, conversation_id=data["conversationId"]
            )
        hold = holds.legal_hold_place(
            workspace=self.workspace,
            actor=self.actor(),
            reason=data.get("reason") or "",
            conversation=conversation,
            end_user_id=data.get("userId") or "",
        )
        return Response(legal_hold_to_wire(hold), status=201)


class LegalHoldDetailApi(AdminApiView):
    @extend_schema(operation_id="legal_holds_get", responses={200: LegalHoldOut, **ADMIN_ERRORS})
    def get(self, request: Request, hold_id: str) -> Response:
        hold = selectors.legal_hold_get(workspace=self.workspace, hold_id=hold_id)
        return Response(legal_hold_to_wire(hold))


class LegalHoldReleaseApi(AdminApiView):
    @extend_schema(
        operation_id="legal_holds_release",
        request=ReasonIn,
        responses={200: LegalHoldOut, 409: _RETENTION_CONFLICT, **ADMIN_ERRORS},
        description="Release the hold; `reason` is required. Retention and deletion apply "
        "again to what it covered (unless another hold covers it too).",
    )
    def post(self, request: Request, hold_id: str) -> Response:
        hold = selectors.legal_hold_get(workspace=self.workspace, hold_id=hold_id)
        data = validated(ReasonIn, request.data or {})
        hold = holds.legal_hold_release(
            hold=hold, actor=self.actor(), reason=data.get("reason") or ""
        )
        return Response(legal_hold_to_wire(hold))


# erasure


class ErasureRequestIn(serializers.Serializer):
    userId = StrictCharField(max_length=255)
    reason = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)


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
    error = serializers.CharField(help_text="legal_hold")
    message = serializers.CharField(help_text="Which hold covers the end user.")
    erasureRequestId = serializers.IntegerField(help_text="The request, recorded as refused.")


def erasure_request_to_wire(request: ErasureRequest) -> dict[str, Any]:
    return {
        "id": request.pk,
        "userId": request.end_user_id,
        "reason": request.reason,
        "requestedBy": request.requested_by,
        "status": request.status,
        "counts": request.counts,
        "error": request.error or None,
        "createdAt": _retention_iso(request.created_at),
        "completedAt": _retention_iso(request.completed_at),
    }


class ErasureRequestListCreateApi(AdminApiView):
    @extend_schema(
        operation_id="erasure_requests_list",
        parameters=[
            OpenApiParameter("limit", int, description="1..200, default 50; newest first.")
        ],
        responses={200: ErasureRequestListOut, **ADMIN_ERRORS},
    )
    def get(self, request: Request) -> Response:
        limit = parse_limit(request.query_params.get("limit"))
        requests = selectors.erasure_request_list(workspace=self.workspace, limit=limit)
        return Response({"erasureRequests": [erasure_request_to_wire(r) for r in requests]})

    @extend_schema(
        operation_id="erasure_requests_create",
        request=ErasureRequestIn,
        responses={
            202: ErasureRequestOut,
            409: OpenApiResponse(
                ErasureRefusedOut, description="A legal hold covers the end user."
            ),
            **ADMIN_ERRORS,
        },
        description="Erase every tier of one end user's memory (right to be forgotten). "
        "Runs in the background: follow it with GET /v1/erasure-requests/{id}.",
    )
    def post(self, request: Request) -> Response:
        data = validated(ErasureRequestIn, request.data)
        erasure = erasure_request_create(
            workspace=self.workspace,
            actor=self.actor(),
            end_user_id=data["userId"],
            reason=data.get("reason") or "",
        )
        if erasure.status == ErasureRequest.Status.REFUSED:
            return Response(
                error_body("legal_hold", erasure.error, erasureRequestId=erasure.pk), status=409
            )
        return Response(erasure_request_to_wire(erasure), status=202)


class ErasureRequestDetailApi(AdminApiView):
    @extend_schema(
        operation_id="erasure_requests_get", responses={200: ErasureRequestOut, **ADMIN_ERRORS}
    )
    def get(self, request: Request, request_id: str) -> Response:
        erasure = selectors.erasure_request_get(workspace=self.workspace, request_id=request_id)
        return Response(erasure_request_to_wire(erasure))


# retention policies, dry runs, sweeps

_RETENTION_DAYS_HELP = "Days to keep this tier, 1..36500; null keeps it forever."


def _retention_days() -> serializers.IntegerField:
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=retention.MAX_DAYS,
        help_text=_RETENTION_DAYS_HELP,
    )


class RetentionPolicyIn(serializers.Serializer):
    name = StrictCharField(max_length=100)
    conversationTag = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="Only conversations with this tag; blank: the workspace default.",
    )
    messageDays = _retention_days()
    observationDays = _retention_days()
    reflectionDays = _retention_days()
    enabled = serializers.BooleanField(required=False)
    reason = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)


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


def retention_policy_to_wire(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "id": policy.pk,
        "name": policy.name,
        "conversationTag": policy.conversation_tag,
        "messageDays": policy.message_days,
        "observationDays": policy.observation_days,
        "reflectionDays": policy.reflection_days,
        "enabled": policy.enabled,
        "createdAt": _retention_iso(policy.created_at),
        "updatedAt": _retention_iso(policy.updated_at),
    }


_RETENTION_POLICY_FIELDS = {
    "name": "name",
    "conversationTag": "conversation_tag",
    "messageDays": "message_days",
    "observationDays": "observation_days",
    "reflectionDays": "reflection_days",
    "enabled": "enabled",
}


class RetentionPolicyListCreateApi(AdminApiView):
    @extend_schema(
        operation_id="retention_policies_list",
        responses={200: RetentionPolicyListOut, **ADMIN_ERRORS},
    )
    def get(self, request: Request) -> Response:
        policies = selectors.retention_policy_list(workspace=self.workspace)
        return Response({"policies": [retention_policy_to_wire(p) for p in policies]})

    @extend_schema(
        operation_id="retention_policies_create",
        request=RetentionPolicyIn,
        responses={201: RetentionPolicyOut, 409: _RETENTION_CONFLICT, **ADMIN_ERRORS},
        description="One default policy (blank conversationTag) and one per tag. A "
        "conversation follows its tag policies when any match, else the default.",
    )
    def post(self, request: Request) -> Response:
        data = validated(RetentionPolicyIn, request.data)
        fields = {
            _RETENTION_POLICY_FIELDS[k]: v for k, v in data.items() if k in _RETENTION_POLICY_FIELDS
        }
        policy = retention.retention_policy_create(
            workspace=self.workspace,
            actor=self.actor(),
            reason=data.get("reason") or "",
            **fields,
        )
        return Response(retention_policy_to_wire(policy), status=201)


class RetentionPolicyDetailApi(AdminApiView):
    def policy(self, policy_id: str) -> RetentionPolicy:
        return selectors.retention_policy_get(workspace=self.workspace, policy_id=policy_id)

    @extend_schema(
        operation_id="retention_policies_get",
        responses={200: RetentionPolicyOut, **ADMIN_ERRORS},
    )
    def get(self, request: Request, policy_id: str) -> Response:
        return Response(retention_policy_to_wire(self.policy(policy_id)))

    @extend_schema(
        operation_id="retention_policies_update",
        request=RetentionPolicyIn(partial=True),
        responses={200: RetentionPolicyOut, 409: _RETENTION_CONFLICT, **ADMIN_ERRORS},
        description="Change the fields sent; a days field sent as null keeps that tier forever.",
    )
    def patch(self, request: Request, policy_id: str) -> Response:
        policy = self.policy(policy_id)
        data = validated(RetentionPolicyIn, request.data, partial=True)
        fields = {
            _RETENTION_POLICY_FIELDS[k]: v for k, v in data.items() if k in _RETENTION_POLICY_FIELDS
        }
        policy = retention.retention_policy_update(
            policy=policy, actor=self.actor(), reason=data.get("reason") or "", **fields
        )
        return Response(retention_policy_to_wire(policy))

    @extend_schema(
        operation_id="retention_policies_delete",
        parameters=[OpenApiParameter("reason", str, description="Kept in the audit trail.")],
        request=ReasonIn,
        responses={204: None, **ADMIN_ERRORS},
    )
    def delete(self, request: Request, policy_id: str) -> Response:
        policy = self.policy(policy_id)
        retention.retention_policy_delete(
            policy=policy, actor=self.actor(), reason=request_reason(request)
        )
        return Response(status=204)


class RetentionSweepIn(serializers.Serializer):
    policyId = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Only the rows this policy governs; omitted: every enabled policy.",
    )


class SweepCountsOut(serializers.Serializer):
    messages = serializers.IntegerField()
    observations = serializers.IntegerField()
    reflections = serializers.IntegerField()


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
        "createdAt": _retention_iso(sweep.created_at),
        "startedAt": _retention_iso(sweep.started_at),
        "finishedAt": _retention_iso(sweep.finished_at),
    }


def _retention_sweep_policy(api: AdminApiView, request: Request) -> RetentionPolicy | None:
    data = validated(RetentionSweepIn, request.data or {})
    if data.get("policyId") is None:
        return None
    return selectors.retention_policy_get(workspace=api.workspace, policy_id=data["policyId"])


class RetentionDryRunApi(AdminApiView):
    @extend_schema(
        operation_id="retention_dry_run",
        request=RetentionSweepIn,
        responses={200: RetentionSweepOut, **ADMIN_ERRORS},
        description="Count, per tier, what a sweep would delete now; deletes nothing. A "
        "policyId previews that policy even while it is disabled.",
    )
    def post(self, request: Request) -> Response:
        sweep = retention.retention_dry_run(
            workspace=self.workspace,
            actor=self.actor(),
            policy=_retention_sweep_policy(self, request),
        )
        return Response(retention_sweep_to_wire(sweep))


class RetentionSweepListCreateApi(AdminApiView):
    @extend_schema(
        operation_id="retention_sweeps_list",
        parameters=[
            OpenApiParameter("limit", int, description="1..200, default 50; newest first.")
        ],
        responses={200: RetentionSweepListOut, **ADMIN_ERRORS},
    )
    def get(self, request: Request) -> Response:
        limit = parse_limit(request.query_params.get("limit"))
        sweeps = selectors.retention_sweep_list(workspace=self.workspace, limit=limit)
        return Response({"sweeps": [retention_sweep_to_wire(s) for s in sweeps]})

    @extend_schema(
        operation_id="retention_sweeps_create",
        request=RetentionSweepIn,
        responses={202: RetentionSweepOut, 409: _RETENTION_CONFLICT, **ADMIN_ERRORS},
        description="Run a sweep now, in the background; follow it with "
        "GET /v1/retention/sweeps/{id}. 409 while another sweep of the workspace is open.",
    )
    def post(self, request: Request) -> Response:
        sweep = retention.retention_sweep_request(
            workspace=self.workspace,
            actor=self.actor(),
            policy=_retention_sweep_policy(self, request),
        )
        return Response(retention_sweep_to_wire(sweep), status=202)


class RetentionSweepDetailApi(AdminApiView):
    @extend_schema(
        operation_id="retention_sweeps_get", responses={200: RetentionSweepOut, **ADMIN_ERRORS}
    )
    def get(self, request: Request, sweep_id: str) -> Response:
        sweep = selectors.retention_sweep_get(workspace=self.workspace, sweep_id=sweep_id)
        return Response(retention_sweep_to_wire(sweep))
