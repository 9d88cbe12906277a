"""/v1/conversations/{id}/reflections: the Reflector's syntheses, and their corrections."""

from __future__ import annotations

from typing import ClassVar

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ERRORS, ErrorOut, query_params, request_reason, validated
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
    note_changes,
)
from memory.api.note_versions import (
    IF_MATCH_PARAMETER,
    VERSION_ERRORS,
    ExpectedVersion,
    with_etag,
)
from memory.api.presenters import reflections_to_wire, versions_to_wire
from memory.models import Reflection
from memory.services.reflections import reflection_delete, reflection_revert, reflection_update
from tenancy.api_base import CURATOR_ERRORS
from tenancy.models import ApiKey


class ReflectionListApi(MemoryApi):
    @extend_schema(
        operation_id="reflections_list",
        parameters=[
            OpenApiParameter("status", str, enum=["active", "stale", "superseded"]),
            OpenApiParameter(
                "limit", int, description="1..200: only the newest this many; default all."
            ),
        ],
        responses={200: out.ReflectionListOut, **ERRORS},
        description="Every reflection, or those of one status: active (served), stale (a "
        "source was corrected: its sources are served in its place until the Reflector "
        "re-derives it) or superseded (replaced by that re-derivation). Oldest generation "
        "first; with limit, the newest that many, in the same order.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = query_params(MemoryListQuery, request)
        conversation = self.conversation(conversation_id)
        reflections = selectors.reflection_list(
            conversation=conversation, status=query.get("status") or None, limit=query["limit"]
        )
        return Response({"reflections": reflections_to_wire(self.readable(reflections))})


REFLECTION_CONFLICT = {
    409: OpenApiResponse(
        ErrorOut,
        description="reflection_superseded: the Reflector replaced it; correct its "
        "successor (supersededBy).",
    )
}


class _ReflectionApi(MemoryApi):
    # One reflection: {reflection_id} in the route.

    def reflection(self, conversation_id: str, reflection_id: str) -> Reflection:
        return selectors.reflection_get(
            conversation=self.conversation(conversation_id), reflection_id=reflection_id
        )


def _reflection_body(reflection: Reflection) -> dict[str, object]:
    [body] = reflections_to_wire([reflection])
    return body


class ReflectionDetailApi(_ReflectionApi):
    required_scopes: ClassVar[dict[str, str]] = {
        "PATCH": ApiKey.Scope.CURATOR,
        "DELETE": ApiKey.Scope.CURATOR,
    }

    @extend_schema(operation_id="reflections_get", responses={200: out.ReflectionOut, **ERRORS})
    def get(self, request: Request, conversation_id: str, reflection_id: str) -> Response:
        [readable] = self.readable([self.reflection(conversation_id, reflection_id)])
        return with_etag(Response(_reflection_body(readable)), readable)

    @extend_schema(
        operation_id="reflections_update",
        parameters=[IF_MATCH_PARAMETER],
        request=MemoryUpdateIn,
        responses={
            200: out.ReflectionOut,
            **VERSION_ERRORS,
            **REFLECTION_CONFLICT,
            **CURATOR_ERRORS,
        },
        description=EDIT_DESCRIPTION
        + "`reason` is required. The edit is served at once; a stale reflection that is "
        "edited is active again, and stays as edited until one of its sources changes.",
    )
    def patch(self, request: Request, conversation_id: str, reflection_id: str) -> Response:
        reflection = self.reflection(conversation_id, reflection_id)
        data = validated(MemoryUpdateIn, request.data)
        expected = ExpectedVersion.of(request, data.get("version"))
        with expected.checked():
            updated = reflection_update(
                reflection=reflection,
                actor=self.actor(),
                expected_version=expected.version,
                **note_changes(data),
            )
        return with_etag(Response(_reflection_body(updated)), updated)

    @extend_schema(
        operation_id="reflections_delete",
        parameters=[REASON_PARAMETER, IF_MATCH_PARAMETER],
        request=MemoryDeleteIn,
        responses={204: None, **VERSION_ERRORS, **CURATOR_ERRORS},
        description="Delete the reflection: what it says leaves the context at once. Its "
        "last version stays in its history. Its source observations stay stored and are "
        "not served in its place; the Reflector does not bring it back.",
    )
    def delete(self, request: Request, conversation_id: str, reflection_id: str) -> Response:
        reflection = self.reflection(conversation_id, reflection_id)
        body = validated(MemoryDeleteIn, request.data) if request.data else {}
        expected = ExpectedVersion.of(request, body.get("version"))
        with expected.checked():
            reflection_delete(
                reflection=reflection,
                actor=self.actor(),
                reason=request_reason(request, MemoryDeleteIn),
                expected_version=expected.version,
            )
        return Response(status=204)


class ReflectionHistoryApi(_ReflectionApi):
    @extend_schema(
        operation_id="reflections_history",
        responses={200: out.ReflectionHistoryOut, **ERRORS},
        description=HISTORY_DESCRIPTION,
    )
    def get(self, request: Request, conversation_id: str, reflection_id: str) -> Response:
        reflection = self.reflection(conversation_id, reflection_id)
        return Response(
            {
                "current": _reflection_body(reflection),
                "versions": versions_to_wire(selectors.reflection_history(reflection=reflection)),
            }
        )


class ReflectionRevertApi(_ReflectionApi):
    required_scope = ApiKey.Scope.CURATOR

    @extend_schema(
        operation_id="reflections_revert",
        parameters=[IF_MATCH_PARAMETER],
        request=MemoryRevertIn,
        responses={
            200: out.ReflectionOut,
            412: VERSION_ERRORS[412],
            **REFLECTION_CONFLICT,
            **CURATOR_ERRORS,
        },
        description=REVERT_DESCRIPTION,
    )
    def post(self, request: Request, conversation_id: str, reflection_id: str) -> Response:
        reflection = self.reflection(conversation_id, reflection_id)
        data = validated(MemoryRevertIn, request.data)
        expected = ExpectedVersion.of(request)
        with expected.checked():
            reverted = reflection_revert(
                reflection=reflection,
                version=data["version"],
                actor=self.actor(),
                reason=data.get("reason") or "",
                expected_version=expected.version,
            )
        return with_etag(Response(_reflection_body(reverted)), reverted)
