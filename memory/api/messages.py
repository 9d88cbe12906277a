"""/v1/conversations/{id}/messages: the conversation's messages, verbatim."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, query_params, validated
from memory import api_schema as out
from memory import selectors
from memory.api.base import IDEMPOTENCY_HEADER, MemoryApi
from memory.api.inputs import BulkMessagesIn, MessageIn, MessageListQuery, message_input
from memory.services.idempotency import Reply
from memory.services.messages import messages_append
from memory.wire import message_to_wire


class MessageListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="messages_list",
        parameters=[OpenApiParameter("limit", int, description="1..200, default 50.")],
        responses={200: out.MessageListOut, **ERRORS},
        description="The newest messages, newest first.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        limit = query_params(MessageListQuery, request)["limit"]
        conversation = self.conversation(conversation_id)
        messages = selectors.message_list_newest_first(conversation=conversation, limit=limit)
        return Response({"messages": [message_to_wire(m) for m in self.readable(messages)]})

    @extend_schema(
        operation_id="messages_create",
        request=MessageIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: out.MessageOut, 409: ErrorOut, **ERRORS},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        item = message_input(validated(MessageIn, request.data))

        def write() -> Reply:
            [message] = messages_append(
                conversation=conversation, items=[item], redact_at_ingest=self._redact_at_ingest
            )
            return Reply(201, message_to_wire(message), conversation, repeats=[message])

        return self.idempotent(request, write)


class MessageBulkCreateApi(MemoryApi):
    @extend_schema(
        operation_id="messages_bulk_create",
        request=BulkMessagesIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: out.MessageListOut, 409: ErrorOut, **ERRORS},
        description="Append up to 100 messages, all or none, in the order given.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(BulkMessagesIn, request.data)
        items = [message_input(m) for m in data["messages"]]

        def write() -> Reply:
            messages = messages_append(
                conversation=conversation, items=items, redact_at_ingest=self._redact_at_ingest
            )
            body = {"messages": [message_to_wire(m) for m in messages]}
            return Reply(201, body, conversation, repeats=messages)

        return self.idempotent(request, write)
