"""The audit trail over the API, for compliance automation (compliance keys and above)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import limit_field, query_params
from governance.api.outputs import AuditPageOut, ChainReportOut
from governance.audit.verify import audit_chain_verify
from governance.selectors import audit_event_list, audit_export_lines
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView

FILTERS = [
    OpenApiParameter("action", str, description="e.g. observation.edit"),
    OpenApiParameter("targetType", str, description="e.g. observation, conversation"),
    OpenApiParameter("targetId", str),
    OpenApiParameter("actorType", str, enum=["user", "api_key", "system"]),
    OpenApiParameter("actorId", str),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="ISO 8601; events at or after"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="ISO 8601; events before"),
]


class AuditFilterQuery(serializers.Serializer):
    error_codes = {"since": "invalid_datetime", "until": "invalid_datetime"}

    action = serializers.CharField(required=False)
    targetType = serializers.CharField(required=False, source="target_type")
    targetId = serializers.CharField(required=False, source="target_id")
    actorType = serializers.ChoiceField(
        choices=["user", "api_key", "system"], required=False, source="actor_type"
    )
    actorId = serializers.CharField(required=False, source="actor_id")
    since = serializers.DateTimeField(required=False, source="created_at__gte")
    until = serializers.DateTimeField(required=False, source="created_at__lt")


class AuditPageQuery(AuditFilterQuery):
    limit = limit_field()
    cursor = serializers.CharField(required=False)


class AuditEventListApi(ComplianceApiView):
    @extend_schema(
        operation_id="audit_events_list",
        parameters=[
            *FILTERS,
            OpenApiParameter("limit", int, description="1..200, default 50"),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page"),
        ],
        responses={200: AuditPageOut, **COMPLIANCE_ERRORS},
        description="Newest first.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(AuditPageQuery, request)
        limit, cursor = query.pop("limit"), query.pop("cursor", None)
        events, next_cursor = audit_event_list(
            workspace=self.workspace, filters=query, cursor=cursor or None, limit=limit
        )
        return Response(
            {
                "events": [e.as_dict() for e in events],
                "next_cursor": next_cursor,
            }
        )


class AuditEventExportApi(ComplianceApiView):
    @extend_schema(
        operation_id="audit_events_export",
        parameters=FILTERS,
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                str, description="One event per line (JSON Lines), oldest first."
            ),
            **COMPLIANCE_ERRORS,
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        filters = query_params(AuditFilterQuery, request)
        response = StreamingHttpResponse(
            audit_export_lines(workspace=self.workspace, filters=filters),
            content_type="application/x-ndjson",
        )
        response["Content-Disposition"] = (
            f'attachment; filename="audit-{self.workspace.name}.jsonl"'
        )
        return response


class AuditVerifyApi(ComplianceApiView):
    @extend_schema(
        operation_id="audit_verify",
        responses={200: ChainReportOut, **COMPLIANCE_ERRORS},
        description=(
            "Walk this workspace's keyed hash chain, compare it with the signed checkpoints "
            "kept outside the database, and report the first broken event in plain words."
        ),
    )
    def get(self, request: Request) -> Response:
        report = audit_chain_verify(workspace_id=self.workspace.pk)
        return Response(ChainReportOut(report).data)
