"""The audit trail over the API, for compliance automation (compliance keys and above)."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import limit_field, query_params
from core.errors import MemdeskError
from governance.api.outputs import AuditPageOut, ChainReportOut
from governance.audit.filters import AuditEventFilter
from governance.audit.verify import audit_chain_verify
from governance.selectors import audit_event_list, audit_export_lines
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView
from tenancy.models import Workspace

# The API's names of the shared filters (governance/audit/filters.py), camelCase as the
# rest of the API; the page reads the filter set's own names.
API_FILTERS = {
    "action": "action_exact",
    "actionPrefix": "action",
    "actor": "actor",
    "actorType": "actor_type",
    "actorId": "actor_id",
    "targetType": "target_type",
    "targetId": "target_id",
    "conversation": "conversation",
    "since": "created_from",
    "until": "created_before",
}
API_NAMES = {name: api_name for api_name, name in API_FILTERS.items()}
ERROR_CODES = {"since": "invalid_datetime", "until": "invalid_datetime"}

FILTERS = [
    OpenApiParameter("action", str, description="The whole action name, e.g. observation.edit"),
    OpenApiParameter(
        "actionPrefix",
        {"type": "string", "maxLength": 100},
        description="The action starts with this, e.g. observation. or erasure",
    ),
    OpenApiParameter(
        "actor",
        {"type": "string", "maxLength": 200},
        description="Who acted, as a person types it: a user name or an API key's name "
        "(either case), an actor id, or system",
    ),
    OpenApiParameter("actorType", str, enum=["user", "api_key", "system"]),
    OpenApiParameter("actorId", str),
    OpenApiParameter(
        "targetType",
        {"type": "string", "maxLength": 50},
        description="e.g. observation, conversation",
    ),
    OpenApiParameter("targetId", {"type": "string", "maxLength": 200}),
    OpenApiParameter(
        "conversation",
        OpenApiTypes.UUID,
        description="The events about this conversation: on it, on the messages, "
        "observations and reflections it holds, and on anything whose recorded state names "
        "it (a hold, a scan). A conversation this workspace does not hold matches nothing",
    ),
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="ISO 8601; events at or after"),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="ISO 8601; events before"),
]


class AuditPageQuery(serializers.Serializer):
    limit = limit_field()
    cursor = serializers.CharField(required=False)


def audit_filters(request: Request, workspace: Workspace) -> AuditEventFilter:
    """The request's audit filters, under the API's names. A bad value is a 400 whose
    field is the parameter's name and whose code is ``invalid_datetime`` for ``since``
    and ``until``, ``invalid_<name>`` for the others, as ``query_params`` answers."""
    params = request.query_params
    data = {name: params[api_name] for api_name, name in API_FILTERS.items() if api_name in params}
    filters = AuditEventFilter(data, workspace=workspace)
    if not filters.is_valid():
        name, messages = next(iter(filters.errors.items()))
        field = API_NAMES[name]
        raise MemdeskError(ERROR_CODES.get(field, f"invalid_{field}"), messages[0], field=field)
    return filters


class AuditEventListApi(ComplianceApiView):
    @extend_schema(
        operation_id="audit_events_list",
        parameters=[
            *FILTERS,
            OpenApiParameter("limit", int, description="1..200, default 50"),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page"),
        ],
        responses={200: AuditPageOut, **COMPLIANCE_ERRORS},
        description=(
            "Newest first. The filters combine (all must hold); `actionPrefix`, `actor` and "
            "`conversation` mean what the dashboard's audit log filters of those names mean."
        ),
    )
    def get(self, request: Request) -> Response:
        filters = audit_filters(request, self.workspace)
        page = query_params(AuditPageQuery, request)
        events, next_cursor = audit_event_list(
            filters=filters, cursor=page.get("cursor") or None, limit=page["limit"]
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
        parameters=[
            *FILTERS,
            OpenApiParameter(
                "include",
                str,
                enum=["contextReads"],
                description="contextReads: after the events, the read ledger's rows (what "
                "agents were served) under the conversation and day filters, one "
                '{"contextRead": {...}} per line, in the order they were served',
            ),
        ],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(
                str, description="One event per line (JSON Lines), oldest first."
            ),
            **COMPLIANCE_ERRORS,
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        filters = audit_filters(request, self.workspace)
        include = request.query_params.get("include", "")
        if include not in ("", "contextReads"):
            raise MemdeskError(
                "invalid_include",
                f"include takes contextReads (the read ledger's rows); got {include!r}.",
                field="include",
            )
        response = StreamingHttpResponse(
            audit_export_lines(filters=filters, context_reads=include == "contextReads"),
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
