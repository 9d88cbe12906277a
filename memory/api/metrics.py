"""/v1/metrics: what memory saves and how the pipeline is doing."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, query_params
from memory import api_schema as out
from memory.api.base import MemoryApi
from memory.api.inputs import MetricsQuery
from memory.metrics import pipeline_metrics


class MetricsApi(MemoryApi):
    @extend_schema(
        operation_id="metrics_get",
        parameters=[OpenApiParameter("conversationId", str, description="One conversation.")],
        responses={200: out.MetricsOut, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        conversation_id = query_params(MetricsQuery, request).get("conversationId")
        conversation = self.conversation(str(conversation_id)) if conversation_id else None
        return Response(pipeline_metrics(workspace=self.workspace, conversation=conversation))
