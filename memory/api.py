"""The agent API under /v1. Views parse and check input, call one service or selector,
and shape the answer; the services own every rule."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from django.db.models import OuterRef
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    ADMIN_ERRORS,
    CURATOR_ERRORS,
    ERRORS,
    ApiView,
    ErrorOut,
    MetadataField,
    ParsedField,
    ReasonIn,
    limit_field,
    query_params,
    request_reason,
    text_field,
    validated,
)
from core.errors import MemdeskError
from core.paging import parse_limit, parse_uuid
from governance.gates import (
    conversations_with_pii,
    policy_flags_of,
    reidentifier_for_api,
)
from memory import api_schema as out
from memory import pipeline, selectors, services
from memory.context import (
    Reidentifies,
    context_for_versions,
    parse_max_tokens,
    readable_items,
)
from memory.metrics import context_read_record, pipeline_metrics
from memory.models import (
    AnyRun,
    ApiKey,
    Conversation,
    Message,
    Observation,
    Pin,
    Reflection,
    ToolCall,
)
from memory.wire import (
    conversation_to_wire,
    escalation_to_wire,
    message_to_wire,
    observation_to_wire,
    pin_to_wire,
    reasoning_step_to_wire,
    reflection_to_wire,
    run_to_wire,
    text_from_content,
    tool_call_to_wire,
    workspace_settings_to_wire,
)

# --- input ---------------------------------------------------------------------------------


class ConversationCreateIn(serializers.Serializer):
    userId = text_field(required=False, allow_null=True, allow_blank=True, max_length=255)
    title = text_field(required=False, allow_blank=True, max_length=255)
    metadata = MetadataField(required=False, allow_null=True)


class MessageIn(serializers.Serializer):
    role = text_field()
    content = text_field(allow_blank=True)
    createdAt = serializers.DateTimeField(required=False, allow_null=True)
    metadata = MetadataField(required=False, allow_null=True)
    toolName = text_field(required=False, allow_blank=True, max_length=200)
    toolCallId = text_field(required=False, allow_blank=True, max_length=200)


class BulkMessagesIn(serializers.Serializer):
    messages = MessageIn(many=True, allow_empty=True)


class SearchIn(serializers.Serializer):
    query = text_field()
    limit = serializers.JSONField(required=False)


class ObservationCreateIn(serializers.Serializer):
    text = text_field()
    priority = text_field(required=False)
    referencedAt = serializers.DateTimeField(required=False, allow_null=True)
    tags = serializers.ListField(child=text_field(max_length=100), required=False)
    topics = serializers.ListField(child=text_field(max_length=100), required=False)
    ticketId = text_field(required=False, allow_blank=True, max_length=100)
    sourceMessageIds = serializers.ListField(child=serializers.UUIDField(), required=False)
    reason = text_field(required=False, allow_blank=True)


class MemoryUpdateIn(serializers.Serializer):
    reason = text_field(required=False, allow_blank=True, help_text="Required.")
    content = text_field(
        required=False,
        help_text="The new text, under the name reads use. A line sent back as read "
        "(with its marker and dates) is stored without them.",
    )
    text = text_field(
        required=False, help_text="The same as content (its earlier name); send one of them."
    )
    priority = text_field(required=False)
    referencedAt = serializers.DateTimeField(required=False, allow_null=True)
    tags = serializers.ListField(child=text_field(max_length=100), required=False)


def _edited_text(data: dict[str, Any]) -> str | None:
    """The new text of an edit, sent as ``content`` (the name reads use) or ``text``."""
    content, text = data.get("content"), data.get("text")
    if content is None:
        return text
    content = text_from_content(content)
    if not content.strip():
        raise MemdeskError("empty_text", "content must not be empty.", field="content")
    if text is not None and text.strip() != content.strip():
        raise MemdeskError(
            "conflicting_fields",
            "content and text name the same thing (reads return it as content) and "
            "differ here: send one of them, or the same text in both.",
            field="content",
        )
    return content


class PinCreateIn(serializers.Serializer):
    messageId = serializers.UUIDField()
    start = serializers.IntegerField(required=False, allow_null=True)
    end = serializers.IntegerField(required=False, allow_null=True)
    reason = text_field(required=False, allow_blank=True)


class EscalationCreateIn(serializers.Serializer):
    reason = text_field(
        max_length=services.ESCALATION_REASON_MAX_CHARS,
        help_text="Why a person should take over (at most 2,000 characters). May hold "
        "personal data: it is never logged nor put in the audit trail.",
    )
    metadata = MetadataField(required=False, allow_null=True)


class WorkspaceSettingsIn(serializers.Serializer):
    fidelity = text_field(
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="compact, balanced or detailed; null (or empty) follows the server's "
        "default again.",
    )
    contextMaxTokens = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=services.MAX_CONTEXT_MAX_TOKENS,
        help_text="The token budget of a context read that names no max_tokens; null: none.",
    )
    reason = text_field(
        required=False, allow_blank=True, help_text="Required: kept in the audit trail."
    )


class ConversationListQuery(serializers.Serializer):
    limit = limit_field()
    userId = serializers.CharField(required=False, allow_blank=True)
    # The TypeScript NAMS client sends the filter as user_id, the Python one as userId.
    user_id = serializers.CharField(required=False, allow_blank=True)
    cursor = serializers.CharField(required=False, allow_blank=True)


class MemoryListQuery(serializers.Serializer):
    status = serializers.CharField(required=False, allow_blank=True)
    limit = ParsedField(lambda raw: parse_limit(raw) if raw not in (None, "") else None)


class MessageListQuery(serializers.Serializer):
    limit = limit_field()


class ContextQuery(serializers.Serializer):
    format = serializers.CharField(required=False, allow_blank=True)
    max_tokens = ParsedField(parse_max_tokens)


class ExtractionStatusQuery(serializers.Serializer):
    limit = limit_field(default=200)


class WaitQuery(serializers.Serializer):
    wait = serializers.BooleanField(default=False)


class MetricsQuery(serializers.Serializer):
    error_codes = {"conversationId": "invalid_id"}

    conversationId = serializers.UUIDField(required=False)


def _message_input(data: dict[str, Any]) -> services.MessageInput:
    return services.MessageInput(
        role=data["role"],
        content=data["content"],
        created_at=data.get("createdAt"),
        metadata=data.get("metadata") or {},
        tool_name=data.get("toolName") or "",
        tool_call_id=data.get("toolCallId") or "",
    )


# --- shared plumbing --------------------------------------------------------------------------

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    description="Repeat a write safely: the same key and body replay the first response; "
    "the same key with another body is 409.",
)


MemoryRowT = TypeVar("MemoryRowT", Message, Observation, Reflection, Pin)


class MemoryApi(ApiView):
    # Base of the memory routes: the conversation in the caller's workspace, idempotent
    # writes, and memory as API keys may read it (pseudonyms, or their values when the
    # workspace's redaction policy lets agents see re-identified memory).

    _reidentifier: Reidentifies | None
    _reidentification_allowed: bool
    _redact_at_ingest: bool

    def conversation(self, conversation_id: str) -> Conversation:
        # One query for the conversation, the workspace (authentication comes from the
        # cache without it), which then is the view's workspace too, and what its
        # redaction policy says of re-identification and of redaction at ingest.
        conversation = selectors.conversation_get_with_workspace(
            workspace_id=self.api_key.workspace_id,
            conversation_id=conversation_id,
            annotations=policy_flags_of(OuterRef("workspace_id")),
        )
        if not ApiKey.workspace.is_cached(self.api_key):
            self.api_key.workspace = conversation.workspace
        flags: Any = conversation
        self._reidentification_allowed = bool(flags.agents_see_reidentified)
        self._redact_at_ingest = bool(flags.redact_at_ingest)
        return conversation

    def reidentifier(self) -> Reidentifies | None:
        if not hasattr(self, "_reidentifier"):
            self._reidentifier = reidentifier_for_api(
                workspace_id=self.workspace.pk,
                allowed=getattr(self, "_reidentification_allowed", None),
            )
        return self._reidentifier

    def readable(self, rows: Iterable[MemoryRowT]) -> list[MemoryRowT]:
        return readable_items(self.reidentifier(), rows)

    def idempotent(
        self, request: Request, write: Callable[[], tuple[int, Any, Conversation]]
    ) -> Response:
        key = request.headers.get("Idempotency-Key")
        # Canonical JSON of a 100-message body is not free; only a keyed write needs it.
        fingerprint = (
            services.request_fingerprint(
                method=request.method or "", path=request.path, body=request.data
            )
            if key
            else ""
        )
        status, body, replayed = services.idempotent_write(
            workspace=self.workspace, key=key, fingerprint=fingerprint, write=write
        )
        response = Response(body, status=status)
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response


# --- conversations ----------------------------------------------------------------------------


class ConversationListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="conversations_list",
        parameters=[
            OpenApiParameter("userId", str, description="Only this end user's conversations."),
            OpenApiParameter("user_id", str, description="The same as userId."),
            OpenApiParameter("limit", int, description="1..200, default 50."),
            OpenApiParameter("cursor", str, description="next_cursor of the previous page."),
        ],
        responses={200: out.ConversationPageOut, **ERRORS},
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
        page, next_cursor = selectors.conversation_list(
            workspace=self.workspace,
            user_id=user_id or None,
            limit=query["limit"],
            cursor=query.get("cursor") or None,
        )
        ids = [c.pk for c in page]
        flagged = conversations_with_pii(conversation_ids=ids)
        counts = selectors.message_counts(conversation_ids=ids)
        return Response(
            {
                "conversations": [
                    conversation_to_wire(
                        c, pii_found=c.pk in flagged, message_count=counts.get(c.pk, 0)
                    )
                    for c in page
                ],
                "next_cursor": next_cursor,
            }
        )

    @extend_schema(
        operation_id="conversations_create",
        request=ConversationCreateIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: out.ConversationOut, 409: ErrorOut, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = validated(ConversationCreateIn, request.data)

        def write() -> tuple[int, Any, Conversation]:
            conversation = services.conversation_create(
                workspace=self.workspace,
                user_id=data.get("userId") or "",
                title=data.get("title") or "",
                metadata=data.get("metadata") or {},
            )
            # A new conversation holds nothing yet.
            return (
                201,
                conversation_to_wire(conversation, pii_found=False, message_count=0),
                conversation,
            )

        return self.idempotent(request, write)


class ConversationDetailApi(MemoryApi):
    @extend_schema(operation_id="conversations_get", responses={200: out.ConversationOut, **ERRORS})
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        flagged = conversations_with_pii(conversation_ids=[conversation.pk])
        counts = selectors.message_counts(conversation_ids=[conversation.pk])
        return Response(
            conversation_to_wire(
                conversation,
                pii_found=conversation.pk in flagged,
                message_count=counts.get(conversation.pk, 0),
            )
        )

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
        services.conversation_delete(conversation=conversation, actor=self.actor(), reason=reason)
        return Response(status=204)


# --- messages ---------------------------------------------------------------------------------


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
        item = _message_input(validated(MessageIn, request.data))

        def write() -> tuple[int, Any, Conversation]:
            [message] = services.messages_append(
                conversation=conversation, items=[item], redact_at_ingest=self._redact_at_ingest
            )
            return 201, message_to_wire(message), conversation

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
        items = [_message_input(m) for m in data["messages"]]

        def write() -> tuple[int, Any, Conversation]:
            messages = services.messages_append(
                conversation=conversation, items=items, redact_at_ingest=self._redact_at_ingest
            )
            return 201, {"messages": [message_to_wire(m) for m in messages]}, conversation

        return self.idempotent(request, write)


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
        hits = selectors.message_search(conversation=conversation, query=data["query"], limit=limit)
        self.readable(m for m, _ in hits)
        return Response(
            {"messages": [message_to_wire(m, score=s) for m, s in hits], "searchType": "text"}
        )


# --- memory tiers -------------------------------------------------------------------------------


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
        fmt = query.get("format") or "json"
        # Most reads find their body in a cache: the versions it depends on are enough to
        # find it, and only a miss loads the conversation to render it.
        versions = selectors.context_versions(
            workspace_id=self.api_key.workspace_id, conversation_id=conversation_id
        )
        reidentifier = reidentifier_for_api(
            workspace_id=self.api_key.workspace_id, allowed=versions.agents_see_reidentified
        )
        rendered = context_for_versions(
            versions,
            load=lambda: self.conversation(conversation_id),
            fmt=fmt,
            max_tokens=query["max_tokens"],
            reidentifier=reidentifier,
        )
        not_modified = request.headers.get("If-None-Match") == rendered.etag
        context_read_record(
            conversation_id=versions.conversation_id,
            fmt=fmt,
            memory_digest=rendered.memory_digest,
            not_modified=not_modified,
        )
        if not_modified:
            response = HttpResponse(status=304)
        else:
            response = HttpResponse(rendered.body, content_type=rendered.content_type)
        response["ETag"] = rendered.etag
        response["Cache-Control"] = "private, no-cache"
        return response


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
            {"observations": _observations_to_wire(conversation, self.readable(observations))}
        )

    @extend_schema(
        operation_id="observations_create",
        request=ObservationCreateIn,
        responses={201: out.ObservationOut, **CURATOR_ERRORS},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(ObservationCreateIn, request.data)
        observation = services.observation_create(
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


def _observations_to_wire(
    conversation: Conversation, observations: Iterable[Observation]
) -> list[dict[str, Any]]:
    observations = list(observations)
    deleted = selectors.deleted_source_ids(conversation=conversation, observations=observations)
    today = timezone.now().date()
    return [observation_to_wire(o, today=today, deleted_sources=deleted) for o in observations]


def _reflections_to_wire(
    conversation: Conversation, reflections: Iterable[Reflection]
) -> list[dict[str, Any]]:
    today = timezone.now().date()
    return [reflection_to_wire(r, today=today) for r in reflections]


def _versions_to_wire(changes: list[selectors.MemoryChange]) -> list[dict[str, Any]]:
    return [
        {
            "version": v.version,
            "text": v.text,
            "priority": v.priority,
            "change": v.change,
            "reason": v.reason,
            "changedBy": v.changed_by,
            "changedAt": v.changed_at.isoformat(),
            "diff": v.diff,
        }
        for v in changes
    ]


class MemoryRevertIn(serializers.Serializer):
    version = serializers.IntegerField(min_value=1)
    reason = text_field(required=False, allow_blank=True)


@dataclass(frozen=True)
class MemoryTier:
    """What the observation and the reflection routes do differently: which row the id
    names, which services correct it, and its wire shape. Everything else is shared."""

    get: Callable[[Conversation, str], Any]
    update: Callable[..., Any]
    delete: Callable[..., None]
    revert: Callable[..., Any]
    history: Callable[[Any], list[selectors.MemoryChange]]
    to_wire: Callable[[Conversation, list[Any]], list[dict[str, Any]]]


OBSERVATIONS = MemoryTier(
    get=lambda conversation, pk: selectors.observation_get(
        conversation=conversation, observation_id=pk
    ),
    update=lambda item, **changes: services.observation_update(observation=item, **changes),
    delete=lambda item, **why: services.observation_delete(observation=item, **why),
    revert=lambda item, **to: services.observation_revert(observation=item, **to),
    history=lambda item: selectors.observation_history(observation=item),
    to_wire=_observations_to_wire,
)
REFLECTIONS = MemoryTier(
    get=lambda conversation, pk: selectors.reflection_get(
        conversation=conversation, reflection_id=pk
    ),
    update=lambda item, **changes: services.reflection_update(reflection=item, **changes),
    delete=lambda item, **why: services.reflection_delete(reflection=item, **why),
    revert=lambda item, **to: services.reflection_revert(reflection=item, **to),
    history=lambda item: selectors.reflection_history(reflection=item),
    to_wire=_reflections_to_wire,
)


class _MemoryItemApi(MemoryApi):
    # One observation or reflection: {observation_id} or {reflection_id} in the route,
    # whichever ``tier`` reads. (A comment: a docstring would become the schema's text.)
    tier: ClassVar[MemoryTier]

    def item(self, conversation_id: str, ids: dict[str, str]) -> Any:
        [item_id] = ids.values()
        return self.tier.get(self.conversation(conversation_id), item_id)

    def item_to_wire(self, item: Observation | Reflection) -> dict[str, Any]:
        [body] = self.tier.to_wire(item.conversation, [item])
        return body


class _MemoryDetailApi(_MemoryItemApi):
    required_scopes: ClassVar[dict[str, str]] = {
        "PATCH": ApiKey.Scope.CURATOR,
        "DELETE": ApiKey.Scope.CURATOR,
    }

    def get(self, request: Request, conversation_id: str, **ids: str) -> Response:
        [readable] = self.readable([self.item(conversation_id, ids)])
        return Response(self.item_to_wire(readable))

    def patch(self, request: Request, conversation_id: str, **ids: str) -> Response:
        item = self.item(conversation_id, ids)
        data = validated(MemoryUpdateIn, request.data)
        updated = self.tier.update(
            item,
            actor=self.actor(),
            reason=data.get("reason") or "",
            text=_edited_text(data),
            priority=data.get("priority"),
            referenced_at=data.get("referencedAt"),
            tags=data.get("tags"),
        )
        return Response(self.item_to_wire(updated))

    def delete(self, request: Request, conversation_id: str, **ids: str) -> Response:
        item = self.item(conversation_id, ids)
        self.tier.delete(item, actor=self.actor(), reason=request_reason(request))
        return Response(status=204)


class _MemoryHistoryApi(_MemoryItemApi):
    def get(self, request: Request, conversation_id: str, **ids: str) -> Response:
        item = self.item(conversation_id, ids)
        return Response(
            {
                "current": self.item_to_wire(item),
                "versions": _versions_to_wire(self.tier.history(item)),
            }
        )


class _MemoryRevertApi(_MemoryItemApi):
    required_scope = ApiKey.Scope.CURATOR

    def post(self, request: Request, conversation_id: str, **ids: str) -> Response:
        item = self.item(conversation_id, ids)
        data = validated(MemoryRevertIn, request.data)
        reverted = self.tier.revert(
            item, version=data["version"], actor=self.actor(), reason=data.get("reason") or ""
        )
        return Response(self.item_to_wire(reverted))


EDIT_DESCRIPTION = "Edit the text (`content`, or `text`), priority, event date or tags. "
HISTORY_DESCRIPTION = (
    "Earlier versions, oldest first, each with the reason it changed and a unified diff to "
    "the version after it."
)
REVERT_DESCRIPTION = (
    "Restore an earlier version. `reason` is required; the revert is itself a new version "
    "and is audited."
)
REASON_PARAMETER = OpenApiParameter("reason", str, description="Required (or in the body).")


@extend_schema_view(
    get=extend_schema(
        operation_id="observations_get", responses={200: out.ObservationOut, **ERRORS}
    ),
    patch=extend_schema(
        operation_id="observations_update",
        request=MemoryUpdateIn,
        responses={200: out.ObservationOut, **CURATOR_ERRORS},
        description=EDIT_DESCRIPTION
        + "`reason` is required. Reflections built from the observation stop being served "
        "at once (its current version is served in their place) and are re-derived.",
    ),
    delete=extend_schema(
        operation_id="observations_delete",
        parameters=[REASON_PARAMETER],
        request=ReasonIn,
        responses={204: None, **CURATOR_ERRORS},
        description="Delete the observation; its last version stays in its history. "
        "Reflections built from it stop being served at once and are re-derived from "
        "their other sources.",
    ),
)
class ObservationDetailApi(_MemoryDetailApi):
    tier = OBSERVATIONS


@extend_schema_view(
    get=extend_schema(
        operation_id="observations_history",
        responses={200: out.ObservationHistoryOut, **ERRORS},
        description=HISTORY_DESCRIPTION,
    )
)
class ObservationHistoryApi(_MemoryHistoryApi):
    tier = OBSERVATIONS


@extend_schema_view(
    post=extend_schema(
        operation_id="observations_revert",
        request=MemoryRevertIn,
        responses={200: out.ObservationOut, **CURATOR_ERRORS},
        description=REVERT_DESCRIPTION,
    )
)
class ObservationRevertApi(_MemoryRevertApi):
    tier = OBSERVATIONS


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
        return Response(
            {"reflections": _reflections_to_wire(conversation, self.readable(reflections))}
        )


REFLECTION_CONFLICT = {
    409: OpenApiResponse(
        ErrorOut,
        description="reflection_superseded: the Reflector replaced it; correct its "
        "successor (supersededBy).",
    )
}


@extend_schema_view(
    get=extend_schema(operation_id="reflections_get", responses={200: out.ReflectionOut, **ERRORS}),
    patch=extend_schema(
        operation_id="reflections_update",
        request=MemoryUpdateIn,
        responses={200: out.ReflectionOut, **REFLECTION_CONFLICT, **CURATOR_ERRORS},
        description=EDIT_DESCRIPTION
        + "`reason` is required. The edit is served at once; a stale reflection that is "
        "edited is active again, and stays as edited until one of its sources changes.",
    ),
    delete=extend_schema(
        operation_id="reflections_delete",
        parameters=[REASON_PARAMETER],
        request=ReasonIn,
        responses={204: None, **CURATOR_ERRORS},
        description="Delete the reflection: what it says leaves the context at once. Its "
        "last version stays in its history. Its source observations stay stored and are "
        "not served in its place; the Reflector does not bring it back.",
    ),
)
class ReflectionDetailApi(_MemoryDetailApi):
    tier = REFLECTIONS


@extend_schema_view(
    get=extend_schema(
        operation_id="reflections_history",
        responses={200: out.ReflectionHistoryOut, **ERRORS},
        description=HISTORY_DESCRIPTION,
    )
)
class ReflectionHistoryApi(_MemoryHistoryApi):
    tier = REFLECTIONS


@extend_schema_view(
    post=extend_schema(
        operation_id="reflections_revert",
        request=MemoryRevertIn,
        responses={200: out.ReflectionOut, **REFLECTION_CONFLICT, **CURATOR_ERRORS},
        description=REVERT_DESCRIPTION,
    )
)
class ReflectionRevertApi(_MemoryRevertApi):
    tier = REFLECTIONS


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
        pin = services.pin_create(
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
        services.pin_delete(pin=pin, actor=self.actor(), reason=reason)
        return Response(status=204)


class EscalationListCreateApi(MemoryApi):
    @extend_schema(
        operation_id="escalations_list",
        responses={200: out.EscalationListOut, **ERRORS},
        description="The conversation's escalations to a person, newest first, open and resolved.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        escalations = selectors.escalation_list(conversation=self.conversation(conversation_id))
        return Response({"escalations": [escalation_to_wire(e) for e in escalations]})

    @extend_schema(
        operation_id="escalations_create",
        request=EscalationCreateIn,
        responses={201: out.EscalationOut, **ERRORS},
        description="Fall back to a human: the agent hands this conversation to a person, "
        "saying why. The escalation appears in the dashboard's Escalations list until a "
        "reviewer resolves it, and counts in the metrics' escalations per hour. Audited "
        "(ids only: the reason is treated as message content).",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        data = validated(EscalationCreateIn, request.data)
        escalation = services.escalation_create(
            conversation=conversation,
            actor=self.actor(),
            reason=data["reason"],
            metadata=data.get("metadata"),
        )
        return Response(escalation_to_wire(escalation), status=201)


class ExtractionStatusApi(MemoryApi):
    @extend_schema(
        operation_id="extraction_status",
        parameters=[OpenApiParameter("limit", int, description="Messages listed, 1..200.")],
        responses={200: out.ExtractionStatusOut, **ERRORS},
        description="Per message, newest first: stored (waiting for the Observer's "
        "threshold or an observe request), processing (an Observer run under way will "
        "cover it), completed (an observation covers it) or failed (the last run over it "
        "failed). summary counts every message of the conversation. Only processing is "
        "in flight, so a NAMS client's wait_for_extraction returns once the messages are "
        "stored and no run over them is under way.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        query = query_params(ExtractionStatusQuery, request)
        status = selectors.extraction_status(
            conversation=self.conversation(conversation_id), limit=query["limit"]
        )
        return Response({"messages": status.messages, "summary": status.summary})


# --- the pipeline ---------------------------------------------------------------------------

WAIT_PARAMETER = OpenApiParameter(
    "wait",
    bool,
    description="true: run now and answer with the finished run (200); a run not "
    "finished within MEMDESK_RUN_WAIT_SECONDS is left to the workers and answered like "
    "without it: 202 with the open run, whose Location is the run to poll.",
)


def _run_response(request: Request, run: AnyRun) -> Response:
    if not run.is_open:
        return Response(run_to_wire(run), status=200)
    return Response(run_to_wire(run), status=202, headers={"Location": f"/v1/runs/{run.pk}"})


class _RunNowApi(MemoryApi):
    kind = ""

    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        wait = query_params(WaitQuery, request)["wait"]
        run = pipeline.run_now(kind=self.kind, conversation=conversation, wait=wait)
        return _run_response(request, run)


class ObserveNowApi(_RunNowApi):
    kind = "observe"

    @extend_schema(
        operation_id="conversations_observe",
        request=None,
        parameters=[WAIT_PARAMETER],
        responses={200: out.RunOut, 202: out.RunOut, **ERRORS},
        description="Observe the conversation's unobserved messages now.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


class ReflectNowApi(_RunNowApi):
    kind = "reflect"

    @extend_schema(
        operation_id="conversations_reflect",
        request=None,
        parameters=[WAIT_PARAMETER],
        responses={200: out.RunOut, 202: out.RunOut, **ERRORS},
        description="Condense the conversation's active observations into reflections now.",
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        return super().post(request, conversation_id)


class RunDetailApi(MemoryApi):
    @extend_schema(operation_id="runs_get", responses={200: out.RunOut, **ERRORS})
    def get(self, request: Request, run_id: str) -> Response:
        parse_uuid(run_id, field="runId")
        return Response(run_to_wire(pipeline.run_get(workspace=self.workspace, run_id=run_id)))


class RunCancelApi(MemoryApi):
    # An agent may cancel what it may start.
    @extend_schema(
        operation_id="runs_cancel",
        request=ReasonIn,
        parameters=[OpenApiParameter("reason", str, description="Optional (or in the body).")],
        responses={
            200: out.RunOut,
            409: OpenApiResponse(
                ErrorOut,
                description="run_finished: the run has already succeeded, failed or been "
                "cancelled.",
            ),
            **ERRORS,
        },
        description="Cancel a queued, retrying or running run; audited. A running run's "
        "results are discarded. The conversation can be observed or reflected again at "
        "once on demand; automatic triggers wait a few minutes.",
    )
    def post(self, request: Request, run_id: str) -> Response:
        parse_uuid(run_id, field="runId")
        run = pipeline.run_get(workspace=self.workspace, run_id=run_id)
        run = pipeline.run_cancel(run=run, actor=self.actor(), reason=request_reason(request))
        return Response(run_to_wire(run))


class MetricsApi(MemoryApi):
    @extend_schema(
        operation_id="metrics_get",
        parameters=[OpenApiParameter("conversationId", str, description="One conversation.")],
        responses={200: out.MetricsOut, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        conversation_id = query_params(MetricsQuery, request).get("conversationId")
        conversation = self.conversation(str(conversation_id)) if conversation_id else None
        return Response(pipeline_metrics(workspace=self.workspace, conversation=conversation))


# --- the workspace ----------------------------------------------------------------------------


class WorkspaceSettingsApi(ApiView):
    # Any key reads the settings (an agent may want to know how much detail its memory
    # keeps); only admin keys change them.
    required_scopes: ClassVar[dict[str, str]] = {"PATCH": ApiKey.Scope.ADMIN}

    @extend_schema(
        operation_id="workspace_settings_get",
        responses={200: out.WorkspaceSettingsOut, **ERRORS},
        description="The memory settings in force in the key's workspace: the Observer's "
        "fidelity (and where it comes from), the thresholds and the engine.",
    )
    def get(self, request: Request) -> Response:
        return Response(workspace_settings_to_wire(self.workspace))

    @extend_schema(
        operation_id="workspace_settings_update",
        request=WorkspaceSettingsIn,
        responses={200: out.WorkspaceSettingsOut, **ADMIN_ERRORS},
        description="Choose the Observer's fidelity for this workspace, or null to follow "
        "the server's default; and the default token budget of its served contexts "
        "(contextMaxTokens), or null for none. Admin keys only; `reason` is required and "
        "the change is audited (a change that changes nothing is not). The Observer's next "
        "runs use the fidelity; memory already written stays as it is.",
    )
    def patch(self, request: Request) -> Response:
        data = validated(WorkspaceSettingsIn, request.data)
        unknown = sorted(set(request.data) - set(WorkspaceSettingsIn().fields))
        if unknown:
            raise MemdeskError(
                "invalid_request",
                f"Unknown settings fields: {unknown}; only fidelity and contextMaxTokens "
                "can be changed here.",
                field=unknown[0],
            )
        if "fidelity" not in data and "contextMaxTokens" not in data:
            raise MemdeskError(
                "nothing_to_change",
                "Send fidelity: compact, balanced, detailed, or null to follow the default; "
                "or contextMaxTokens: a token budget, or null for none.",
                field="fidelity",
            )
        workspace = services.workspace_settings_update(
            workspace=self.workspace,
            actor=self.actor(),
            fidelity=data.get("fidelity", services.UNCHANGED),
            context_max_tokens=data.get("contextMaxTokens", services.UNCHANGED),
            reason=data.get("reason") or "",
        )
        return Response(workspace_settings_to_wire(workspace))


# --- reasoning memory (NAMS: steps and tool calls) ----------------------------------------------


class ReasoningStepIn(serializers.Serializer):
    conversationId = serializers.UUIDField(help_text="The conversation the step belongs to.")
    reasoning = text_field(
        required=False, allow_blank=True, allow_null=True, help_text="What the agent thought."
    )
    actionTaken = text_field(
        required=False, allow_blank=True, allow_null=True, help_text="What it did."
    )
    result = text_field(
        required=False, allow_blank=True, allow_null=True, help_text="What came of it."
    )
    metadata = MetadataField(required=False, allow_null=True)


class ToolCallIn(serializers.Serializer):
    toolName = text_field(max_length=200)
    stepId = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="The reasoning step the call belongs to; its conversation is the call's.",
    )
    conversationId = serializers.UUIDField(
        required=False,
        allow_null=True,
        help_text="The conversation, when no stepId is sent (send one of the two).",
    )
    input = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="The arguments: text (the NAMS clients send JSON-encoded text) or JSON, "
        "stored as JSON text.",
    )
    arguments = serializers.JSONField(
        required=False, allow_null=True, help_text="The same as input, for clients that send it."
    )
    output = serializers.JSONField(
        required=False, allow_null=True, help_text="The result: text or JSON, as input."
    )
    result = serializers.JSONField(
        required=False, allow_null=True, help_text="The same as output, for clients that send it."
    )
    status = serializers.ChoiceField(
        choices=ToolCall.Status.values, required=False, allow_null=True
    )
    durationMs = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=2_147_483_647
    )
    error = text_field(required=False, allow_blank=True, allow_null=True)
    metadata = MetadataField(required=False, allow_null=True)


class ReasoningStepListQuery(serializers.Serializer):
    error_codes = {"conversation_id": "invalid_id", "conversationId": "invalid_id"}

    conversation_id = serializers.UUIDField(required=False)
    conversationId = serializers.UUIDField(required=False)


def _as_text(value: Any) -> str:
    """A tool's input or output as stored: text as sent, anything else as JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _first_sent(data: dict[str, Any], *names: str) -> Any:
    return next((data[name] for name in names if data.get(name) is not None), None)


class ReasoningStepCreateApi(MemoryApi):
    wire_fields: ClassVar[dict[str, str]] = {"action_taken": "actionTaken"}

    @extend_schema(
        operation_id="reasoning_steps_create",
        request=ReasoningStepIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: out.ReasoningStepOut, 409: ErrorOut, **ERRORS},
        description="Record one reasoning step of the agent in a conversation. At least one "
        "of reasoning, actionTaken and result must hold text.",
    )
    def post(self, request: Request) -> Response:
        data = validated(ReasoningStepIn, request.data)
        conversation = self.conversation(str(data["conversationId"]))

        def write() -> tuple[int, Any, Conversation]:
            step = services.reasoning_step_record(
                conversation=conversation,
                actor=self.actor(),
                reasoning=data.get("reasoning") or "",
                action_taken=data.get("actionTaken") or "",
                result=data.get("result") or "",
                metadata=data.get("metadata") or {},
            )
            return 201, reasoning_step_to_wire(step), conversation

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
        responses={200: out.ReasoningStepListOut, **ERRORS},
        description="The conversation's reasoning steps, oldest first.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(ReasoningStepListQuery, request)
        conversation_id = query.get("conversation_id") or query.get("conversationId")
        if conversation_id is None:
            raise MemdeskError(
                "conversation_required",
                "Name the conversation: ?conversation_id=<its id>.",
                field="conversation_id",
            )
        conversation = self.conversation(str(conversation_id))
        steps = selectors.reasoning_step_list(conversation=conversation)
        return Response({"steps": [reasoning_step_to_wire(s) for s in steps]})


class ToolCallCreateApi(MemoryApi):
    wire_fields: ClassVar[dict[str, str]] = {"step_id": "stepId", "tool_name": "toolName"}

    @extend_schema(
        operation_id="tool_calls_create",
        request=ToolCallIn,
        parameters=[IDEMPOTENCY_HEADER],
        responses={201: out.ToolCallOut, 409: ErrorOut, **ERRORS},
        description="Record one tool call: under the reasoning step stepId names, or in the "
        "conversation conversationId names. The Observer reads its output as tool output.",
    )
    def post(self, request: Request) -> Response:
        data = validated(ToolCallIn, request.data)
        conversation = None
        if data.get("conversationId") is not None:
            conversation = self.conversation(str(data["conversationId"]))

        def write() -> tuple[int, Any, Conversation]:
            call = services.tool_call_record(
                conversation=conversation,
                workspace=self.workspace,
                actor=self.actor(),
                tool_name=data["toolName"],
                step_id=data.get("stepId"),
                input=_as_text(_first_sent(data, "input", "arguments")),
                output=_as_text(_first_sent(data, "output", "result")),
                status=data.get("status") or ToolCall.Status.SUCCESS,
                duration_ms=data.get("durationMs"),
                error=data.get("error") or "",
                metadata=data.get("metadata") or {},
            )
            return 201, tool_call_to_wire(call), call.conversation

        return self.idempotent(request, write)


class ReasoningTraceApi(MemoryApi):
    @extend_schema(
        operation_id="reasoning_trace_get",
        responses={200: out.ReasoningTraceOut, **ERRORS},
        description="Every reasoning step and tool call of a conversation, oldest first.",
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = self.conversation(conversation_id)
        return Response(
            {
                "conversationId": str(conversation.pk),
                "steps": [
                    reasoning_step_to_wire(s)
                    for s in selectors.reasoning_step_list(conversation=conversation)
                ],
                "toolCalls": [
                    tool_call_to_wire(c)
                    for c in selectors.tool_call_list(conversation=conversation)
                ],
            }
        )
