"""Legal holds over the API (compliance keys and above)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ReasonIn,
    StrictCharField,
    limit_field,
    query_params,
    reason_field,
    validated,
)
from governance import holds, selectors
from governance.api.outputs import RETENTION_CONFLICT, LegalHoldListOut, LegalHoldOut
from memory.selectors import conversation_get
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView


class LegalHoldPlaceIn(serializers.Serializer):
    conversationId = StrictCharField(required=False, allow_null=True, allow_blank=True)
    userId = StrictCharField(required=False, allow_null=True, allow_blank=True, max_length=255)
    reason = reason_field()


class QueryBooleanField(serializers.BooleanField):
    """true or false; absent means either. DRF would also read "null" and "" as absent."""

    NULL_VALUES = {None}


class LegalHoldListQuery(serializers.Serializer):
    error_codes = {"conversationId": "invalid_id"}

    active = QueryBooleanField(required=False, allow_null=True, default=None)
    conversationId = serializers.UUIDField(required=False)
    userId = serializers.CharField(required=False)
    limit = limit_field()


class LegalHoldListCreateApi(ComplianceApiView):
    wire_fields = {"end_user_id": "userId"}

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
        responses={200: LegalHoldListOut, **COMPLIANCE_ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = query_params(LegalHoldListQuery, request)
        holds = selectors.legal_hold_list(
            workspace=self.workspace,
            active=query["active"],
            conversation_id=query.get("conversationId"),
            end_user_id=query.get("userId") or None,
        )
        return Response({"holds": LegalHoldOut(holds[: query["limit"]], many=True).data})

    @extend_schema(
        operation_id="legal_holds_place",
        request=LegalHoldPlaceIn,
        responses={201: LegalHoldOut, **COMPLIANCE_ERRORS},
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
        return Response(LegalHoldOut(hold).data, status=201)


class LegalHoldDetailApi(ComplianceApiView):
    @extend_schema(
        operation_id="legal_holds_get", responses={200: LegalHoldOut, **COMPLIANCE_ERRORS}
    )
    def get(self, request: Request, hold_id: str) -> Response:
        hold = selectors.legal_hold_get(workspace=self.workspace, hold_id=hold_id)
        return Response(LegalHoldOut(hold).data)


class LegalHoldReleaseApi(ComplianceApiView):
    @extend_schema(
        operation_id="legal_holds_release",
        request=ReasonIn,
        responses={200: LegalHoldOut, 409: RETENTION_CONFLICT, **COMPLIANCE_ERRORS},
        description="Release the hold; `reason` is required. Retention and deletion apply "
        "again to what it covered (unless another hold covers it too).",
    )
    def post(self, request: Request, hold_id: str) -> Response:
        hold = selectors.legal_hold_get(workspace=self.workspace, hold_id=hold_id)
        data = validated(ReasonIn, request.data or {})
        hold = holds.legal_hold_release(
            hold=hold, actor=self.actor(), reason=data.get("reason") or ""
        )
        return Response(LegalHoldOut(hold).data)
