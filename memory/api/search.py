"""Search: ``/v1/conversations/{id}/search`` (the NAMS route: one conversation's messages,
ranked) and ``/v1/search`` (every tier, for one conversation, one end user or, for a
curator key or higher, the whole workspace)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, validated
from core.paging import parse_body_limit
from memory import api_schema as out
from memory.api.base import MemoryApi
from memory.api.inputs import SearchIn, WorkspaceSearchIn, search_answer
from memory.search.ranked import message_search
from memory.wire import message_to_wire


class MessageSearchApi(MemoryApi):
    @extend_schema(
        operation_id="messages_search",
        request=SearchIn,
        responses={200: out.SearchOut, **ERRORS},
        description="The conversation's messages that best answer a question, best first "
        '(ranked full-text search: stop words dropped, stems, accents folded, "quoted '
        'phrases" and prefix* honoured); a question of stop words only is a '
        "case-insensitive substring match. searchType is always 'text'.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        data = validated(SearchIn, request.data)
        limit = parse_body_limit(data.get("limit"), default=10)
        conversation = self.conversation(conversation_id)
        hits = message_search(conversation=conversation, query=data["query"], limit=limit)
        self.readable(m for m, _ in hits)
        return Response(
            {"messages": [message_to_wire(m, score=s) for m, s in hits], "searchType": "text"}
        )


WORKSPACE_SEARCH_ERRORS = {
    **ERRORS,
    403: OpenApiResponse(
        ErrorOut,
        description="scope_required: an agent key sent neither conversationId nor userId "
        "(the whole workspace needs a curator key or higher); or X-Workspace-Id is wrong.",
    ),
}


class WorkspaceSearchApi(MemoryApi):
    @extend_schema(
        operation_id="search",
        request=WorkspaceSearchIn,
        responses={200: out.SearchHitsOut, **WORKSPACE_SEARCH_ERRORS},
        description="Ranked search over messages, observations, reflections and pins: in "
        "one conversation (conversationId), one end user's conversations (userId), or the "
        "whole workspace (neither; a curator key or higher). Filters: tiers, role, name "
        "(the speaker), since/until. Each hit has its snippet, the character spans of the "
        "matched words in it (highlights), ids, seq, date and score; a message hit also "
        "the observations made from it.",
    )
    def post(self, request: Request) -> Response:
        data = validated(WorkspaceSearchIn, request.data)
        return Response(search_answer(self, data))
