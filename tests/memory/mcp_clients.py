"""The real ``mcp`` client, over stdio (``manage.py mcp_server`` as a subprocess on the
test database) and over streamable HTTP (pytest-django's live server)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.memory.celery_workers import test_database_url

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
Action = Callable[[ClientSession], Awaitable[T]]


def server_environment(var_dir: Path, api_key: str | None) -> dict[str, str]:
    """The environment of ``manage.py mcp_server`` on this test's database."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": test_database_url(),
        # Appends queue their scan after commit; no worker runs here.
        "CELERY_BROKER_URL": "memory://",
        "MEMDESK_VAR_DIR": str(var_dir),
        "SECRET_KEY": "test-mcp-server",
    }
    env.pop("MEMDESK_API_KEY", None)
    if api_key is not None:
        env["MEMDESK_API_KEY"] = api_key
    return env


async def _over_stdio(env: dict[str, str], action: Action[T]) -> T:
    params = StdioServerParameters(
        command=sys.executable, args=["manage.py", "mcp_server"], env=env, cwd=str(ROOT)
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await action(session)


def over_stdio(env: dict[str, str], action: Action[T]) -> T:
    return asyncio.run(asyncio.wait_for(_over_stdio(env, action), timeout=120))


async def _over_http(url: str, api_key: str, action: Action[T]) -> T:
    headers = {"Authorization": f"Bearer {api_key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await action(session)


def over_http(url: str, api_key: str, action: Action[T]) -> T:
    return asyncio.run(asyncio.wait_for(_over_http(url, api_key, action), timeout=60))


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """A successful tool call's JSON answer."""
    assert not result.isError, result.content
    assert result.structuredContent is not None
    # The same JSON as text, for clients that read only the content.
    [content] = result.content
    assert isinstance(content, types.TextContent)
    assert json.loads(content.text) == result.structuredContent
    return result.structuredContent


def text_of(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


ORDER_LINE = "Please ship order A-1234 to 5 Elm Street; I need it by Friday."


async def agent_session(session: ClientSession) -> dict[str, Any]:
    """What an agent does with its memory: start a conversation, record turns, read the
    context back in both formats, search, pin the exact wording. Every answer, by step."""
    tools = await session.list_tools()
    created = structured(await session.call_tool("create_conversation", {"userId": "dana"}))
    conversation_id = created["id"]
    added = structured(
        await session.call_tool(
            "add_messages",
            {
                "conversationId": conversation_id,
                "messages": [
                    {"role": "user", "content": ORDER_LINE},
                    {"role": "assistant", "content": "Noted: A-1234 goes to 5 Elm Street."},
                ],
            },
        )
    )
    one = structured(
        await session.call_tool(
            "add_messages",
            {
                "conversationId": conversation_id,
                "messages": [{"role": "user", "content": "Thanks!"}],
            },
        )
    )
    search = structured(
        await session.call_tool(
            "search_memory", {"conversationId": conversation_id, "query": "a-1234"}
        )
    )
    pin = structured(
        await session.call_tool(
            "pin_fact",
            {
                "conversationId": conversation_id,
                "messageId": added["messages"][0]["id"],
                "quote": "order A-1234 to 5 Elm Street",
                "reason": "the shipping address must stay exact",
            },
        )
    )
    text = text_of(await session.call_tool("get_context", {"conversationId": conversation_id}))
    budget = structured(
        await session.call_tool(
            "get_context",
            {"conversationId": conversation_id, "format": "messages", "max_tokens": 30},
        )
    )
    observations = structured(
        await session.call_tool("list_observations", {"conversationId": conversation_id})
    )
    reflections = structured(
        await session.call_tool("list_reflections", {"conversationId": conversation_id})
    )
    refused = await session.call_tool(
        "add_observation", {"conversationId": conversation_id, "text": "Ships to Elm St."}
    )
    return {
        "tools": [tool.name for tool in tools.tools],
        "tool_list": tools.tools,
        "conversation": created,
        "added": added,
        "one": one,
        "search": search,
        "pin": pin,
        "text": text,
        "budget": budget,
        "observations": observations,
        "reflections": reflections,
        "refused": refused,
    }


AGENT_TOOLS = [
    "create_conversation",
    "list_conversations",
    "add_messages",
    "get_context",
    "search_memory",
    "recall",
    "list_observations",
    "list_reflections",
    "pin_fact",
    "record_reasoning_step",
    "record_tool_call",
]
CURATOR_NEEDED = (
    "This route needs a curator API key or a higher scope "
    "(create one with create_api_key --scope curator)."
)


def assert_agent_session_recorded(answers: dict[str, Any], api_key: Any) -> None:
    """The agent session's answers, and what it left in the database: its rows, in the
    key's workspace, and its audit events, by the key."""
    from governance.models import AuditEvent
    from memory.models import Conversation, Observation, Pin

    assert answers["tools"] == AGENT_TOOLS
    for tool in answers["tool_list"]:
        assert len(tool.description) > 80, tool.name
        assert tool.inputSchema["type"] == "object"
        assert tool.inputSchema["additionalProperties"] is False

    conversation = Conversation.objects.get(pk=answers["conversation"]["id"])
    assert conversation.workspace_id == api_key.workspace_id
    assert conversation.user_id == "dana"
    contents = list(conversation.messages.order_by("seq").values_list("content", flat=True))
    assert contents == [ORDER_LINE, "Noted: A-1234 goes to 5 Elm Street.", "Thanks!"]
    assert [m["seq"] for m in answers["added"]["messages"]] == [1, 2]
    assert [m["seq"] for m in answers["one"]["messages"]] == [3]

    hits = [m["content"] for m in answers["search"]["messages"]]
    assert set(hits) == {ORDER_LINE, "Noted: A-1234 goes to 5 Elm Street."}

    pin = Pin.objects.get(pk=answers["pin"]["id"])
    assert pin.text == "order A-1234 to 5 Elm Street"
    event = AuditEvent.objects.get(action="pin.create", target_id=str(pin.pk))
    assert (event.actor_type, event.actor_id, event.actor_role) == (
        "api_key",
        str(api_key.pk),
        api_key.scope,
    )
    assert event.reason == "the shipping address must stay exact"

    text = answers["text"]
    assert text.startswith("## Pinned")
    assert "order A-1234 to 5 Elm Street" in text
    assert "## Recent Messages" in text
    assert "[user] Thanks!" in text

    # 30 tokens: the pin, and only as many of the newest turns as fit.
    budget = answers["budget"]["messages"]
    assert budget[0]["role"] == "system"
    assert "order A-1234 to 5 Elm Street" in budget[0]["content"]
    turns = [m["content"] for m in budget[1:]]
    assert turns and turns[-1] == "Thanks!"
    assert ORDER_LINE not in turns

    assert answers["observations"] == {"observations": []}
    assert answers["reflections"] == {"reflections": []}

    refused = answers["refused"]
    assert refused.isError
    assert text_of(refused) == CURATOR_NEEDED
    assert not Observation.objects.filter(conversation=conversation).exists()
