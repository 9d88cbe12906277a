"""What each MCP tool does: its arguments' serializer (the REST route's, with the
conversation named in the arguments) and one function that calls the route's service or
selector and answers with the route's body."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from core.api import ParsedField, text_field
from core.paging import parse_body_limit
from governance.ledger.buffer import Reader
from memory import selectors
from memory.api.inputs import (
    BulkMessagesIn,
    MemoryUpdateIn,
    ObservationCreateIn,
    PinCreateIn,
    SearchIn,
    as_text,
    message_input,
    note_changes,
    search_answer,
)
from memory.api.presenters import (
    ConversationPageOut,
    ReasoningStepOut,
    ToolCallOut,
    new_conversation_to_wire,
    observations_to_wire,
    reflections_to_wire,
)
from memory.context.budget import parse_max_tokens
from memory.context.served import context_read
from memory.mcp.callers import McpToolError, ToolCall, ToolResult
from memory.models import Conversation
from memory.search.query import MAX_QUERY_CHARS
from memory.search.ranked import message_search
from memory.search.recall import RECALL_DEFAULT, parse_recall
from memory.services.conversations import conversation_create
from memory.services.messages import messages_append
from memory.services.observations import observation_create, observation_update
from memory.services.pins import pin_create
from memory.services.reasoning import reasoning_step_record, tool_call_record
from memory.services.reflections import reflection_update
from memory.wire import message_to_wire, observation_to_wire, pin_to_wire


class InConversation(serializers.Serializer):
    conversationId = text_field()


class AddMessagesIn(InConversation, BulkMessagesIn):
    pass


class ContextIn(InConversation):
    format = text_field(required=False)
    max_tokens = ParsedField(parse_max_tokens)
    query = text_field(required=False, allow_blank=True, max_length=MAX_QUERY_CHARS)
    recall = ParsedField(parse_recall, default=RECALL_DEFAULT)


class ToolSearchIn(InConversation, SearchIn):
    pass


class StatusIn(InConversation):
    status = text_field(required=False)


class PinFactIn(InConversation, PinCreateIn):
    quote = text_field(required=False)


class AddObservationIn(InConversation, ObservationCreateIn):
    pass


class EditObservationIn(InConversation, MemoryUpdateIn):
    observationId = text_field()


class EditReflectionIn(InConversation, MemoryUpdateIn):
    reflectionId = text_field()


def create_conversation(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = conversation_create(
        workspace=call.api_key.workspace,
        user_id=data.get("userId") or "",
        title=data.get("title") or "",
        metadata=data.get("metadata") or {},
    )
    return new_conversation_to_wire(conversation)


def list_conversations(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    page = selectors.conversation_page(
        workspace=call.api_key.workspace,
        user_id=data.get("userId") or None,
        limit=data["limit"],
        cursor=data.get("cursor") or None,
    )
    return ConversationPageOut(page).data


def add_messages(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    items = [message_input(m) for m in data["messages"]]
    messages = messages_append(conversation=conversation, items=items)
    return {"messages": [message_to_wire(m) for m in messages]}


def get_context(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    read = context_read(
        workspace_id=call.api_key.workspace_id,
        conversation_id=data["conversationId"],
        reader=Reader.mcp(call.api_key),
        fmt=data.get("format") or "text",
        max_tokens=data.get("max_tokens"),
        load=lambda: call.conversation(data["conversationId"]),
        query=data.get("query") or "",
        recall=data.get("recall") or RECALL_DEFAULT,
    )
    body = read.rendered.body.decode()
    if read.rendered.content_type.startswith("application/json"):
        parsed = json.loads(body)
        return parsed if isinstance(parsed, dict) else {"messages": parsed}
    return body


def search_memory(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    limit = parse_body_limit(data.get("limit"), default=10)
    conversation = call.conversation(data["conversationId"])
    hits = message_search(conversation=conversation, query=data["query"], limit=limit)
    call.readable(m for m, _ in hits)
    return {"messages": [message_to_wire(m, score=s) for m, s in hits], "searchType": "text"}


def recall(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    return search_answer(call, data)


def list_observations(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    observations = selectors.observation_list(
        conversation=conversation, status=data.get("status") or None
    )
    return {"observations": observations_to_wire(conversation, call.readable(observations))}


def list_reflections(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    reflections = selectors.reflection_list(
        conversation=conversation, status=data.get("status") or None
    )
    return {"reflections": reflections_to_wire(call.readable(reflections))}


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
    pin = pin_create(
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
    observation = observation_create(
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


def edit_observation(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    observation = selectors.observation_get(
        conversation=conversation, observation_id=data["observationId"]
    )
    updated = observation_update(
        observation=observation,
        actor=call.actor,
        expected_version=data.get("version"),
        **note_changes(data),
    )
    [body] = observations_to_wire(conversation, [updated])
    return body


def edit_reflection(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(data["conversationId"])
    reflection = selectors.reflection_get(
        conversation=conversation, reflection_id=data["reflectionId"]
    )
    updated = reflection_update(
        reflection=reflection,
        actor=call.actor,
        expected_version=data.get("version"),
        **note_changes(data),
    )
    [body] = reflections_to_wire([updated])
    return body


def record_reasoning_step(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(str(data["conversationId"]))
    step = reasoning_step_record(
        conversation=conversation,
        actor=call.actor,
        reasoning=data.get("reasoning") or "",
        action_taken=data.get("actionTaken") or "",
        result=data.get("result") or "",
        metadata=data.get("metadata") or {},
    )
    return ReasoningStepOut(step).data


def record_tool_call(call: ToolCall, data: dict[str, Any]) -> ToolResult:
    conversation = call.conversation(str(data["conversationId"]))
    recorded = tool_call_record(
        conversation=conversation,
        workspace=conversation.workspace,
        actor=call.actor,
        tool_name=data["toolName"],
        step_id=data.get("stepId"),
        input=as_text(data.get("input")),
        output=as_text(data.get("output")),
        status=data.get("status") or "success",
        duration_ms=data.get("durationMs"),
        error=data.get("error") or "",
    )
    return ToolCallOut(recorded).data
