"""Erasure requests over the API (compliance keys and above)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ClosedSerializer,
    LimitQuery,
    StrictCharField,
    query_params,
    reason_field,
    validated,
)
from core.errors import error_body
from governance import selectors
from governance.api.outputs import (
    ErasureRefusedOut,
    ErasureRequestListOut,
    ErasureRequestOut,
)
from governance.erasure import erasure_request_create
from governance.models import (
    ErasureRequest,
)
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView


class ErasureRequestIn(ClosedSerializer):
    userId = StrictCharField(max_length=255)
    reason = reason_field()


class ErasureRequestListCreateApi(ComplianceApiView):
    wire_fields = {"end_user_id": "userId"}

    @extend_schema(
        operation_id="erasure_requests_list",
        parameters=[
            OpenApiParameter("limit", int, description="1..200, default 50; newest first.")
        ],
        responses={200: ErasureRequestListOut, **COMPLIANCE_ERRORS},
    )
    def get(self, request: Request) -> Response:
        limit = query_params(LimitQuery, request)["limit"]
        requests = selectors.erasure_request_list(workspace=self.workspace, limit=limit)
        return Response({"erasureRequests": ErasureRequestOut(requests, many=True).data})

    @extend_schema(
        operation_id="erasure_requests_create",
        request=ErasureRequestIn,
        responses={
            202: ErasureRequestOut,
            409: OpenApiResponse(
                ErasureRefusedOut, description="A legal hold covers the end user."
            ),
            **COMPLIANCE_ERRORS,
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
        return Response(ErasureRequestOut(erasure).data, status=202)


class ErasureRequestDetailApi(ComplianceApiView):
    @extend_schema(
        operation_id="erasure_requests_get", responses={200: ErasureRequestOut, **COMPLIANCE_ERRORS}
    )
    def get(self, request: Request, request_id: str) -> Response:
        erasure = selectors.erasure_request_get(workspace=self.workspace, request_id=request_id)
        return Response(ErasureRequestOut(erasure).data)
