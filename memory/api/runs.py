"""The Observer and Reflector on demand, their runs, and where each message stands."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, ReasonIn, query_params, request_reason
from core.paging import parse_uuid
from memory import api_schema as out
from memory import selectors
from memory.api.base import MemoryApi
from memory.api.inputs import ExtractionStatusQuery, WaitQuery
from memory.api.presenters import RunOut
from memory.models import AnyRun
from memory.pipeline.on_demand import run_now
from memory.pipeline.runs import run_cancel, run_get


class ExtractionStatusApi(MemoryApi):
    @extend_schema(
        operation_id="extraction_status",
        parameters=[OpenApiParameter("limit", int, description="Messages listed, 1..200.")],
        responses={200: out.ExtractionStatusOut, **ERRORS},
        description="Per message, newest first: stored (waiting for the Observer's "
        "threshold or an observe request), processing (an Observer run under way will "
        "cover it), completed (an observation covers it) or failed (the last run over it "
        "failed). summary counts every message of the conversation. Only processing is "
        "in flight, so a NAMS client's wait_for_extraction returns once the messages are "
        "stored and no run over them is under way.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = query_params(ExtractionStatusQuery, request)
        status = selectors.extraction_status(
            conversation=self.conversation(conversation_id), limit=query["limit"]
        )
        return Response({"messages": status.messages, "summary": status.summary})


WAIT_PARAMETER = OpenApiParameter(
    "wait",
    bool,
    description="true: run now and answer with the finished run (200); a run not "
    "finished within MEMDESK_RUN_WAIT_SECONDS is left to the workers and answered like "
    "without it: 202 with the open run, whose Location is the run to poll.",
)


def _run_response(request: Request, run: AnyRun) -> Response:
    if not run.is_open:
        return Response(RunOut(run).data, status=200)
    return Response(RunOut(run).data, status=202, headers={"Location": f"/v1/runs/{run.pk}"})


class _RunNowApi(MemoryApi):
    kind = ""

    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        wait = query_params(WaitQuery, request)["wait"]
        run = run_now(kind=self.kind, conversation=conversation, wait=wait)
        return _run_response(request, run)


class ObserveNowApi(_RunNowApi):
    kind = "observe"

    @extend_schema(
        operation_id="conversations_observe",
        request=None,
        parameters=[WAIT_PARAMETER],
        responses={200: RunOut, 202: RunOut, **ERRORS},
        description="Observe the conversation's unobserved messages now.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


class ReflectNowApi(_RunNowApi):
    kind = "reflect"

    @extend_schema(
        operation_id="conversations_reflect",
        request=None,
        parameters=[WAIT_PARAMETER],
        responses={200: RunOut, 202: RunOut, **ERRORS},
        description="Condense the conversation's active observations into reflections now.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


class RunDetailApi(MemoryApi):
    @extend_schema(operation_id="runs_get", responses={200: RunOut, **ERRORS})
    def get(self, request: Request, run_id: str) -> Response:
        parse_uuid(run_id, field="runId")
        return Response(RunOut(run_get(workspace=self.workspace, run_id=run_id)).data)


class RunCancelApi(MemoryApi):
    # An agent may cancel what it may start.
    @extend_schema(
        operation_id="runs_cancel",
        request=ReasonIn,
        parameters=[OpenApiParameter("reason", str, description="Optional (or in the body).")],
        responses={
            200: RunOut,
            409: OpenApiResponse(
                ErrorOut,
                description="run_finished: the run has already succeeded, failed or been "
                "cancelled.",
            ),
            **ERRORS,
        },
        description="Cancel a queued, retrying or running run; audited. A running run's "
        "results are discarded. The conversation can be observed or reflected again at "
        "once on demand; automatic triggers wait a few minutes.",
    )
    def post(self, request: Request, run_id: str) -> Response:
        parse_uuid(run_id, field="runId")
        run = run_get(workspace=self.workspace, run_id=run_id)
        run = run_cancel(run=run, actor=self.actor(), reason=request_reason(request))
        return Response(RunOut(run).data)
