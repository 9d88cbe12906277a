"""/v1/reasoning: the agent's reasoning steps and tool calls (NAMS reasoning memory)."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, query_params, validated
from core.errors import MemdeskError
from memory import selectors
from memory.api.base import IDEMPOTENCY_HEADER, MemoryApi
from memory.api.inputs import (
    ReasoningStepIn,
    ReasoningStepListQuery,
    ToolCallIn,
    as_json,
    as_text,
    one_of,
)
from memory.api.presenters import (
    ReasoningStepListOut,
    ReasoningStepOut,
    ReasoningTraceOut,
    ToolCallOut,
)
from memory.models import ToolCall
from memory.services.idempotency import Reply
from memory.services.reasoning import reasoning_step_record, tool_call_record


class ReasoningStepCreateApi(MemoryApi):
    wire_fields: ClassVar[dict[str, str]] = {"action_taken": "actionTaken"}

    @extend_schema(
        operation_id="reasoning_steps_create",
        request=ReasoningStepIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: ReasoningStepOut, 409: ErrorOut, **ERRORS},
        description="Record one reasoning step of the agent in a conversation. At least one "
        "of reasoning, actionTaken and result must hold text.",
    )
    def post(self, request: Request) -> Response:
        data = validated(ReasoningStepIn, request.data)
        conversation = self.conversation(str(data["conversationId"]))

        def write() -> Reply:
            step = reasoning_step_record(
                conversation=conversation,
                actor=self.actor(),
                reasoning=data.get("reasoning") or "",
                action_taken=data.get("actionTaken") or "",
                result=data.get("result") or "",
                metadata=data.get("metadata") or {},
            )
            return Reply(201, ReasoningStepOut(step).data, conversation, repeats=step)

        return self.idempotent(request, write)

    @extend_schema(
        operation_id="reasoning_steps_list",
        parameters=[
            OpenApiParameter(
                "conversation_id",
                str,
                required=True,
                description="The conversation (conversationId is read too).",
            ),
            OpenApiParameter("conversationId", str, description="The same as conversation_id."),
        ],
        responses={200: ReasoningStepListOut, **ERRORS},
        description="The conversation's reasoning steps, oldest first.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(ReasoningStepListQuery, request)
        conversation_id = one_of(query, "conversation_id", "conversationId")
        if conversation_id is None:
            raise MemdeskError(
                "conversation_required",
                "Name the conversation: ?conversation_id=<its id>.",
                field="conversation_id",
            )
        conversation = self.conversation(str(conversation_id))
        steps = selectors.reasoning_step_list(conversation=conversation)
        return Response(ReasoningStepListOut({"steps": steps}).data)


class ToolCallCreateApi(MemoryApi):
    wire_fields: ClassVar[dict[str, str]] = {"step_id": "stepId", "tool_name": "toolName"}

    @extend_schema(
        operation_id="tool_calls_create",
        request=ToolCallIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: ToolCallOut, 409: ErrorOut, **ERRORS},
        description="Record one tool call: under the reasoning step stepId names, or in the "
        "conversation conversationId names. The Observer reads its output as tool output.",
    )
    def post(self, request: Request) -> Response:
        data = validated(ToolCallIn, request.data)
        call_input = as_text(one_of(data, "input", "arguments", meaning=as_json))
        call_output = as_text(one_of(data, "output", "result", meaning=as_json))
        conversation = None
        if data.get("conversationId") is not None:
            conversation = self.conversation(str(data["conversationId"]))

        def write() -> Reply:
            call = tool_call_record(
                conversation=conversation,
                workspace=self.workspace,
                actor=self.actor(),
                tool_name=data["toolName"],
                step_id=data.get("stepId"),
                input=call_input,
                output=call_output,
                status=data.get("status") or ToolCall.Status.SUCCESS,
                duration_ms=data.get("durationMs"),
                error=data.get("error") or "",
                metadata=data.get("metadata") or {},
            )
            return Reply(201, ToolCallOut(call).data, call.conversation, repeats=call)

        return self.idempotent(request, write)


class ReasoningTraceApi(MemoryApi):
    @extend_schema(
        operation_id="reasoning_trace_get",
        responses={200: ReasoningTraceOut, **ERRORS},
        description="Every reasoning step and tool call of a conversation, oldest first.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        trace = {
            "conversationId": conversation.pk,
            "steps": selectors.reasoning_step_list(conversation=conversation),
            "toolCalls": selectors.tool_call_list(conversation=conversation),
        }
        return Response(ReasoningTraceOut(trace).data)
