"""The conversation page shows the agent's reasoning steps and tool calls in time order
with the messages, masked as messages are, whoever reads it."""

from __future__ import annotations

import re

import pytest

from core.actors import SYSTEM_ACTOR
from memory.models import Conversation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.reasoning import reasoning_step_record, tool_call_record

EMAIL = "dana.whitfield@example.com"
HX = {"HTTP_HX_REQUEST": "true"}


def _say(conversation: Conversation, *contents: str) -> None:
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=content) for content in contents],
    )


def _reason(conversation: Conversation, thought: str, *, tool: str = "", output: str = ""):
    step = reasoning_step_record(conversation=conversation, actor=SYSTEM_ACTOR, reasoning=thought)
    if tool:
        tool_call_record(
            conversation=None,
            workspace=conversation.workspace,
            actor=SYSTEM_ACTOR,
            tool_name=tool,
            step_id=step.pk,
            input='{"order_id": "ORD-7"}',
            output=output,
            duration_ms=42,
        )
    return step


def _order_of(html: str, *markers: str) -> list[int]:
    return [html.index(marker) for marker in markers]


@pytest.fixture
def reasoned_conversation(workspace) -> Conversation:
    """Messages with the agent's reasoning steps between them, one with a tool call."""
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Order")
    _say(conversation, "Where is my order ORD-7?")
    _reason(conversation, "Look the order up first", tool="order_status", output="delivered")
    _say(conversation, "Thanks!")
    _reason(conversation, "Close the ticket")
    return conversation


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_steps_and_tool_calls_are_shown_in_time_order_with_the_messages(
    login, role, reasoned_conversation
):
    page = login(role).get(f"/conversations/{reasoned_conversation.pk}/").content.decode()

    order = _order_of(
        page,
        "Where is my order ORD-7?",
        "Look the order up first",
        "order_status",
        "delivered",
        "Thanks!",
        "Close the ticket",
    )
    assert order == sorted(order)
    assert "Step 1" in page and "Step 2" in page
    assert "42 ms" in page
    assert len(re.findall(r'class="msg reasoning reasoning-tool_call"', page)) == 1


def test_a_tool_calls_personal_data_is_masked_by_type(login, workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana")
    _say(conversation, "Find my account")
    _reason(
        conversation,
        f"The customer wrote from {EMAIL}",
        tool="crm_lookup",
        output=f'{{"email": "{EMAIL}", "plan": "Gold"}}',
    )

    for role in ("viewer", "admin"):
        page = login(role).get(f"/conversations/{conversation.pk}/").content.decode()
        assert EMAIL not in page
        assert "&lt;EMAIL_ADDRESS&gt;" in page
        assert "Gold" in page


def test_reasoning_before_older_messages_comes_with_them(login, workspace):
    conversation = conversation_create(workspace=workspace)
    _say(conversation, "first question")
    _reason(conversation, "an early thought")
    _say(conversation, *(f"filler {n}" for n in range(60)))
    client = login("viewer")

    first = client.get(f"/conversations/{conversation.pk}/").content.decode()
    older = client.get(f"/conversations/{conversation.pk}/messages/?before=12", **HX)

    assert "an early thought" not in first  # the first page shows the newest 50 messages
    html = older.content.decode()
    assert html.count("an early thought") == 1
    assert html.index("first question") < html.index("an early thought") < html.index("filler 0")


def test_a_conversation_with_reasoning_and_no_messages_shows_it(login, workspace):
    conversation = conversation_create(workspace=workspace)
    _reason(conversation, "Thinking before anyone spoke")

    page = login("viewer").get(f"/conversations/{conversation.pk}/").content.decode()

    assert "No messages yet" in page
    assert "Thinking before anyone spoke" in page


def test_newer_messages_loaded_later_bring_their_reasoning_once(login, workspace):
    conversation = conversation_create(workspace=workspace)
    _say(conversation, *(f"filler {n}" for n in range(60)))
    _reason(conversation, "a late thought")
    _say(conversation, "last question")
    client = login("viewer")

    newer = client.get(f"/conversations/{conversation.pk}/messages/?after=55", **HX)

    html = newer.content.decode()
    assert html.count("a late thought") == 1
    assert html.index("filler 59") < html.index("a late thought") < html.index("last question")
    assert "filler 54" not in html
