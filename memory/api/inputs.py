"""What the agent API and the MCP tools accept: request bodies and query strings as DRF
serializers, and the conversions from validated data to what the services take. The MCP
tools validate their arguments with these same serializers, so a refusal reads the same
on both edges."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

from rest_framework import serializers

from core.api import (
    ClosedSerializer,
    MetadataField,
    ParsedField,
    ReasonIn,
    StrictCharField,
    StrictDateTimeField,
    StrictIntegerField,
    limit_field,
    reason_field,
    text_field,
)
from core.errors import MemdeskError
from core.paging import parse_limit
from core.text import is_blank
from memory.context.budget import parse_max_tokens
from memory.context.tiers import Reidentifies
from memory.models import Conversation, Message, ToolCall
from memory.search.index import SearchEntry
from memory.search.query import MAX_QUERY_CHARS
from memory.search.ranked import MAX_HITS, Filters, Scope
from memory.search.recall import RECALL_DEFAULT, parse_recall, search_wire
from memory.services.escalations import ESCALATION_REASON_MAX_CHARS
from memory.services.messages import SPEAKER_NAME_MAX_CHARS, MessageInput, speaker_name_problem
from memory.services.notes import NOTE_TEXT_MAX_CHARS
from memory.services.workspace_settings import MAX_CONTEXT_MAX_TOKENS
from memory.wire import text_from_content
from tenancy.models import APPROVAL_MODES, ApiKey


class ConversationCreateIn(serializers.Serializer):
    userId = text_field(required=False, allow_null=True, allow_blank=True, max_length=255)
    title = text_field(required=False, allow_blank=True, max_length=255)
    metadata = MetadataField(required=False, allow_null=True)


def speaker_name_checked(value: str) -> str:
    """``value`` with its runs of whitespace (newlines and tabs included) made one space
    and its ends trimmed, or a ValidationError saying why it cannot name a speaker."""
    name = " ".join(value.split())
    problem = speaker_name_problem(name)
    if problem:
        raise serializers.ValidationError(problem)
    return name


class SpeakerNameField(StrictCharField):
    """A speaker's name: text, whitespace collapsed, at most ``SPEAKER_NAME_MAX_CHARS``,
    no control characters. null, absent or blank is no name."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            required=False,
            allow_null=True,
            allow_blank=True,
            trim_whitespace=False,
            max_length=SPEAKER_NAME_MAX_CHARS,
            **kwargs,
        )

    def to_internal_value(self, data: Any) -> str:
        return speaker_name_checked(super().to_internal_value(data))


class MessageIn(serializers.Serializer):
    role = text_field()
    content = text_field(allow_blank=True)
    createdAt = StrictDateTimeField(required=False, allow_null=True)
    metadata = MetadataField(required=False, allow_null=True)
    toolName = text_field(required=False, allow_blank=True, max_length=200)
    toolCallId = text_field(required=False, allow_blank=True, max_length=200)
    name = SpeakerNameField(
        help_text='Who said it, as in OpenAI chat messages ("Maria Lopez", "Tom (agent)"): '
        "people who share a role, a customer and a supervisor or four people in a meeting, "
        "stay apart in memory, and notes say who by name. At most 64 characters once runs "
        "of whitespace are collapsed to one space; no control characters. null, empty or "
        "left out: no name, unless metadata.name (where clients put it before) is a name "
        "by these rules, which is then taken as the name. Reads return it only when set."
    )


class BulkMessagesIn(serializers.Serializer):
    messages = MessageIn(many=True, allow_empty=True)


class SearchIn(serializers.Serializer):
    query = text_field()
    limit = serializers.JSONField(required=False)


class WorkspaceSearchIn(serializers.Serializer):
    query = text_field(max_length=MAX_QUERY_CHARS)
    conversationId = serializers.UUIDField(required=False)
    userId = text_field(required=False, max_length=255)
    tiers = serializers.ListField(
        child=serializers.ChoiceField(choices=SearchEntry.Kind.values),
        required=False,
        min_length=1,
    )
    role = serializers.ChoiceField(choices=Message.Role.values, required=False)
    name = text_field(required=False, max_length=SPEAKER_NAME_MAX_CHARS)
    since = StrictDateTimeField(required=False)
    until = StrictDateTimeField(required=False)
    limit = StrictIntegerField(min_value=1, max_value=MAX_HITS, default=RECALL_DEFAULT)

    def validate_query(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("query must not be empty.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since, until = attrs.get("since"), attrs.get("until")
        if since and until and since >= until:
            raise serializers.ValidationError({"until": "until must be after since."})
        return attrs


class SearchCaller(Protocol):
    """What a search's scope is read from: the REST view or the MCP call."""

    @property
    def api_key(self) -> ApiKey: ...

    def conversation(self, conversation_id: str) -> Conversation: ...

    def reidentifier(self) -> Reidentifies | None: ...


def search_scope(caller: SearchCaller, data: dict[str, Any]) -> tuple[Scope, str]:
    """Where a ``/v1/search`` (or the MCP ``recall`` tool) looks, and its name: the
    conversation named (404 unless in the caller's workspace), else the end user named,
    else the whole workspace, which only a curator key or higher may search: an agent's
    key answers for the people it serves, one at a time."""
    workspace_id = caller.api_key.workspace_id
    end_user = data.get("userId") or None
    if data.get("conversationId"):
        conversation = caller.conversation(str(data["conversationId"]))
        return Scope(workspace_id, (conversation.pk,), end_user), "conversation"
    if end_user is not None:
        return Scope(workspace_id, None, end_user), "user"
    if not caller.api_key.grants(ApiKey.Scope.CURATOR):
        raise MemdeskError(
            "scope_required",
            "An agent key searches one conversation or one end user: send conversationId "
            "or userId. Searching the whole workspace needs a curator key or higher.",
            field="userId",
            status_code=403,
        )
    return Scope(workspace_id), "workspace"


def search_answer(caller: SearchCaller, data: dict[str, Any]) -> dict[str, Any]:
    """A validated ``WorkspaceSearchIn`` body's answer, for ``POST /v1/search`` and the
    MCP ``recall`` tool alike: the hits as the caller may read them, and the scope."""
    scope, scope_name = search_scope(caller, data)
    hits = search_wire(
        query=data["query"],
        scope=scope,
        filters=search_filters(data),
        limit=data["limit"],
        reidentifier=caller.reidentifier(),
    )
    return {"hits": hits, "scope": scope_name}


def search_filters(data: dict[str, Any]) -> Filters:
    """A validated ``WorkspaceSearchIn`` (or MCP ``recall``) body's filters."""
    return Filters(
        kinds=tuple(data.get("tiers") or SearchEntry.Kind.values),
        role=data.get("role") or "",
        speaker=data.get("name") or "",
        since=data.get("since"),
        until=data.get("until"),
    )


NOTE_TAGS_MAX = 50
NOTE_TAG_MAX_CHARS = 100


def note_text_field(**kwargs: Any) -> StrictCharField:
    return text_field(max_length=NOTE_TEXT_MAX_CHARS, **kwargs)


def note_labels_field() -> serializers.ListField:
    """A note's tags or topics: at most ``NOTE_TAGS_MAX``, each at most
    ``NOTE_TAG_MAX_CHARS``."""
    return serializers.ListField(
        child=text_field(max_length=NOTE_TAG_MAX_CHARS), max_length=NOTE_TAGS_MAX, required=False
    )


class ObservationCreateIn(serializers.Serializer):
    text = note_text_field()
    priority = text_field(required=False)
    referencedAt = StrictDateTimeField(required=False, allow_null=True)
    tags = note_labels_field()
    topics = note_labels_field()
    ticketId = text_field(required=False, allow_blank=True, max_length=100)
    sourceMessageIds = serializers.ListField(child=serializers.UUIDField(), required=False)
    reason = reason_field()

    def validate_text(self, value: str) -> str:
        if is_blank(value):
            raise MemdeskError("empty_text", "text must not be empty.", field="text")
        return value


class MemoryUpdateIn(serializers.Serializer):
    reason = reason_field(help_text="Required.")
    content = note_text_field(
        required=False,
        help_text="The new text, under the name reads use. A line sent back as read "
        "(with its marker and dates) is stored without them.",
    )
    text = note_text_field(
        required=False, help_text="The same as content (its earlier name); send one of them."
    )
    priority = text_field(required=False)
    referencedAt = StrictDateTimeField(required=False, allow_null=True)
    tags = note_labels_field()
    version = StrictIntegerField(
        required=False,
        min_value=1,
        help_text="The version the edit was made from (a read's version): when the note "
        "has changed since, 409 version_conflict and nothing changes. Or send If-Match.",
    )


class MemoryDeleteIn(ReasonIn):
    version = StrictIntegerField(
        required=False,
        min_value=1,
        help_text="The version the deletion was decided on: when the note has changed "
        "since, 409 version_conflict and nothing is deleted. Or send If-Match.",
    )


def note_changes(data: dict[str, Any]) -> dict[str, Any]:
    """What an edit of a note (``MemoryUpdateIn``, REST or MCP) asks its service to do:
    the keyword arguments ``observation_update`` and ``reflection_update`` share."""
    return {
        "reason": data.get("reason") or "",
        "text": edited_text(data),
        "priority": data.get("priority"),
        "referenced_at": data.get("referencedAt"),
        "tags": data.get("tags"),
    }


def edited_text(data: dict[str, Any]) -> str | None:
    """The new text of an edit, sent as ``content`` (the name reads use) or ``text``."""
    content, text = data.get("content"), data.get("text")
    if content is None:
        if text is not None and is_blank(text):
            raise MemdeskError("empty_text", "text must not be empty.", field="text")
        return text
    content = text_from_content(content)
    if is_blank(content):
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
    start = StrictIntegerField(required=False, allow_null=True)
    end = StrictIntegerField(required=False, allow_null=True)
    reason = reason_field()


class EscalationCreateIn(serializers.Serializer):
    reason = text_field(
        max_length=ESCALATION_REASON_MAX_CHARS,
        help_text="Why a person should take over (at most 2,000 characters). May hold "
        "personal data: it is never logged nor put in the audit trail.",
    )
    metadata = MetadataField(required=False, allow_null=True)


class WorkspaceSettingsIn(ClosedSerializer):
    fidelity = text_field(
        required=False,
        allow_null=True,
        allow_blank=True,
        help_text="compact, balanced or detailed; null (or empty) follows the server's "
        "default again.",
    )
    contextMaxTokens = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=MAX_CONTEXT_MAX_TOKENS,
        help_text="The token budget of a context read that names no max_tokens; null: none.",
    )
    approval = serializers.ChoiceField(
        required=False,
        choices=APPROVAL_MODES,
        help_text="off, reflections (every new reflection waits for a person) or flagged "
        "(a reflection the checks flag waits).",
    )
    approvalByTag = serializers.DictField(
        required=False,
        child=serializers.ChoiceField(choices=APPROVAL_MODES),
        help_text="A mode per conversation tag, added to the workspace's (vip: reflections).",
    )
    reason = reason_field(help_text="Required: kept in the audit trail.")


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
    query = text_field(required=False, allow_blank=True, max_length=MAX_QUERY_CHARS)
    recall = ParsedField(parse_recall, default=RECALL_DEFAULT)


class ExtractionStatusQuery(serializers.Serializer):
    limit = limit_field(default=200)


class WaitQuery(serializers.Serializer):
    wait = serializers.BooleanField(default=False)


class MetricsQuery(serializers.Serializer):
    error_codes = {"conversationId": "invalid_id"}

    conversationId = serializers.UUIDField(required=False)


def message_input(data: dict[str, Any]) -> MessageInput:
    return MessageInput(
        role=data["role"],
        content=data["content"],
        created_at=data.get("createdAt"),
        metadata=data.get("metadata") or {},
        tool_name=data.get("toolName") or "",
        tool_call_id=data.get("toolCallId") or "",
        name=data.get("name") or "",
    )


class MemoryRevertIn(serializers.Serializer):
    version = StrictIntegerField(min_value=1)
    reason = reason_field()


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
    durationMs = StrictIntegerField(
        required=False, allow_null=True, min_value=0, max_value=2_147_483_647
    )
    error = text_field(required=False, allow_blank=True, allow_null=True)
    metadata = MetadataField(required=False, allow_null=True)


class ReasoningStepListQuery(serializers.Serializer):
    error_codes = {"conversation_id": "invalid_id", "conversationId": "invalid_id"}

    conversation_id = serializers.UUIDField(required=False)
    conversationId = serializers.UUIDField(required=False)


def as_text(value: Any) -> str:
    """A tool's input or output as stored: text as sent, anything else as JSON text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_json(value: Any) -> Any:
    """A tool's input or output as the JSON it holds: the TypeScript client sends the
    arguments twice, as JSON (``arguments``) and as JSON-encoded text (``input``)."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def one_of(
    data: dict[str, Any], *names: str, meaning: Callable[[Any], Any] = lambda value: value
) -> Any:
    """The value of a field clients send under several names (``conversation_id`` or
    ``conversationId``), or None. Two of the names whose values mean different things
    (compared by ``meaning``) are refused: neither can be taken for the other."""
    sent = [(name, data[name]) for name in names if data.get(name) is not None]
    for name, value in sent[1:]:
        if meaning(value) != meaning(sent[0][1]):
            raise MemdeskError(
                "conflicting_fields",
                f"{sent[0][0]} and {name} name the same thing and differ here: send one "
                "of them, or the same value in both.",
                field=name,
            )
    return sent[0][1] if sent else None
