"""/v1/conversations/{id}/search: text search in one conversation's messages."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, validated
from core.paging import parse_limit
from memory import api_schema as out
from memory.api.base import MemoryApi
from memory.api.inputs import SearchIn
from memory.search.ranked import message_search
from memory.wire import message_to_wire


class MessageSearchApi(MemoryApi):
    @extend_schema(
        operation_id="messages_search",
        request=SearchIn,
        responses={200: out.SearchOut, **ERRORS},
        description="Case-insensitive text search in one conversation (full-text on "
        "PostgreSQL). searchType is always 'text'.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        data = validated(SearchIn, request.data)
        limit = parse_limit(data.get("limit"), default=10)
        conversation = self.conversation(conversation_id)
        hits = message_search(conversation=conversation, query=data["query"], limit=limit)
        self.readable(m for m, _ in hits)
        return Response(
            {"messages": [message_to_wire(m, score=s) for m, s in hits], "searchType": "text"}
        )
