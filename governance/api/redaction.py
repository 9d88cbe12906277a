"""Redaction over the API: the policy, a preview, the review queue, kept originals, and
the reveal of what a pseudonym stands for."""

from __future__ import annotations

from typing import Any, ClassVar

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ERRORS,
    ClosedSerializer,
    ErrorOut,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictRegexField,
    limit_field,
    query_params,
    reason_field,
    request_reason,
    text_field,
    validated,
)
from core.errors import MemdeskError
from governance import selectors
from governance.api.outputs import (
    FindingOut,
    FindingPageOut,
    OriginalOut,
    PreviewOut,
    PseudonymOut,
    RedactionPolicyOut,
)
from governance.models import (
    RedactionFinding,
)
from governance.redaction import policy as redaction_policy
from governance.redaction import presidio, reveal, review
from governance.redaction.preview import redaction_preview, redaction_preview_labelled
from tenancy.api_base import COMPLIANCE_ERRORS, ApiView, ComplianceApiView
from tenancy.models import ApiKey

REDACTION_CONFLICT = {
    409: OpenApiResponse(
        ErrorOut, description="Already decided, or the text changed since (finding_stale)."
    )
}


CUSTOM_RECOGNIZERS_LIMIT = 50
CUSTOM_PATTERN_MAX_CHARS = 500
CONTEXT_WORDS_LIMIT = 20
CONTEXT_WORD_MAX_CHARS = 50


def _compiles(pattern: str) -> None:
    problem = presidio.validate_pattern(pattern)
    if problem:
        raise serializers.ValidationError(f"does not compile ({problem}).")


class CustomRecognizerIn(serializers.Serializer):
    name = StrictRegexField(
        r"^[\w.-]{1,50}$", error_messages={"invalid": "1 to 50 letters, digits, '_', '.', '-'."}
    )
    entity = StrictRegexField(
        presidio.ENTITY_NAME,
        error_messages={"invalid": "an UPPER_CASE entity type such as ORDER_ID."},
    )
    pattern = text_field(max_length=CUSTOM_PATTERN_MAX_CHARS, validators=[_compiles])
    score = StrictFloatField(min_value=0, max_value=1, default=0.5)
    context = serializers.ListField(  # type: ignore[assignment]  # a clash with Serializer.context in the stubs only
        child=text_field(max_length=CONTEXT_WORD_MAX_CHARS),
        max_length=CONTEXT_WORDS_LIMIT,
        default=list,
    )

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = set(data) - set(self.fields)
            if unknown:
                raise serializers.ValidationError(f"unknown keys {sorted(unknown)}.")
        return super().to_internal_value(data)


class RedactionPolicyIn(ClosedSerializer):
    # Types and ranges are checked here; the rules the dashboard's form needs as well
    # (entity names, list entries, the review band) by redaction_policy_update.
    entities = serializers.ListField(child=StrictCharField(), required=False)
    scoreThreshold = StrictFloatField(min_value=0, max_value=1, required=False)
    operators = serializers.DictField(
        child=serializers.ChoiceField(choices=presidio.OPERATORS), required=False
    )
    defaultOperator = serializers.ChoiceField(choices=presidio.OPERATORS, required=False)
    allowList = serializers.ListField(
        child=StrictCharField(allow_blank=True, trim_whitespace=False), required=False
    )
    denyList = serializers.ListField(
        child=StrictCharField(allow_blank=True, trim_whitespace=False), required=False
    )
    customRecognizers = serializers.ListField(
        child=CustomRecognizerIn(), max_length=CUSTOM_RECOGNIZERS_LIMIT, required=False
    )
    reviewMinScore = StrictFloatField(min_value=0, max_value=1, required=False)
    reviewMaxScore = StrictFloatField(min_value=0, max_value=1, required=False)
    redactAtIngest = StrictBooleanField(required=False)
    redactBeforeObservation = StrictBooleanField(required=False)
    reflectionWaitsForReview = StrictBooleanField(required=False)
    keepOriginals = StrictBooleanField(required=False)
    agentsSeeReidentified = StrictBooleanField(required=False)
    reason = reason_field(help_text="Why the policy changes; kept in the audit trail.")

    def validate_customRecognizers(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len({c["name"] for c in value}) != len(value):
            raise serializers.ValidationError("names must be unique.")
        return [dict(c) for c in value]


class RedactionPolicyReplaceIn(RedactionPolicyIn):
    """PUT: the whole policy. Every field but the reason is required, so that a field
    left out is an error rather than a silent return to its default."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, field in self.fields.items():
            field.required = name != "reason"


class PreviewIn(serializers.Serializer):
    text = text_field(allow_blank=True)


class ReviewIn(ClosedSerializer):
    reason = reason_field()


class RevealIn(serializers.Serializer):
    reason = reason_field()


class DismissIn(ReviewIn):
    addToAllowList = serializers.BooleanField(required=False, default=False)


class RedactionPolicyApi(ApiView):
    # Any key reads the policy; compliance keys and above change it.
    required_scopes: ClassVar[dict[str, str]] = {
        "PUT": ApiKey.Scope.COMPLIANCE,
        "PATCH": ApiKey.Scope.COMPLIANCE,
    }

    @property
    def may_govern(self) -> bool:
        return self.api_key.grants(ApiKey.Scope.COMPLIANCE)

    @extend_schema(
        operation_id="redaction_policy_get",
        responses={200: RedactionPolicyOut, **ERRORS},
        description="The workspace's redaction policy (the defaults until it is changed). "
        "Agent keys see denyListCount but not the deny list itself.",
    )
    def get(self, request: Request) -> Response:
        policy = redaction_policy.redaction_policy_get_or_create(workspace_id=self.workspace.pk)
        return Response(RedactionPolicyOut(policy, context={"admin": self.may_govern}).data)

    def _write(self, request: Request, *, replace: bool) -> Response:
        if replace:
            missing = [
                wire for wire in redaction_policy.POLICY_FIELDS.values() if wire not in request.data
            ]
            if missing:
                raise MemdeskError(
                    "invalid_policy",
                    "PUT replaces the whole policy and needs every field; missing: "
                    f"{', '.join(missing)}. PATCH changes only the fields it is sent.",
                    field=missing[0],
                )
        data = validated(RedactionPolicyReplaceIn if replace else RedactionPolicyIn, request.data)
        names = {wire: name for name, wire in redaction_policy.POLICY_FIELDS.items()}
        policy = redaction_policy.redaction_policy_update(
            workspace_id=self.workspace.pk,
            actor=self.actor(),
            values={names[wire]: value for wire, value in data.items() if wire in names},
            replace=replace,
            reason=data.get("reason") or "",
        )
        return Response(RedactionPolicyOut(policy, context={"admin": True}).data)

    @extend_schema(
        operation_id="redaction_policy_replace",
        request=RedactionPolicyReplaceIn,
        responses={200: RedactionPolicyOut, **COMPLIANCE_ERRORS},
        description="Replace the whole policy: every field is required (400 invalid_policy "
        "naming the ones missing); PATCH changes some. `reason` is optional and kept in the "
        "audit event. Compliance keys and above; audited; bumps version.",
    )
    def put(self, request: Request) -> Response:
        return self._write(request, replace=True)

    @extend_schema(
        operation_id="redaction_policy_update",
        request=RedactionPolicyIn,
        responses={200: RedactionPolicyOut, **COMPLIANCE_ERRORS},
        description="Change the fields given; `reason` is optional and kept in the audit "
        "event. Compliance keys and above; audited; bumps version.",
    )
    def patch(self, request: Request) -> Response:
        return self._write(request, replace=False)


class RedactionPreviewApi(ApiView):
    @extend_schema(
        operation_id="redaction_preview",
        request=PreviewIn,
        responses={200: PreviewOut, **ERRORS},
        description="What the workspace's policy finds in a text (entity types, offsets, "
        "scores, operators) and the text as the Reflector would read it. Any key may ask; "
        "what it is told depends on its scope. Agent and curator keys get each value the "
        "pseudonym operator replaces written as its type (<EMAIL_ADDRESS>), and never which "
        "pseudonym a value has nor whether the workspace knows it: the answer is the one a "
        "workspace that never met the text would give (pseudonym, newPseudonym and "
        "newPseudonyms are null, pseudonymsShown is false). Compliance keys and above, who "
        "may reveal pseudonyms, get the pseudonyms it would write (known values keep "
        "theirs; new ones show the next free numbers), and each such preview that names a "
        "pseudonym is audited (redaction.preview: counts and entity types, never the text). "
        "Nothing is stored or numbered.",
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
        if self.api_key.grants(ApiKey.Scope.COMPLIANCE):
            preview = redaction_preview_labelled(
                workspace_id=self.workspace.pk, text=text, actor=self.actor()
            )
        else:
            preview = redaction_preview(workspace_id=self.workspace.pk, text=text)
        response = Response(PreviewOut(preview).data)
        response["Cache-Control"] = "private, no-store"
        return response


class FindingListQuery(serializers.Serializer):
    error_codes = {"conversationId": "invalid_id"}

    status = serializers.CharField(required=False)
    conversationId = serializers.UUIDField(required=False)
    limit = limit_field()
    cursor = serializers.CharField(required=False)


class RedactionFindingListApi(ComplianceApiView):
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
        responses={200: FindingPageOut, **COMPLIANCE_ERRORS},
        description="Newest first. Findings never carry the value found.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(FindingListQuery, request)
        findings, next_cursor = selectors.redaction_finding_list(
            workspace_id=self.workspace.pk,
            status=query.get("status") or None,
            conversation_id=query.get("conversationId"),
            limit=query["limit"],
            cursor=query.get("cursor") or None,
        )
        return Response(
            {"findings": FindingOut(findings, many=True).data, "next_cursor": next_cursor}
        )


class RedactionFindingApproveApi(ComplianceApiView):
    @extend_schema(
        operation_id="redaction_findings_approve",
        request=ReviewIn,
        responses={200: FindingOut, **COMPLIANCE_ERRORS, **REDACTION_CONFLICT},
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
        return Response(FindingOut(approved).data)


class RedactionFindingDismissApi(ComplianceApiView):
    @extend_schema(
        operation_id="redaction_findings_dismiss",
        request=DismissIn,
        responses={200: FindingOut, **COMPLIANCE_ERRORS, **REDACTION_CONFLICT},
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
        return Response(FindingOut(dismissed).data)


class RestrictedOriginalGetApi(ComplianceApiView):
    @extend_schema(
        operation_id="redaction_originals_get",
        responses={200: OriginalOut, **COMPLIANCE_ERRORS},
        parameters=[
            OpenApiParameter(
                "reason",
                str,
                required=True,
                description="Why the original is read; kept in the audit event.",
            )
        ],
        description="The text of a message, observation or reflection before redaction, "
        "when the policy keeps originals. Compliance keys and above; needs a reason "
        "(`?reason=`); every read is audited with it.",
    )
    def get(self, request: Request, target_type: str, target_id: str) -> Response:
        original = review.restricted_original_read(
            workspace=self.workspace,
            target_type=target_type,
            target_id=target_id,
            actor=self.actor(),
            reason=request_reason(request),
        )
        return Response(OriginalOut(original).data)


class PseudonymRevealApi(ComplianceApiView):
    @extend_schema(
        operation_id="redaction_pseudonyms_reveal",
        request=RevealIn,
        responses={
            200: PseudonymOut,
            **COMPLIANCE_ERRORS,
            409: OpenApiResponse(
                ErrorOut,
                description="The stored value cannot be decrypted with the configured key "
                "(pseudonym_unreadable).",
            ),
        },
        description="What a pseudonym (<PERSON_2>, or PERSON_2 in the path) stands for. "
        "The label may be given as memory holds it: older notes hold misspellings such as "
        "<PERSON2>, PERSON2 or person_2>, each read as the label it means; the answer's "
        "label and the audit event name that label. Anything that spells no pseudonym is "
        "a 400 invalid_label. Compliance keys and above; `reason` is required and every "
        "reveal is audited (redaction.pseudonym.reveal, without the value). A pseudonym "
        "whose value no message holds any more answers held=false and value=null.",
    )
    def post(self, request: Request, label: str) -> Response:
        data = validated(RevealIn, request.data or {})
        revealed = reveal.pseudonym_reveal(
            workspace_id=self.workspace.pk,
            label=label,
            actor=self.actor(),
            reason=data.get("reason") or "",
        )
        response = Response(PseudonymOut(revealed).data)
        response["Cache-Control"] = "private, no-store"
        return response
