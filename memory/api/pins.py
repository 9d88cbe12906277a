"""/v1/conversations/{id}/pins: verbatim quotes served first in every context."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ReasonIn, request_reason, validated
from memory import api_schema as out
from memory import selectors
from memory.api.base import MemoryApi
from memory.api.inputs import PinCreateIn
from memory.services.pins import pin_create, pin_delete
from memory.wire import pin_to_wire


class PinListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="pins_list",
        responses={200: out.PinListOut, **ERRORS},
        description="The conversation's pinned quotes, oldest first.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        pins = selectors.pin_list(conversation=self.conversation(conversation_id))
        return Response({"pins": [pin_to_wire(p) for p in pins]})

    @extend_schema(
        operation_id="pins_create",
        request=PinCreateIn,
        responses={201: out.PinOut, **ERRORS},
        description="Pin a verbatim quote of one message of this conversation: all of it, or "
        "the characters start..end (end exclusive). Pins are served first in every context "
        "format, never condensed and never trimmed by max_tokens.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(PinCreateIn, request.data)
        pin = pin_create(
            conversation=conversation,
            actor=self.actor(),
            message_id=data["messageId"],
            start=data.get("start"),
            end=data.get("end"),
            reason=data.get("reason") or "",
        )
        return Response(pin_to_wire(pin), status=201)


class PinDetailApi(MemoryApi):
    @extend_schema(
        operation_id="pins_delete",
        parameters=[OpenApiParameter("reason", str, description="Required (or in the body).")],
        request=ReasonIn,
        responses={204: None, **ERRORS},
        description="Unpin. `reason` is required; the audit event keeps the quote.",
    )
    def delete(self, request: Request, conversation_id: str, pin_id: str) -> Response:
        pin = selectors.pin_get(conversation=self.conversation(conversation_id), pin_id=pin_id)
        reason = request_reason(request)
        pin_delete(pin=pin, actor=self.actor(), reason=reason)
        return Response(status=204)
