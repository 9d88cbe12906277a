"""The memory tools that the MCP server offers (``memory/mcp/server.py``).

Each tool does what one REST route does, through the same serializers, services and
selectors, so validation, audit events (the actor is the calling API key), redaction and
re-identification are the REST API's own, and a refusal is the sentence the REST API
would answer. A tool is one ``McpTool`` in ``TOOLS``: its name, the words a model reads
to choose it, its JSON schema, the key scope it needs and the function that runs it
(``memory/mcp/handlers.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import InterfaceError, OperationalError
from mcp import types
from rest_framework import exceptions, serializers

from core.api import query_values, validated
from core.errors import api_exception_handler
from core.paging import PAGE_LIMIT_MAX
from memory.api.inputs import (
    ConversationCreateIn,
    ConversationListQuery,
    ReasoningStepIn,
    ToolCallIn,
    WorkspaceSearchIn,
)
from memory.context.rendering import FORMATS
from memory.mcp.callers import McpCaller, McpToolError, ToolCall, ToolResult
from memory.mcp.handlers import (
    AddMessagesIn,
    AddObservationIn,
    ContextIn,
    EditObservationIn,
    EditReflectionIn,
    PinFactIn,
    StatusIn,
    ToolSearchIn,
    add_messages,
    add_observation,
    create_conversation,
    edit_observation,
    edit_reflection,
    get_context,
    list_conversations,
    list_observations,
    list_reflections,
    pin_fact,
    recall,
    record_reasoning_step,
    record_tool_call,
    search_memory,
)
from memory.search.ranked import MAX_HITS as RECALL_MAX_HITS
from memory.search.recall import RECALL_MAX
from memory.services.messages import MAX_BULK_MESSAGES, SPEAKER_NAME_MAX_CHARS
from tenancy.auth import RequiresScope
from tenancy.models import ApiKey

logger = logging.getLogger(__name__)


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
        "name": {
            "type": ["string", "null"],
            "maxLength": SPEAKER_NAME_MAX_CHARS,
            "description": 'The speaker\'s name ("Maria Lopez", "Tom (agent)"), so that '
            "people who share a role (a customer and a supervisor, several people in a "
            "meeting) stay apart and notes say who by name. No control characters.",
        },
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


NOTE_ID = {"type": "string", "format": "uuid", "description": "Its id, as listed."}
# What a correction of an observation or a reflection takes, as PATCH takes it.
NOTE_CORRECTION = {
    "content": {"type": "string", "minLength": 1, "description": "The corrected text."},
    "priority": {"type": "string", "enum": ["high", "medium", "low", "completed"]},
    "referencedAt": {
        "type": "string",
        "format": "date-time",
        "description": "When the event it talks about happens or happened.",
    },
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 100}},
    "version": {
        "type": "integer",
        "minimum": 1,
        "description": "The version you read: the correction is made only if it is still "
        "the current one.",
    },
    "reason": {"type": "string", "minLength": 1, "description": "Why; kept in the audit trail."},
}


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
                "maxItems": MAX_BULK_MESSAGES,
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
            "query": {
                "type": "string",
                "description": "The question you are about to answer: the context then ends "
                "with the verbatim turns of this conversation that best answer it (a "
                "'## Recalled' section), the memory before it the same for every question.",
            },
            "recall": {
                "type": "integer",
                "minimum": 1,
                "maximum": RECALL_MAX,
                "default": 10,
                "description": "How many recalled turns at most.",
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
        description='Search the messages of one conversation for words, a "phrase" or a '
        "prefix* (ranked: best answer to the question first). Use it to find the "
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
        name="recall",
        title="Recall what memory compressed away",
        description="Find the exact records behind memory: messages, observations, "
        "reflections and pins that best answer a question, ranked, in one conversation "
        "(conversationId) or across one end user's conversations (userId); the whole "
        "workspace needs a curator key. Use it when get_context's memory lacks a detail "
        "(a number, a name, the exact words). Returns {hits: [{tier, id, conversationId, "
        "seq, role, name, at, snippet, highlights, score, observationIds}], scope}.",
        properties={
            "query": {"type": "string", "minLength": 1, "description": "The question."},
            "conversationId": CONVERSATION_ID,
            "userId": {"type": "string", "description": "The end user whose memory to search."},
            "tiers": {
                "type": "array",
                "items": {
                    "type": "string",
                    "enum": ["message", "observation", "reflection", "pin"],
                },
                "description": "Only these tiers; all when left out.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": RECALL_MAX_HITS,
                "default": 10,
                "description": f"How many hits at most, 1..{RECALL_MAX_HITS}.",
            },
        },
        required=("query",),
        serializer=WorkspaceSearchIn,
        run=recall,
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
    McpTool(
        name="edit_observation",
        title="Correct an observation",
        description="Correct an observation's text, priority, event date or tags, with a "
        "reason; the version it replaces is kept in its history. Needs a curator API key. "
        "Pass the version you read (list_observations) as version: if the observation "
        "was changed since, nothing is changed and the error says its version now; read "
        "it again before you correct it. Returns the observation.",
        properties={
            "conversationId": CONVERSATION_ID,
            "observationId": NOTE_ID,
            **NOTE_CORRECTION,
        },
        required=("conversationId", "observationId", "reason"),
        serializer=EditObservationIn,
        run=edit_observation,
        scope=ApiKey.Scope.CURATOR,
    ),
    McpTool(
        name="edit_reflection",
        title="Correct a reflection",
        description="Correct a reflection's text, priority, event date or tags, with a "
        "reason, as edit_observation does for an observation; it is served as you wrote "
        "it. Needs a curator API key. Pass the version you read (list_reflections) as "
        "version: if the reflection was changed since, nothing is changed and the error "
        "says its version now. Returns the reflection.",
        properties={
            "conversationId": CONVERSATION_ID,
            "reflectionId": NOTE_ID,
            **NOTE_CORRECTION,
        },
        required=("conversationId", "reflectionId", "reason"),
        serializer=EditReflectionIn,
        run=edit_reflection,
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
