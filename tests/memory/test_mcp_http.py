"""The MCP server's streamable HTTP transport at /mcp, through the real ``mcp`` client
against pytest-django's live server (a real socket), checked against the database and
against what the REST API answers for the same request."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest
from mcp import ClientSession

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, ContextRead
from memory.models import Observation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.models import ApiKey
from tenancy.services import api_key_create, api_key_revoke
from tests.governance.builders import set_policy
from tests.memory.mcp_clients import (
    AGENT_TOOLS,
    agent_session,
    assert_agent_session_recorded,
    over_http,
    structured,
    text_of,
)

pytestmark = pytest.mark.django_db(transaction=True)

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_ACCEPT = "application/json, text/event-stream"
EMAIL = "dana.pierce@example.com"


def _key(workspace: Any, scope: str = "agent") -> tuple[ApiKey, str]:
    return api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name=f"mcp-{scope}", scope=scope)


@pytest.fixture
def mcp_url(live_server) -> str:
    return f"{live_server.url}/mcp"


def test_an_agent_keeps_its_memory_over_http(workspace, mcp_url):
    api_key, raw_key = _key(workspace)
    answers = over_http(mcp_url, raw_key, agent_session)
    assert_agent_session_recorded(answers, api_key)
    # Over HTTP, each event names the request that wrote it and where it came from.
    event = AuditEvent.objects.get(action="pin.create")
    assert event.request_id and event.ip_address == "127.0.0.1"


def test_a_curator_key_sees_and_uses_the_curator_tools(workspace, mcp_url):
    api_key, raw_key = _key(workspace, "curator")
    conversation = conversation_create(workspace=workspace)

    async def session(client: ClientSession) -> tuple[list[str], dict[str, Any]]:
        tools = await client.list_tools()
        added = await client.call_tool(
            "add_observation",
            {
                "conversationId": str(conversation.pk),
                "text": "User prefers e-mail over phone calls.",
                "priority": "high",
                "reason": "said on the call",
            },
        )
        return [t.name for t in tools.tools], structured(added)

    names, observation = over_http(mcp_url, raw_key, session)
    assert names == [*AGENT_TOOLS, "add_observation", "edit_observation", "edit_reflection"]
    stored = Observation.objects.get(pk=observation["id"])
    assert stored.text == "User prefers e-mail over phone calls."
    assert stored.priority == "high"
    event = AuditEvent.objects.get(action="observation.create", target_id=str(stored.pk))
    assert (event.actor_id, event.actor_role, event.reason) == (
        str(api_key.pk),
        "curator",
        "said on the call",
    )


def test_a_note_added_over_mcp_goes_through_the_redaction_gate(workspace, mcp_url):
    """The MCP door stores a typed note as the REST door does: pseudonymised, so the
    agent's later context and the pages never hold the typed values (issue 24)."""
    _, raw_key = _key(workspace, "curator")
    conversation = conversation_create(workspace=workspace)

    async def session(client: ClientSession) -> dict[str, Any]:
        added = await client.call_tool(
            "add_observation",
            {
                "conversationId": str(conversation.pk),
                "text": "Joyce Wu (joyce.wu@example.com) has a promo code.",
                "reason": "from the call",
            },
        )
        return structured(added)

    observation = over_http(mcp_url, raw_key, session)
    stored = Observation.objects.get(pk=observation["id"]).text
    assert "has a promo code" in stored
    assert "Joyce" not in stored and "joyce.wu@example.com" not in stored
    assert "Joyce" not in str(observation)


def _refusal_cases(rest: httpx.Client, c: str, elsewhere: str) -> list[tuple[str, dict, Any]]:
    """(tool, arguments, the REST API's answer to the same request)."""
    bad_message = [{"role": "user"}]
    bad_name = [{"role": "user", "content": "Hi", "name": "Maria\x07"}]
    too_many = [{"role": "user", "content": "x"}] * 101
    no_such_message = "7a1f1f5e-0000-4000-8000-000000000000"
    return [
        (
            "get_context",
            {"conversationId": elsewhere},
            rest.get(f"/conversations/{elsewhere}/context"),
        ),
        (
            "get_context",
            {"conversationId": "not-an-id"},
            rest.get("/conversations/not-an-id/context"),
        ),
        (
            "get_context",
            {"conversationId": c, "format": "yaml"},
            rest.get(f"/conversations/{c}/context?format=yaml"),
        ),
        (
            "get_context",
            {"conversationId": c, "max_tokens": "none"},
            rest.get(f"/conversations/{c}/context?max_tokens=none"),
        ),
        (
            "add_messages",
            {"conversationId": c, "messages": bad_message},
            rest.post(f"/conversations/{c}/messages/bulk", json={"messages": bad_message}),
        ),
        (
            "add_messages",
            {"conversationId": c, "messages": bad_name},
            rest.post(f"/conversations/{c}/messages/bulk", json={"messages": bad_name}),
        ),
        (
            "add_messages",
            {"conversationId": c, "messages": too_many},
            rest.post(f"/conversations/{c}/messages/bulk", json={"messages": too_many}),
        ),
        (
            "search_memory",
            {"conversationId": c, "query": "x", "limit": 500},
            rest.post(f"/conversations/{c}/search", json={"query": "x", "limit": 500}),
        ),
        (
            "search_memory",
            {"conversationId": c, "query": "x", "limit": "5"},
            rest.post(f"/conversations/{c}/search", json={"query": "x", "limit": "5"}),
        ),
        (
            "recall",
            {"query": "refund"},
            rest.post("/search", json={"query": "refund"}),
        ),
        (
            "pin_fact",
            {"conversationId": c, "messageId": no_such_message},
            rest.post(f"/conversations/{c}/pins", json={"messageId": no_such_message}),
        ),
    ]


def test_refusals_are_the_rest_apis_sentences(workspace, other_workspace, mcp_url, live_server):
    _, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace)
    elsewhere = conversation_create(workspace=other_workspace)
    # Closed before the MCP calls: a kept-alive connection would hold a server thread,
    # and its database connection, past the test.
    with httpx.Client(
        base_url=f"{live_server.url}/v1", headers={"Authorization": f"Bearer {raw_key}"}
    ) as rest:
        cases = _refusal_cases(rest, str(conversation.pk), str(elsewhere.pk))

    async def session(client: ClientSession) -> list[tuple[bool, str]]:
        answers = []
        for name, arguments, _ in cases:
            result = await client.call_tool(name, arguments)
            answers.append((result.isError, text_of(result)))
        return answers

    answers = over_http(mcp_url, raw_key, session)
    for (name, _, rest_response), (is_error, sentence) in zip(cases, answers, strict=True):
        assert 400 <= rest_response.status_code < 500, (name, rest_response.text)
        assert is_error, (name, sentence)
        assert sentence == rest_response.json()["message"], name
    assert not conversation.messages.exists()


def test_add_messages_keeps_each_speakers_name(workspace, mcp_url):
    _, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace)
    turns = [
        {"role": "user", "content": "Shall we ship on Monday?", "name": "Ana  Kim"},
        {"role": "user", "content": "Only if QA signs off.", "name": "Ben Ode"},
        {"role": "assistant", "content": "I will book the QA slot.", "name": None},
    ]

    async def session(client: ClientSession) -> tuple[dict[str, Any], str]:
        arguments = {"conversationId": str(conversation.pk), "messages": turns}
        added = structured(await client.call_tool("add_messages", arguments))
        context = await client.call_tool("get_context", {"conversationId": str(conversation.pk)})
        return added, text_of(context)

    added, context = over_http(mcp_url, raw_key, session)
    assert [m.get("name") for m in added["messages"]] == ["Ana Kim", "Ben Ode", None]
    stored = conversation.messages.order_by("seq").values_list("name", flat=True)
    assert list(stored) == ["Ana Kim", "Ben Ode", ""]
    assert context == (
        "## Recent Messages\n[Ana Kim (user)] Shall we ship on Monday?\n"
        "[Ben Ode (user)] Only if QA signs off.\n[assistant] I will book the QA slot."
    )


def test_a_model_is_told_what_it_sent_wrong(workspace, mcp_url):
    _, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace)
    [message] = messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="My PIN is 4321.")],
    )

    async def session(client: ClientSession) -> list[str]:
        calls = [
            ("forget_everything", {}),
            ("get_context", {"conversation_id": str(conversation.pk)}),
            ("search_memory", {"conversationId": str(conversation.pk)}),
            (
                "pin_fact",
                {
                    "conversationId": str(conversation.pk),
                    "messageId": str(message.pk),
                    "quote": "PIN is 1234",
                },
            ),
        ]
        return [text_of(await client.call_tool(name, arguments)) for name, arguments in calls]

    unknown_tool, unknown_argument, missing, misquoted = over_http(mcp_url, raw_key, session)
    assert unknown_tool.startswith("Unknown tool 'forget_everything'; the tools are: ")
    assert unknown_argument == (
        "Unknown arguments ['conversation_id']; get_context takes conversationId, format, "
        "max_tokens, query, recall."
    )
    assert missing == "Missing arguments ['query']; search_memory needs conversationId, query."
    assert misquoted.startswith("quote is not in that message word for word")
    assert not conversation.pins.exists()


def test_it_refuses_requests_without_a_usable_key(workspace, mcp_url):
    api_key, raw_key = _key(workspace)
    body = json.dumps(INITIALIZE)
    headers = {"Accept": MCP_ACCEPT, "Content-Type": "application/json"}

    missing = httpx.post(mcp_url, content=body, headers=headers)
    unknown = httpx.post(
        mcp_url, content=body, headers={**headers, "Authorization": "Bearer md_nope"}
    )
    api_key_revoke(api_key=api_key, actor=SYSTEM_ACTOR)
    revoked = httpx.post(
        mcp_url, content=body, headers={**headers, "Authorization": f"Bearer {raw_key}"}
    )

    assert missing.status_code == 401
    assert missing.json()["message"] == "Send the API key as 'Authorization: Bearer <key>'."
    assert unknown.status_code == 401
    assert unknown.json()["message"] == "Unknown API key."
    assert revoked.status_code == 401
    assert revoked.json()["message"] == "This API key was revoked."
    # The real client fails to connect, and says it was refused.
    with pytest.raises(Exception) as refused:
        over_http(mcp_url, raw_key, agent_session)
    assert "401" in repr(refused.value) or "Unauthorized" in repr(refused.value)


def test_it_answers_one_json_response_per_post_and_no_stream(workspace, mcp_url):
    _, raw_key = _key(workspace)
    auth = {"Authorization": f"Bearer {raw_key}"}
    headers = {**auth, "Accept": MCP_ACCEPT, "Content-Type": "application/json"}

    initialized = httpx.post(mcp_url, content=json.dumps(INITIALIZE), headers=headers)
    listed = httpx.post(
        mcp_url,
        content=json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        headers=headers,
    )
    stream = httpx.get(mcp_url, headers={**auth, "Accept": "text/event-stream"})

    assert initialized.status_code == 200
    assert initialized.headers["content-type"].startswith("application/json")
    assert initialized.json()["result"]["serverInfo"]["name"] == "memdesk"
    assert [t["name"] for t in listed.json()["result"]["tools"]] == AGENT_TOOLS
    assert stream.status_code == 405


def test_memory_reads_as_over_rest_with_pseudonyms_or_values(workspace, mcp_url, live_server):
    """A workspace that pseudonymises at ingest: the tools read and search the
    pseudonymised text, as REST does; once its agents may see values, both show them."""
    set_policy(workspace, redact_at_ingest=True, keep_originals=False)
    _, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace)
    c = str(conversation.pk)

    async def session(client: ClientSession) -> tuple[dict[str, Any], str, dict[str, Any]]:
        added = structured(
            await client.call_tool(
                "add_messages",
                {
                    "conversationId": c,
                    "messages": [{"role": "user", "content": f"Write to me at {EMAIL}."}],
                },
            )
        )
        text = text_of(await client.call_tool("get_context", {"conversationId": c}))
        found = structured(
            await client.call_tool("search_memory", {"conversationId": c, "query": "write"})
        )
        return added, text, found

    added, text, found = over_http(mcp_url, raw_key, session)
    with httpx.Client(
        base_url=f"{live_server.url}/v1", headers={"Authorization": f"Bearer {raw_key}"}
    ) as rest:
        rest_text = rest.get(f"/conversations/{c}/context?format=text").text
    assert EMAIL not in json.dumps(added) and EMAIL not in text and EMAIL not in json.dumps(found)
    assert "<EMAIL_ADDRESS_1>" in added["messages"][0]["content"]
    assert text == rest_text
    assert [m["id"] for m in found["messages"]] == [added["messages"][0]["id"]]

    # A workspace whose agents may read the values: the tools re-identify, as REST does.
    set_policy(workspace, agents_see_reidentified=True)

    async def read(client: ClientSession) -> str:
        return text_of(await client.call_tool("get_context", {"conversationId": c}))

    text = over_http(mcp_url, raw_key, read)
    with httpx.Client(
        base_url=f"{live_server.url}/v1", headers={"Authorization": f"Bearer {raw_key}"}
    ) as rest:
        rest_text = rest.get(f"/conversations/{c}/context?format=text").text
    assert EMAIL in text
    assert text == rest_text


def test_a_workspace_header_for_another_workspace_is_refused(workspace, other_workspace, mcp_url):
    _, raw_key = _key(workspace)
    response = httpx.post(
        mcp_url,
        content=json.dumps(INITIALIZE),
        headers={
            "Authorization": f"Bearer {raw_key}",
            "X-Workspace-Id": str(other_workspace.pk),
            "Accept": MCP_ACCEPT,
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 403
    assert response.json()["message"] == (
        "X-Workspace-Id names a workspace this API key does not belong to."
    )


def test_recall_answers_as_rest_search_and_get_context_takes_a_question(
    workspace, mcp_url, live_server
):
    _, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="Where is my parcel to Berlin?"),
            MessageInput(role="assistant", content="The courier will call you tomorrow."),
        ],
    )
    c = str(conversation.pk)

    async def session(client: ClientSession) -> tuple[dict[str, Any], str]:
        found = structured(
            await client.call_tool("recall", {"query": "courier call", "userId": "dana"})
        )
        text = text_of(
            await client.call_tool("get_context", {"conversationId": c, "query": "courier"})
        )
        return found, text

    found, text = over_http(mcp_url, raw_key, session)
    with httpx.Client(
        base_url=f"{live_server.url}/v1", headers={"Authorization": f"Bearer {raw_key}"}
    ) as rest:
        over_rest = rest.post("/search", json={"query": "courier call", "userId": "dana"}).json()
        rest_text = rest.get(f"/conversations/{c}/context?format=text&query=courier").text
    assert found == over_rest
    assert found["hits"][0]["snippet"] == "The courier will call you tomorrow."
    assert text == rest_text


def test_a_context_read_over_mcp_is_in_the_read_ledger(workspace, mcp_url):
    api_key, raw_key = _key(workspace)
    conversation = conversation_create(workspace=workspace)
    messages_append(conversation=conversation, items=[MessageInput("user", "Where is my parcel?")])

    async def session(client: ClientSession) -> str:
        arguments = {"conversationId": str(conversation.pk)}
        return text_of(await client.call_tool("get_context", arguments))

    served = over_http(mcp_url, raw_key, session)

    [read] = ContextRead.objects.all()
    assert (read.edge, read.format, read.api_key_id, read.status) == (
        "mcp",
        "text",
        api_key.pk,
        200,
    )
    assert read.body_sha256 == hashlib.sha256(served.encode()).hexdigest()
