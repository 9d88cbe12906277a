"""/v1/conversations/{id}/observations: the Observer's notes, and their corrections."""

from __future__ import annotations

from typing import ClassVar

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, query_params, request_reason, validated
from memory import api_schema as out
from memory import selectors
from memory.api.base import (
    EDIT_DESCRIPTION,
    HISTORY_DESCRIPTION,
    REASON_PARAMETER,
    REVERT_DESCRIPTION,
    MemoryApi,
)
from memory.api.inputs import (
    MemoryDeleteIn,
    MemoryListQuery,
    MemoryRevertIn,
    MemoryUpdateIn,
    ObservationCreateIn,
    note_changes,
)
from memory.api.note_versions import (
    IF_MATCH_PARAMETER,
    VERSION_ERRORS,
    ExpectedVersion,
    with_etag,
)
from memory.api.presenters import observations_to_wire, versions_to_wire
from memory.models import Observation
from memory.services.observations import (
    observation_create,
    observation_delete,
    observation_revert,
    observation_update,
)
from memory.wire import observation_to_wire
from tenancy.api_base import CURATOR_ERRORS
from tenancy.models import ApiKey


class ObservationListCreateApi(MemoryApi):
    required_scopes: ClassVar[dict[str, str]] = {"POST": ApiKey.Scope.CURATOR}

    @extend_schema(
        operation_id="observations_list",
        parameters=[
            OpenApiParameter("status", str, enum=["active", "reflected"]),
            OpenApiParameter(
                "limit", int, description="1..200: only the newest this many; default all."
            ),
        ],
        responses={200: out.ObservationListOut, **ERRORS},
        description="Oldest first; with limit, the newest that many, still oldest first.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = query_params(MemoryListQuery, request)
        conversation = self.conversation(conversation_id)
        observations = selectors.observation_list(
            conversation=conversation, status=query.get("status") or None, limit=query["limit"]
        )
        return Response(
            {"observations": observations_to_wire(conversation, self.readable(observations))}
        )

    @extend_schema(
        operation_id="observations_create",
        request=ObservationCreateIn,
        responses={201: out.ObservationOut, **CURATOR_ERRORS},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(ObservationCreateIn, request.data)
        observation = observation_create(
            conversation=conversation,
            actor=self.actor(),
            text=data["text"],
            priority=data.get("priority") or "medium",
            referenced_at=data.get("referencedAt"),
            tags=data.get("tags"),
            topics=data.get("topics"),
            ticket_id=data.get("ticketId") or "",
            source_message_ids=data.get("sourceMessageIds"),
            reason=data.get("reason") or "",
        )
        return Response(observation_to_wire(observation, today=timezone.now().date()), status=201)


class _ObservationApi(MemoryApi):
    # One observation: {observation_id} in the route.

    def observation(self, conversation_id: str, observation_id: str) -> Observation:
        return selectors.observation_get(
            conversation=self.conversation(conversation_id), observation_id=observation_id
        )


def _observation_body(observation: Observation) -> dict[str, object]:
    [body] = observations_to_wire(observation.conversation, [observation])
    return body


class ObservationDetailApi(_ObservationApi):
    required_scopes: ClassVar[dict[str, str]] = {
        "PATCH": ApiKey.Scope.CURATOR,
        "DELETE": ApiKey.Scope.CURATOR,
    }

    @extend_schema(operation_id="observations_get", responses={200: out.ObservationOut, **ERRORS})
    def get(self, request: Request, conversation_id: str, observation_id: str) -> Response:
        [readable] = self.readable([self.observation(conversation_id, observation_id)])
        return with_etag(Response(_observation_body(readable)), readable)

    @extend_schema(
        operation_id="observations_update",
        parameters=[IF_MATCH_PARAMETER],
        request=MemoryUpdateIn,
        responses={200: out.ObservationOut, **VERSION_ERRORS, **CURATOR_ERRORS},
        description=EDIT_DESCRIPTION
        + "`reason` is required. Reflections built from the observation stop being served "
        "at once (its current version is served in their place) and are re-derived.",
    )
    def patch(self, request: Request, conversation_id: str, observation_id: str) -> Response:
        observation = self.observation(conversation_id, observation_id)
        data = validated(MemoryUpdateIn, request.data)
        expected = ExpectedVersion.of(request, data.get("version"))
        with expected.checked():
            updated = observation_update(
                observation=observation,
                actor=self.actor(),
                expected_version=expected.version,
                **note_changes(data),
            )
        return with_etag(Response(_observation_body(updated)), updated)

    @extend_schema(
        operation_id="observations_delete",
        parameters=[REASON_PARAMETER, IF_MATCH_PARAMETER],
        request=MemoryDeleteIn,
        responses={204: None, **VERSION_ERRORS, **CURATOR_ERRORS},
        description="Delete the observation; its last version stays in its history. "
        "Reflections built from it stop being served at once and are re-derived from "
        "their other sources.",
    )
    def delete(self, request: Request, conversation_id: str, observation_id: str) -> Response:
        observation = self.observation(conversation_id, observation_id)
        body = validated(MemoryDeleteIn, request.data) if request.data else {}
        expected = ExpectedVersion.of(request, body.get("version"))
        with expected.checked():
            observation_delete(
                observation=observation,
                actor=self.actor(),
                reason=request_reason(request, MemoryDeleteIn),
                expected_version=expected.version,
            )
        return Response(status=204)


class ObservationHistoryApi(_ObservationApi):
    @extend_schema(
        operation_id="observations_history",
        responses={200: out.ObservationHistoryOut, **ERRORS},
        description=HISTORY_DESCRIPTION,
    )
    def get(self, request: Request, conversation_id: str, observation_id: str) -> Response:
        observation = self.observation(conversation_id, observation_id)
        return Response(
            {
                "current": _observation_body(observation),
                "versions": versions_to_wire(
                    selectors.observation_history(observation=observation)
                ),
            }
        )


class ObservationRevertApi(_ObservationApi):
    required_scope = ApiKey.Scope.CURATOR

    @extend_schema(
        operation_id="observations_revert",
        parameters=[IF_MATCH_PARAMETER],
        request=MemoryRevertIn,
        responses={200: out.ObservationOut, 412: VERSION_ERRORS[412], **CURATOR_ERRORS},
        description=REVERT_DESCRIPTION,
    )
    def post(self, request: Request, conversation_id: str, observation_id: str) -> Response:
        observation = self.observation(conversation_id, observation_id)
        data = validated(MemoryRevertIn, request.data)
        expected = ExpectedVersion.of(request)
        with expected.checked():
            reverted = observation_revert(
                observation=observation,
                version=data["version"],
                actor=self.actor(),
                reason=data.get("reason") or "",
                expected_version=expected.version,
            )
        return with_etag(Response(_observation_body(reverted)), reverted)
