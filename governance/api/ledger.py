"""The read ledger of a conversation over the API (compliance keys and above)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import limit_field, query_params
from governance import selectors
from governance.api.outputs import ContextReadPageOut
from memory.selectors import conversation_get
from tenancy.api_base import COMPLIANCE_ERRORS, ComplianceApiView


class ContextReadPageQuery(serializers.Serializer):
    limit = limit_field()
    cursor = serializers.CharField(required=False)


class ContextReadListApi(ComplianceApiView):
    @extend_schema(
        operation_id="context_reads_list",
        parameters=[
            OpenApiParameter("limit", int, description="1..200, default 50"),
            OpenApiParameter("cursor", str, description="nextCursor of the previous page"),
        ],
        responses={200: ContextReadPageOut, **COMPLIANCE_ERRORS},
        description=(
            "Every context served of this conversation to an agent (REST and MCP), the "
            "latest first: when, which key and its scope, the format, budget and the "
            "question's keyed digest, the memory version and last seq the body was rendered "
            "from, the SHA-256 of the body served (or named by a 304), its tokens and the "
            "status. Web workers write their reads in batches every "
            "MEMDESK_LEDGER_WINDOW_SECONDS: the latest second may not be listed yet."
        ),
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        page = query_params(ContextReadPageQuery, request)
        conversation = conversation_get(workspace=self.workspace, conversation_id=conversation_id)
        reads, next_cursor = selectors.context_reads_list(
            conversation=conversation, cursor=page.get("cursor") or None, limit=page["limit"]
        )
        return Response({"contextReads": [r.as_dict() for r in reads], "nextCursor": next_cursor})
