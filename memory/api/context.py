"""/v1/conversations/{id}/context: the conversation's memory, ready for a prompt."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request

from core.api import ERRORS, query_params
from governance.ledger.buffer import Reader
from memory import api_schema as out
from memory.api.base import MemoryApi
from memory.api.inputs import ContextQuery
from memory.context.served import context_read
from memory.search.query import MAX_QUERY_CHARS
from memory.search.recall import RECALL_MAX


class ContextGetApi(MemoryApi):
    @extend_schema(
        operation_id="context_get",
        parameters=[
            OpenApiParameter(
                "format",
                str,
                enum=["json", "text", "messages"],
                description="json (default); text: the '## Reflections / ## Observations / "
                "## Recent Messages' block, opened by '## Pinned' when there are pins; "
                "messages: an OpenAI chat messages array.",
            ),
            OpenApiParameter(
                "max_tokens",
                int,
                description="Fit a token budget: drops the oldest recent messages, then the "
                "lowest-priority observations, then the oldest reflections; never splits one. "
                "Pins are never dropped: they count against the budget first.",
            ),
            OpenApiParameter(
                "query",
                {"type": "string", "maxLength": MAX_QUERY_CHARS},
                description="A question: the context ends with a recalled section, the "
                "verbatim turns of this conversation that best answer it (ranked search), "
                "leaving out what the context already holds, in the conversation's order. "
                "Everything before the section is the same for every question: byte for byte "
                "the body without a query, or under max_tokens the memory fitted to three "
                "quarters of the budget (the section keeps the last quarter). json: a "
                "'recalled' object; text: a '## Recalled' section; messages: a last system "
                "message.",
            ),
            OpenApiParameter(
                "recall",
                {"type": "integer", "minimum": 1, "maximum": RECALL_MAX},
                description="How many turns the recalled section may hold: 1 to 50, default 10.",
            ),
        ],
        responses={
            (200, "application/json"): out.CONTEXT_JSON,
            (200, "text/plain"): out.CONTEXT_TEXT,
            304: None,
            **ERRORS,
        },
    )
    def get(self, request: Request, conversation_id: str) -> HttpResponse:
        query = query_params(ContextQuery, request)
        read = context_read(
            workspace_id=self.api_key.workspace_id,
            conversation_id=conversation_id,
            reader=Reader.rest(self.api_key),
            fmt=query.get("format") or "json",
            max_tokens=query["max_tokens"],
            if_none_match=request.headers.get("If-None-Match"),
            load=lambda: self.conversation(conversation_id),
            query=query.get("query") or "",
            recall=query["recall"],
        )
        rendered = read.rendered
        if read.not_modified:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(rendered.body, content_type=rendered.content_type)
        response["ETag"] = rendered.etag
        response["Cache-Control"] = "private, no-cache"
        return response
