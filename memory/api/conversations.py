"""/v1/conversations and /v1/conversations/{id}."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, ReasonIn, query_params, request_reason, validated
from core.errors import MemdeskError
from memory import selectors
from memory.api.base import IDEMPOTENCY_HEADER, MemoryApi
from memory.api.inputs import ConversationCreateIn, ConversationListQuery
from memory.api.presenters import (
    ConversationOut,
    ConversationPageOut,
    new_conversation_to_wire,
)
from memory.services.conversations import conversation_create, conversation_delete
from memory.services.idempotency import Reply


class ConversationListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="conversations_list",
        parameters=[
            OpenApiParameter("userId", str, description="Only this end user's conversations."),
            OpenApiParameter("user_id", str, description="The same as userId."),
            OpenApiParameter("limit", int, description="1..200, default 50."),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page."),
        ],
        responses={200: ConversationPageOut, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = query_params(ConversationListQuery, request)
        user_id = query.get("userId") or query.get("user_id") or ""
        if user_id != (query.get("user_id") or user_id):
            raise MemdeskError(
                "conflicting_fields",
                "userId and user_id name the same filter and differ here: send one.",
                field="userId",
            )
        page = selectors.conversation_page(
            workspace=self.workspace,
            user_id=user_id or None,
            limit=query["limit"],
            cursor=query.get("cursor") or None,
        )
        return Response(ConversationPageOut(page).data)

    @extend_schema(
        operation_id="conversations_create",
        request=ConversationCreateIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: ConversationOut, 409: ErrorOut, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = validated(ConversationCreateIn, request.data)

        def write() -> Reply:
            conversation = conversation_create(
                workspace=self.workspace,
                user_id=data.get("userId") or "",
                title=data.get("title") or "",
                metadata=data.get("metadata") or {},
            )
            return Reply(201, new_conversation_to_wire(conversation), conversation)

        return self.idempotent(request, write)


class ConversationDetailApi(MemoryApi):
    @extend_schema(operation_id="conversations_get", responses={200: ConversationOut, **ERRORS})
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        [summary] = selectors.conversation_summaries([conversation])
        return Response(ConversationOut(summary).data)

    @extend_schema(
        operation_id="conversations_delete",
        parameters=[OpenApiParameter("reason", str, description="Why; kept in the audit trail.")],
        request=ReasonIn,
        responses={
            204: OpenApiResponse(
                description="Deleted; or nothing to delete (an id this workspace does not "
                "hold, or one already deleted): the delete is idempotent."
            ),
            409: OpenApiResponse(
                ErrorOut, description="legal_hold: a legal hold covers it; says which."
            ),
            **{status: response for status, response in ERRORS.items() if status != 404},
        },
    )
    def delete(self, request: Request, conversation_id: str) -> Response:
        reason = request_reason(request)
        try:
            conversation = self.conversation(conversation_id)
        except MemdeskError as error:
            if error.code != "not_found":
                raise
            # Idempotent, as NAMS clients expect: a second delete, or one of an id this
            # workspace never held (another workspace's included: it is not touched and
            # answers the same), succeeds and changes nothing, so it is not audited.
            return Response(status=204)
        conversation_delete(conversation=conversation, actor=self.actor(), reason=reason)
        return Response(status=204)
