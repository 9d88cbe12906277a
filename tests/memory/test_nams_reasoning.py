"""The real ``neo4j-agent-memory`` client's reasoning memory (NAMS backend, REST) against
the live server: traces, steps and tool calls as the client's own TCK drives them, each
checked against the database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from neo4j_agent_memory import MemoryClient, MemorySettings, NamsConfig, NotFoundError
from neo4j_agent_memory.core.exceptions import NotSupportedError
from neo4j_agent_memory.memory.reasoning import ReasoningStep as ClientStep
from neo4j_agent_memory.memory.reasoning import ToolCall as ClientToolCall
from pydantic import SecretStr

from core.actors import SYSTEM_ACTOR
from memory.models import ReasoningStep, ToolCall
from memory.services.conversations import conversation_create
from tenancy.services import api_key_create

T = TypeVar("T")


async def _with_client(endpoint: str, api_key: str, action: Callable[[Any], Awaitable[T]]) -> T:
    settings = MemorySettings(
        _env_file=None,
        backend="nams",
        nams=NamsConfig(endpoint=endpoint, api_key=SecretStr(api_key), max_retries=0),
    )
    client = MemoryClient(settings)
    try:
        await client.connect()
        return await action(client)
    finally:
        await client.close()


@pytest.fixture
def nams(live_server, workspace) -> Callable[..., Any]:
    """Run ``action(client)`` with a connected MemoryClient; return its result."""
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="nams")
    endpoint = f"{live_server.url}/v1"

    def run(action: Callable[[Any], Awaitable[T]]) -> T:
        return asyncio.run(_with_client(endpoint, raw_key, action))

    return run


def test_the_trace_lifecycle_records_steps_and_tool_calls(nams, conversation):
    session = str(conversation.pk)

    async def lifecycle(client: Any) -> tuple[Any, Any, Any]:
        trace = await client.reasoning.start_trace(session, "Find a restaurant")
        step = await client.reasoning.add_step(
            trace.id,
            thought="Look up Italian restaurants near user",
            action="search_restaurants",
            observation="Found 3 candidates",
        )
        call = await client.reasoning.record_tool_call(
            step.id,
            tool_name="restaurant_search",
            arguments={"cuisine": "Italian"},
            result=["Da Mario", "Bella"],
            status="success",
            duration_ms=42,
        )
        await client.reasoning.complete_trace(trace.id, outcome="Selected Da Mario", success=True)
        fetched = await client.reasoning.get_trace_with_steps(trace.id)
        return step, call, fetched

    step, call, fetched = nams(lifecycle)

    assert isinstance(step, ClientStep) and isinstance(call, ClientToolCall)
    stored_step = ReasoningStep.objects.get()
    assert str(step.id) == str(stored_step.pk)
    assert step.thought == stored_step.reasoning == "Look up Italian restaurants near user"
    assert step.action == stored_step.action_taken == "search_restaurants"
    assert step.observation == stored_step.result == "Found 3 candidates"
    assert step.step_number == 1
    stored_call = ToolCall.objects.get()
    assert str(call.id) == str(stored_call.pk)
    assert stored_call.step_id == stored_step.pk
    assert stored_call.conversation_id == conversation.pk
    assert call.tool_name == "restaurant_search"
    assert call.arguments == {"cuisine": "Italian"}
    assert call.result == ["Da Mario", "Bella"]
    assert call.duration_ms == 42
    # The trace read back: the step with its tool call hung off it.
    [read_step] = fetched.steps
    assert read_step.thought == "Look up Italian restaurants near user"
    assert [c.tool_name for c in read_step.tool_calls] == ["restaurant_search"]
    assert read_step.tool_calls[0].result == ["Da Mario", "Bella"]


def test_session_traces_gather_the_conversations_steps_in_order(nams, conversation):
    session = str(conversation.pk)

    async def two_traces(client: Any) -> Any:
        first = await client.reasoning.start_trace(session, "one")
        await client.reasoning.add_step(first.id, thought="step 1")
        second = await client.reasoning.start_trace(session, "two")
        await client.reasoning.add_step(second.id, thought="step 2")
        return await client.reasoning.get_session_traces(session)

    [trace] = nams(two_traces)

    assert [s.thought for s in trace.steps] == ["step 1", "step 2"]
    assert [s.step_number for s in trace.steps] == [1, 2]
    # "step 1" was sent without an action: the client's " " is stored empty.
    assert ReasoningStep.objects.filter(action_taken="").count() == 2


def test_a_conversation_without_reasoning_has_no_session_traces(nams, conversation):
    async def read(client: Any) -> Any:
        return await client.reasoning.get_session_traces(str(conversation.pk))

    assert nams(read) == []


def test_another_workspaces_conversation_is_not_found_by_the_client(nams, other_workspace):
    elsewhere = conversation_create(workspace=other_workspace)

    async def add(client: Any) -> Any:
        trace = await client.reasoning.start_trace(str(elsewhere.pk), "task")
        return await client.reasoning.add_step(trace.id, thought="x")

    with pytest.raises(NotFoundError):
        nams(add)
    assert not ReasoningStep.objects.exists()


def test_step_search_stays_the_clients_not_supported(nams, conversation):
    async def search(client: Any) -> Any:
        return await client.reasoning.search_steps("anything", limit=5)

    with pytest.raises(NotSupportedError):
        nams(search)
