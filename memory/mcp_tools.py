"""The memory tools that the MCP server offers (``memory/mcp_server.py``).

Each tool does what one REST route does, through the same serializers, services and
selectors, so validation, audit events (the actor is the calling API key), redaction and
re-identification are the REST API's own, and a refusal is the sentence the REST API
would answer. A tool is one ``McpTool`` in ``TOOLS``: its name, the words a model reads
to choose it, its JSON schema, the key scope it needs and the function that runs it.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from django.db import InterfaceError, OperationalError, close_old_connections
from django.utils import timezone
from mcp import types
from rest_framework import exceptions, serializers

from core.actors import Actor, ActorType
from core.api import ParsedField, query_values, text_field, validated
from core.auth import RequiresScope, api_key_authenticate
from core.errors import api_exception_handler
from core.paging import PAGE_LIMIT_MAX, parse_limit
from governance.gates import conversations_with_pii, reidentifier_for_api
from memory import selectors, services
from memory.api import (
    BulkMessagesIn,
    ConversationCreateIn,
    ConversationListQuery,
    ObservationCreateIn,
    PinCreateIn,
    ReasoningStepIn,
    SearchIn,
    ToolCallIn,
    _as_text,
    _message_input,
    _observations_to_wire,
    _reflections_to_wire,
)
from memory.context import (
    FORMATS,
    Reidentifies,
    context_for_conversation,
    parse_max_tokens,
    readable_items,
)
from memory.metrics import context_read_record
from memory.models import ApiKey, Conversation, Message, Observation, Pin, Reflection
from memory.wire import (
    conversation_to_wire,
    message_to_wire,
    observation_to_wire,
    pin_to_wire,
    reasoning_step_to_wire,
    tool_call_to_wire,
)

logger = logging.getLogger(__name__)

RowT = TypeVar("RowT", Message, Observation, Reflection, Pin)

# What a tool answers: a JSON object (sent as structured content and as its JSON text)
# or plain text (the context in text format).
ToolResult = dict[str, Any] | str


class McpToolError(Exception):
    """A refused tool call; the MCP server answers it as a tool error whose text is the
    sentence (the REST API's own for the same refusal)."""


# --- who calls ---------------------------------------------------------------------------------


class McpCaller(Protocol):
    """Who calls the tools: the API key a call acts with, how its audit events name it,
    and what must happen around each call."""

    def api_key(self) -> ApiKey: ...

    def actor(self, api_key: ApiKey) -> Actor: ...

    def around_call(self) -> None: ...


class HttpCaller:
    """A request to ``/mcp``: the key that DRF authenticated, the request's id and
    address, as the REST views record them."""

    def __init__(self, *, api_key: ApiKey, request_id: str, ip_address: str | None) -> None:
        self._api_key = api_key
        self.request_id = request_id
        self.ip_address = ip_address

    def api_key(self) -> ApiKey:
        return self._api_key

    def actor(self, api_key: ApiKey) -> Actor:
        return _key_actor(api_key, request_id=self.request_id, ip_address=self.ip_address)

    def around_call(self) -> None:
        # Inside a request: Django manages the connection.
        return None


class StdioCaller:
    """``manage.py mcp_server``: one process for as long as the client runs, so the key
    is authenticated again on every call (a revoked key stops working within the cache's
    few seconds) and every call has a request id of its own."""

    def __init__(self, *, raw_key: str) -> None:
        self.raw_key = raw_key

    def api_key(self) -> ApiKey:
        return api_key_authenticate(self.raw_key)

    def actor(self, api_key: ApiKey) -> Actor:
        return _key_actor(api_key, request_id=f"mcp-{uuid.uuid4().hex}", ip_address=None)

    def around_call(self) -> None:
        # A long-lived process outside the request cycle: drop a connection the database
        # closed or that outlived CONN_MAX_AGE, as Django does between requests.
        close_old_connections()


def _key_actor(api_key: ApiKey, *, request_id: str, ip_address: str | None) -> Actor:
    return Actor(
        type=ActorType.API_KEY,
        id=str(api_key.pk),
        role=api_key.scope,
        name=api_key.name or api_key.prefix,
        request_id=request_id,
        ip_address=ip_address,
    )


@dataclass
class ToolCall:
    """One call's key, acting identity and workspace, as ``MemoryApi`` holds them for a
    REST request."""

    api_key: ApiKey
    actor: Actor
    _reidentifier: Reidentifies | None = field(default=None, init=False)
    _reidentifier_read: bool = field(default=False, init=False)

    def conversation(self, conversation_id: str) -> Conversation:
        conversation = selectors.conversation_get_with_workspace(
            workspace_id=self.api_key.workspace_id, conversation_id=conversation_id
        )
        if not ApiKey.workspace.is_cached(self.api_key):
            self.api_key.workspace = conversation.workspace
        return conversation

    def reidentifier(self) -> Reidentifies | None:
        if not self._reidentifier_read:
            self._reidentifier = reidentifier_for_api(workspace_id=self.api_key.workspace_id)
            self._reidentifier_read = True
        return self._reidentifier

    def readable(self, rows: Iterable[RowT]) -> list[RowT]:
        return readable_items(self.reidentifier(), rows)


# --- the tools -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class McpTool:
    name: str
    title: str
    description: str
    # JSON schema properties and the required ones; no other argument is accepted.
    properties: dict[str, Any]
    required: tuple[str, ...]
    # Validates the arguments as the REST route validates its body, or its query string
    # (``query``) when the route is a GET, so that a refusal reads the same.
    serializer: type[serializers.Serializer]
    run: Callable[[ToolCall, dict[str, Any]], ToolResult]
    scope: str = ApiKey.Scope.AGENT
    read_only: bool = False
    query: bool = False

    def validated(self, arguments: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(arguments) - set(self.properties))
        if unknown:
            raise McpToolError(
                f"Unknown arguments {unknown}; {self.name} takes {', '.join(self.properties)}."
            )
        missing = [name for name in self.required if name not in arguments]
        if missing:
            raise McpToolError(
                f"Missing arguments {missing}; {self.name} needs {', '.join(self.required)}."
            )
        if self.query:
            return query_values(self.serializer, arguments)
        return validated(self.serializer, arguments)

    def to_mcp(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            inputSchema={
                "type": "object",
                "properties": self.properties,
                "required": list(self.required),
                "additionalProperties": False,
            },
            annotations=types.ToolAnnotations(
                title=self.title,
                readOnlyHint=self.read_only,
                destructiveHint=False,
                idempotentHint=self.read_only,
                openWorldHint=False,
            ),
        )


CONVERSATION_ID = {
    "type": "string",
    "format": "uuid",
    "description": "The conversation's id, as create_conversation or list_conversations "
    "returned it.",
}
MESSAGE = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": ["user", "assistant", "system", "tool"],
            "description": "Who said it.",
        },
        "content": {"type": "string", "description": "What was said, verbatim."},
        "createdAt": {
            "type": "string",
            "format": "date-time",
            "description": "When it was said (ISO 8601); now when left out. Give it when "
            "importing an earlier conversation, so memory is dated by it.",
        },
        "toolName": {"type": "string", "maxLength": 200, "description": "role tool: which tool."},
        "toolCallId": {
            "type": "string",
            "maxLength": 200,
            "description": "role tool: the id of the call it answers.",
        },
        "metadata": {"type": "object", "description": "Your own JSON, stored with it."},
    },
    "required": ["role", "content"],
    "additionalProperties": False,
}


class InConversation(serializers.Serializer):
    conversationId = text_field()


class AddMessagesIn(InConversation, BulkMessagesIn):
    pass


class ContextIn(InConversation):
    format = text_field(required=False)
    max_tokens = ParsedField(parse_max_tokens)


class ToolSearchIn(InConversation, SearchIn):
    pass


class StatusIn(InConversation):
    status = text_field(required=False)


class PinFactIn(InConversation, PinCreateIn):
    quote = text_field(required=False)


class AddObservationIn(InConversation, ObservationCreateIn):
    pass


def create_conversation(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = services.conversation_create(
        workspace=call.api_key.workspace,
        user_id=data.get("userId") or "",
        title=data.get("title") or "",
        metadata=data.get("metadata") or {},
    )
    return conversation_to_wire(conversation, pii_found=False, message_count=0)


def list_conversations(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    page, next_cursor = selectors.conversation_list(
        workspace=call.api_key.workspace,
        user_id=data.get("userId") or None,
        limit=data["limit"],
        cursor=data.get("cursor") or None,
    )
    ids = [c.pk for c in page]
    flagged = conversations_with_pii(conversation_ids=ids)
    counts = selectors.message_counts(conversation_ids=ids)
    return {
        "conversations": [
            conversation_to_wire(c, pii_found=c.pk in flagged, message_count=counts.get(c.pk, 0))
            for c in page
        ],
        "next_cursor": next_cursor,
    }


def add_messages(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    items = [_message_input(m) for m in data["messages"]]
    messages = services.messages_append(conversation=conversation, items=items)
    return {"messages": [message_to_wire(m) for m in messages]}


def get_context(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    fmt = data.get("format") or "text"
    rendered = context_for_conversation(
        conversation=conversation,
        fmt=fmt,
        max_tokens=data.get("max_tokens"),
        reidentifier=call.reidentifier(),
    )
    # Counted with the REST API's reads in the prompt-cache stability.
    context_read_record(
        conversation_id=conversation.pk,
        fmt=fmt,
        memory_digest=rendered.memory_digest,
        not_modified=False,
    )
    body = rendered.body.decode()
    if rendered.content_type.startswith("application/json"):
        parsed = json.loads(body)
        return parsed if isinstance(parsed, dict) else {"messages": parsed}
    return body


def search_memory(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    limit = parse_limit(data.get("limit"), default=10)
    conversation = call.conversation(data["conversationId"])
    hits = selectors.message_search(conversation=conversation, query=data["query"], limit=limit)
    call.readable(m for m, _ in hits)
    return {"messages": [message_to_wire(m, score=s) for m, s in hits], "searchType": "text"}


def list_observations(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    observations = selectors.observation_list(
        conversation=conversation, status=data.get("status") or None
    )
    return {"observations": _observations_to_wire(conversation, call.readable(observations))}


def list_reflections(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    reflections = selectors.reflection_list(
        conversation=conversation, status=data.get("status") or None
    )
    return {"reflections": _reflections_to_wire(conversation, call.readable(reflections))}


def _quote_span(
    conversation: Conversation, message_id: uuid.UUID, quote: str
) -> tuple[int | None, int | None]:
    """Where ``quote`` stands in the message (a model copies words more reliably than it
    counts characters); no span when there is no such message, which ``pin_create``
    then refuses as REST does."""
    message = conversation.messages.filter(pk=message_id).only("content").first()
    if message is None:
        return None, None
    start = message.content.find(quote)
    if start < 0:
        raise McpToolError(
            "quote is not in that message word for word: copy it exactly, or leave it out "
            "to pin the whole message."
        )
    return start, start + len(quote)


def pin_fact(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    start, end = data.get("start"), data.get("end")
    quote = data.get("quote")
    if quote:
        if start is not None or end is not None:
            raise McpToolError("Send quote or start/end, not both.")
        start, end = _quote_span(conversation, data["messageId"], quote)
    pin = services.pin_create(
        conversation=conversation,
        actor=call.actor,
        message_id=data["messageId"],
        start=start,
        end=end,
        reason=data.get("reason") or "",
    )
    return pin_to_wire(pin)


def add_observation(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    observation = services.observation_create(
        conversation=conversation,
        actor=call.actor,
        text=data["text"],
        priority=data.get("priority") or "medium",
        referenced_at=data.get("referencedAt"),
        tags=data.get("tags"),
        topics=data.get("topics"),
        ticket_id=data.get("ticketId") or "",
        source_message_ids=data.get("sourceMessageIds"),
        reason=data.get("reason") or "",
    )
    return observation_to_wire(observation, today=timezone.now().date())


def record_reasoning_step(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(str(data["conversationId"]))
    step = services.reasoning_step_record(
        conversation=conversation,
        actor=call.actor,
        reasoning=data.get("reasoning") or "",
        action_taken=data.get("actionTaken") or "",
        result=data.get("result") or "",
        metadata=data.get("metadata") or {},
    )
    return reasoning_step_to_wire(step)


def record_tool_call(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(str(data["conversationId"]))
    recorded = services.tool_call_record(
        conversation=conversation,
        workspace=conversation.workspace,
        actor=call.actor,
        tool_name=data["toolName"],
        step_id=data.get("stepId"),
        input=_as_text(data.get("input")),
        output=_as_text(data.get("output")),
        status=data.get("status") or "success",
        duration_ms=data.get("durationMs"),
        error=data.get("error") or "",
    )
    return tool_call_to_wire(recorded)


TOOLS: list[McpTool] = [
    McpTool(
        name="create_conversation",
        title="Start a conversation in memory",
        description="Open a new, empty conversation in Memdesk's memory and get its id. "
        "Use it once at the start of a session with an end user, then pass the returned "
        "id to add_messages and get_context. Returns the conversation (id, userId, title, "
        "createdAt).",
        properties={
            "userId": {
                "type": "string",
                "maxLength": 255,
                "description": "Your id for the end user; lets their conversations be "
                "found together (list_conversations).",
            },
            "title": {"type": "string", "maxLength": 255, "description": "A short label."},
            "metadata": {"type": "object", "description": "Your own JSON, stored with it."},
        },
        required=(),
        serializer=ConversationCreateIn,
        run=create_conversation,
    ),
    McpTool(
        name="list_conversations",
        title="List conversations",
        description="List the conversations of this workspace, most recently active "
        "first, optionally of one end user. Use it to find the id of a conversation to "
        "continue. Returns {conversations: [...], next_cursor}; pass next_cursor back as "
        "cursor for the next page.",
        properties={
            "userId": {"type": "string", "description": "Only this end user's."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": PAGE_LIMIT_MAX,
                "default": 50,
                "description": "How many, 1..200.",
            },
            "cursor": {"type": "string", "description": "next_cursor of the previous page."},
        },
        required=(),
        serializer=ConversationListQuery,
        run=list_conversations,
        read_only=True,
        query=True,
    ),
    McpTool(
        name="add_messages",
        title="Record messages",
        description="Append one or more turns (up to 100, in order, all or none) to a "
        "conversation's memory, verbatim. Call it after every exchange with the user, "
        "with what the user said and what you answered (tool results too), so the "
        "Observer can condense them into observations later. Returns the stored messages "
        "with their ids (pin_fact takes one).",
        properties={
            "conversationId": CONVERSATION_ID,
            "messages": {
                "type": "array",
                "items": MESSAGE,
                "minItems": 1,
                "maxItems": services.MAX_BULK_MESSAGES,
                "description": "The turns, oldest first.",
            },
        },
        required=("conversationId", "messages"),
        serializer=AddMessagesIn,
        run=add_messages,
    ),
    McpTool(
        name="get_context",
        title="Read the conversation's memory",
        description="Get what Memdesk remembers of a conversation, ready to read: pinned "
        "quotes, then reflections (the most condensed memory), then observations (dated, "
        "prioritised notes), then the recent messages not yet observed. Call it before "
        "answering when you continue a conversation, or when earlier turns have left "
        "your context. format text (default) is one Markdown block; messages is an "
        "OpenAI chat messages array; json is the tiers as objects. max_tokens fits a "
        "budget by dropping the oldest recent messages first, then low-priority "
        "observations, then the oldest reflections; pins are always kept.",
        properties={
            "conversationId": CONVERSATION_ID,
            "format": {
                "type": "string",
                "enum": list(FORMATS),
                "default": "text",
                "description": "text (a Markdown block), messages (chat messages) or json.",
            },
            "max_tokens": {
                "type": "integer",
                "minimum": 1,
                "description": "The most tokens (cl100k_base) the context may take; none: "
                "the workspace's default budget, if it has one.",
            },
        },
        required=("conversationId",),
        serializer=ContextIn,
        run=get_context,
        read_only=True,
        query=True,
    ),
    McpTool(
        name="search_memory",
        title="Search a conversation",
        description="Search the messages of one conversation for words or a phrase "
        "(case-insensitive; ranked full-text search on PostgreSQL). Use it to find the "
        "exact wording of something said earlier, e.g. an order number, before quoting "
        "or pinning it. Returns {messages: [...], searchType}, best match first, each "
        "message with its id.",
        properties={
            "conversationId": CONVERSATION_ID,
            "query": {"type": "string", "minLength": 1, "description": "What to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": PAGE_LIMIT_MAX,
                "default": 10,
                "description": "How many messages at most, 1..200.",
            },
        },
        required=("conversationId", "query"),
        serializer=ToolSearchIn,
        run=search_memory,
        read_only=True,
    ),
    McpTool(
        name="list_observations",
        title="List observations",
        description="List a conversation's observations: the Observer's dated, "
        "prioritised notes, each with the ids of the messages it came from. Use it to "
        "check what memory holds and where it came from; get_context is the better read "
        "for answering. status active (still served on their own) or reflected "
        "(condensed into a reflection); all when left out.",
        properties={
            "conversationId": CONVERSATION_ID,
            "status": {"type": "string", "enum": ["active", "reflected"]},
        },
        required=("conversationId",),
        serializer=StatusIn,
        run=list_observations,
        read_only=True,
        query=True,
    ),
    McpTool(
        name="list_reflections",
        title="List reflections",
        description="List a conversation's reflections: syntheses of many observations, "
        "each with the ids of its source observations. status active (served), stale (a "
        "source was corrected; its sources are served instead until it is re-derived) or "
        "superseded; all when left out.",
        properties={
            "conversationId": CONVERSATION_ID,
            "status": {"type": "string", "enum": ["active", "stale", "superseded"]},
        },
        required=("conversationId",),
        serializer=StatusIn,
        run=list_reflections,
        read_only=True,
        query=True,
    ),
    McpTool(
        name="pin_fact",
        title="Pin a verbatim fact",
        description="Pin exact wording from one message (a contract term, an address, an "
        "order number, a promise made) so it is served verbatim at the top of every "
        "context, never condensed and never dropped by max_tokens. Use it sparingly, for "
        "what must not be paraphrased. Pin the whole message, or part of it: quote (the "
        "exact text, copied from the message) or start/end character offsets. Returns "
        "the pin.",
        properties={
            "conversationId": CONVERSATION_ID,
            "messageId": {
                "type": "string",
                "format": "uuid",
                "description": "The message's id (from add_messages or search_memory).",
            },
            "quote": {
                "type": "string",
                "minLength": 1,
                "description": "The part to pin, copied exactly from the message.",
            },
            "start": {"type": "integer", "minimum": 0, "description": "First character."},
            "end": {"type": "integer", "minimum": 1, "description": "After the last one."},
            "reason": {"type": "string", "description": "Why; kept in the audit trail."},
        },
        required=("conversationId", "messageId"),
        serializer=PinFactIn,
        run=pin_fact,
    ),
    McpTool(
        name="record_reasoning_step",
        title="Record a reasoning step",
        description="Write down one step of your own reasoning in a conversation: what "
        "you thought (reasoning), what you did (actionTaken) and what came of it (result); "
        "at least one of them. People reviewing the conversation see the steps between "
        "the messages; it is not served back in get_context. Returns the step with its "
        "id (record_tool_call takes it as stepId).",
        properties={
            "conversationId": CONVERSATION_ID,
            "reasoning": {"type": "string", "description": "What you thought."},
            "actionTaken": {"type": "string", "description": "What you did."},
            "result": {"type": "string", "description": "What came of it."},
        },
        required=("conversationId",),
        serializer=ReasoningStepIn,
        run=record_reasoning_step,
    ),
    McpTool(
        name="record_tool_call",
        title="Record a tool call",
        description="Record a call you made to a tool (an order lookup, a refund, a "
        "search): its name, input and output, status and duration. The Observer reads "
        "the output as tool output, so facts it returned (an order's status, a tracking "
        "number) can become observations in memory. Give stepId to file it under a "
        "reasoning step. Returns the call.",
        properties={
            "conversationId": CONVERSATION_ID,
            "toolName": {"type": "string", "minLength": 1, "maxLength": 200},
            "stepId": {
                "type": "string",
                "format": "uuid",
                "description": "The reasoning step it belongs to (record_reasoning_step).",
            },
            "input": {"description": "The arguments: text or JSON."},
            "output": {"description": "What the tool returned: text or JSON."},
            "status": {
                "type": "string",
                "enum": ["pending", "success", "failure", "error", "timeout", "cancelled"],
                "default": "success",
            },
            "durationMs": {"type": "integer", "minimum": 0},
            "error": {"type": "string", "description": "What went wrong, if it failed."},
        },
        required=("conversationId", "toolName"),
        serializer=ToolCallIn,
        run=record_tool_call,
    ),
    McpTool(
        name="add_observation",
        title="Write an observation",
        description="Add a note of your own to a conversation's memory, beside the "
        "Observer's, e.g. a conclusion reached or a preference learnt. Needs a curator "
        "API key. Returns the observation.",
        properties={
            "conversationId": CONVERSATION_ID,
            "text": {"type": "string", "minLength": 1, "description": "The note, one fact."},
            "priority": {
                "type": "string",
                "enum": ["high", "medium", "low", "completed"],
                "default": "medium",
                "description": "high: must attend; low: background; completed: a finished task.",
            },
            "referencedAt": {
                "type": "string",
                "format": "date-time",
                "description": "When the event it talks about happens or happened.",
            },
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 100}},
            "sourceMessageIds": {
                "type": "array",
                "items": {"type": "string", "format": "uuid"},
                "description": "The messages it is drawn from.",
            },
            "reason": {"type": "string", "description": "Why; kept in the audit trail."},
        },
        required=("conversationId", "text"),
        serializer=AddObservationIn,
        run=add_observation,
        scope=ApiKey.Scope.CURATOR,
    ),
]

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


def tools_for(api_key: ApiKey) -> list[McpTool]:
    """The tools this key may call: a model is not shown what it would be refused."""
    return [tool for tool in TOOLS if api_key.grants(tool.scope)]


def error_sentence(error: Exception) -> str:
    """What the REST API would answer for ``error``, in one sentence."""
    if isinstance(error, McpToolError):
        return str(error)
    if isinstance(error, OperationalError | InterfaceError):
        return "The database is unavailable; try again in a few seconds."
    response = api_exception_handler(error, {})
    if response is None:
        raise error
    body = response.data
    return str(body.get("message") or body.get("error"))


def run_tool(caller: McpCaller, name: str, arguments: dict[str, Any]) -> ToolResult:
    """Run one tool call as ``caller``; McpToolError with the REST API's sentence when
    the call is refused."""
    caller.around_call()
    try:
        api_key = caller.api_key()
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            raise McpToolError(
                f"Unknown tool {name!r}; the tools are: "
                f"{', '.join(t.name for t in tools_for(api_key))}."
            )
        if not api_key.grants(tool.scope):
            raise exceptions.PermissionDenied(RequiresScope(tool.scope).message)
        data = tool.validated(arguments)
        return tool.run(ToolCall(api_key=api_key, actor=caller.actor(api_key)), data)
    except McpToolError:
        raise
    except Exception as error:
        try:
            sentence = error_sentence(error)
        except Exception:
            # Only the type: an exception's text can quote memory.
            logger.exception("MCP tool %s failed: %s", name, type(error).__name__)
            raise McpToolError("The server failed; the logs have the details.") from None
        raise McpToolError(sentence) from None
    finally:
        caller.around_call()


def list_tools(caller: McpCaller) -> list[types.Tool]:
    caller.around_call()
    try:
        return [tool.to_mcp() for tool in tools_for(caller.api_key())]
    except Exception as error:
        raise McpToolError(error_sentence(error)) from None
    finally:
        caller.around_call()
