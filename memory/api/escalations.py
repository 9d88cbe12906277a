"""/v1/conversations/{id}/escalations: the agent hands a conversation to a person."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, validated
from memory import selectors
from memory.api.base import MemoryApi
from memory.api.inputs import EscalationCreateIn
from memory.api.presenters import EscalationListOut, EscalationOut
from memory.services.escalations import escalation_create


class EscalationListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="escalations_list",
        responses={200: EscalationListOut, **ERRORS},
        description="The conversation's escalations to a person, newest first, open and resolved.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        escalations = selectors.escalation_list(conversation=self.conversation(conversation_id))
        return Response(EscalationListOut({"escalations": escalations}).data)

    @extend_schema(
        operation_id="escalations_create",
        request=EscalationCreateIn,
        responses={201: EscalationOut, **ERRORS},
        description="Fall back to a human: the agent hands this conversation to a person, "
        "saying why. The escalation appears in the dashboard's Escalations list until a "
        "reviewer resolves it, and counts in the metrics' escalations per hour. Audited "
        "(ids only: the reason is treated as message content).",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(EscalationCreateIn, request.data)
        escalation = escalation_create(
            conversation=conversation,
            actor=self.actor(),
            reason=data["reason"],
            metadata=data.get("metadata"),
        )
        return Response(EscalationOut(escalation).data, status=201)
