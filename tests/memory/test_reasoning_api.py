"""Reasoning memory over the agent API: POST /v1/reasoning/steps, POST
/v1/reasoning/tool-calls, GET /v1/reasoning/trace/{id} and GET /v1/reasoning/steps, as
the NAMS Python and TypeScript clients send and read them."""

from __future__ import annotations

import json
import uuid

from rest_framework.test import APIClient

from governance.models import AuditEvent
from memory.mcp.callers import HttpCaller
from memory.mcp.tools import run_tool
from memory.models import ReasoningStep, ToolCall
from tenancy.models import ApiKey

STEPS = "/v1/reasoning/steps"
TOOL_CALLS = "/v1/reasoning/tool-calls"


def _conversation(api: APIClient) -> str:
    return api.post("/v1/conversations", {"userId": "dana"}, format="json").json()["id"]


def _step(api: APIClient, conversation_id: str, **fields: object) -> dict:
    body = {"conversationId": conversation_id, "reasoning": "Look up the order", **fields}
    response = api.post(STEPS, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_it_records_a_step_as_the_python_client_sends_it(api):
    conversation_id = _conversation(api)
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "Where is my order?"},
        format="json",
    )

    response = api.post(
        STEPS,
        {
            "conversationId": conversation_id,
            "reasoning": "Look up the order",
            "actionTaken": "search_orders",
            "result": "Found ORD-7",
        },
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    uuid.UUID(body["id"])
    assert body["conversationId"] == conversation_id
    assert body["reasoning"] == "Look up the order"
    assert body["actionTaken"] == "search_orders"
    assert body["result"] == "Found ORD-7"
    assert body["stepNumber"] == 1
    assert body["afterSeq"] == 1  # after the user's message
    assert body["createdAt"]
    assert _step(api, conversation_id)["stepNumber"] == 2


def test_a_blank_thought_is_stored_empty_but_a_step_must_say_something(api):
    conversation_id = _conversation(api)
    # The Python client sends " " for a thought or action it was not given.
    step = _step(api, conversation_id, reasoning="step 1", actionTaken=" ")
    assert step["actionTaken"] == ""
    assert step["result"] is None

    response = api.post(
        STEPS,
        {"conversationId": conversation_id, "reasoning": " ", "actionTaken": " "},
        format="json",
    )
    assert response.status_code == 400
    assert "reasoning, actionTaken or result" in response.json()["message"]


def test_a_step_is_refused_with_a_message_naming_what_is_wrong(api):
    conversation_id = _conversation(api)
    missing = api.post(STEPS, {"reasoning": "x"}, format="json")
    assert missing.status_code == 400
    assert missing.json()["field"] == "conversationId"

    not_text = api.post(STEPS, {"conversationId": conversation_id, "reasoning": 3}, format="json")
    assert not_text.status_code == 400
    assert not_text.json()["field"] == "reasoning"

    bad_id = api.post(STEPS, {"conversationId": "nope", "reasoning": "x"}, format="json")
    assert bad_id.status_code == 400
    assert bad_id.json()["field"] == "conversationId"
    assert "UUID" in bad_id.json()["message"]

    unknown = api.post(
        STEPS, {"conversationId": str(uuid.uuid4()), "reasoning": "x"}, format="json"
    )
    assert unknown.status_code == 404
    assert not ReasoningStep.objects.exists()


def test_a_step_is_audited_without_its_text(api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id, reasoning="Customer Dana Pierce is angry")

    event = AuditEvent.objects.get(action="reasoning_step.create")
    assert event.target_id == step["id"]
    assert event.actor_type == "api_key"
    assert event.after["conversationId"] == conversation_id
    assert "Dana" not in json.dumps(event.after)


def test_it_records_a_tool_call_under_a_step_as_the_python_client_sends_it(api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id)

    response = api.post(
        TOOL_CALLS,
        {
            "toolName": "restaurant_search",
            "input": json.dumps({"cuisine": "Italian"}),
            "stepId": step["id"],
            "status": "success",
            "output": json.dumps(["Da Mario", "Bella"]),
            "durationMs": 42,
        },
        format="json",
    )

    assert response.status_code == 201
    call = response.json()
    assert call["conversationId"] == conversation_id
    assert call["stepId"] == step["id"]
    assert call["toolName"] == "restaurant_search"
    assert json.loads(call["input"]) == {"cuisine": "Italian"}
    assert json.loads(call["output"]) == ["Da Mario", "Bella"]
    assert call["status"] == "success"
    assert call["durationMs"] == 42
    event = AuditEvent.objects.get(action="tool_call.create")
    assert event.target_id == call["id"]
    assert "Mario" not in json.dumps(event.after)


def test_it_takes_the_typescript_clients_arguments_and_result(api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id)

    response = api.post(
        TOOL_CALLS,
        {
            "stepId": step["id"],
            "toolName": "weather",
            "arguments": {"city": "Lisbon"},
            "input": '{"city":"Lisbon"}',
            "result": {"forecast": "sunny"},
            "status": "success",
        },
        format="json",
    )

    assert response.status_code == 201
    call = response.json()
    assert json.loads(call["input"]) == {"city": "Lisbon"}
    assert json.loads(call["output"]) == {"forecast": "sunny"}


def test_a_tool_call_may_name_its_conversation_without_a_step(api):
    conversation_id = _conversation(api)
    response = api.post(
        TOOL_CALLS,
        {"conversationId": conversation_id, "toolName": "lookup", "output": "3 rows"},
        format="json",
    )
    assert response.status_code == 201
    assert response.json()["stepId"] is None
    assert response.json()["output"] == "3 rows"


def test_a_tool_call_is_refused_with_a_message_naming_what_is_wrong(api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id)

    neither = api.post(TOOL_CALLS, {"toolName": "lookup"}, format="json")
    assert neither.status_code == 400
    assert "conversationId" in neither.json()["message"]

    unknown_step = api.post(
        TOOL_CALLS, {"toolName": "lookup", "stepId": str(uuid.uuid4())}, format="json"
    )
    assert unknown_step.status_code == 404
    assert unknown_step.json()["field"] == "stepId"

    status = api.post(
        TOOL_CALLS, {"toolName": "lookup", "stepId": step["id"], "status": "great"}, format="json"
    )
    assert status.status_code == 400
    assert status.json()["field"] == "status"

    duration = api.post(
        TOOL_CALLS, {"toolName": "lookup", "stepId": step["id"], "durationMs": -1}, format="json"
    )
    assert duration.status_code == 400
    assert duration.json()["field"] == "durationMs"

    no_name = api.post(TOOL_CALLS, {"toolName": " ", "stepId": step["id"]}, format="json")
    assert no_name.status_code == 400
    assert no_name.json()["field"] == "toolName"

    other = _conversation(api)
    mixed = api.post(
        TOOL_CALLS,
        {"toolName": "lookup", "stepId": step["id"], "conversationId": other},
        format="json",
    )
    assert mixed.status_code == 400
    assert mixed.json()["field"] == "stepId"
    assert not ToolCall.objects.exists()


def test_the_trace_holds_every_step_and_tool_call_oldest_first(api):
    conversation_id = _conversation(api)
    first = _step(api, conversation_id, reasoning="first")
    second = _step(api, conversation_id, reasoning="second")
    api.post(TOOL_CALLS, {"toolName": "a", "stepId": first["id"]}, format="json")
    api.post(TOOL_CALLS, {"toolName": "b", "stepId": second["id"]}, format="json")

    response = api.get(f"/v1/reasoning/trace/{conversation_id}")

    assert response.status_code == 200
    trace = response.json()
    assert trace["conversationId"] == conversation_id
    assert [s["reasoning"] for s in trace["steps"]] == ["first", "second"]
    assert [(c["toolName"], c["stepId"]) for c in trace["toolCalls"]] == [
        ("a", first["id"]),
        ("b", second["id"]),
    ]


def test_the_step_list_is_read_by_conversation_id(api):
    conversation_id = _conversation(api)
    _step(api, conversation_id, reasoning="only")

    listed = api.get(f"{STEPS}?conversation_id={conversation_id}")
    assert listed.status_code == 200
    assert [s["reasoning"] for s in listed.json()["steps"]] == ["only"]
    assert api.get(f"{STEPS}?conversationId={conversation_id}").json() == listed.json()

    missing = api.get(STEPS)
    assert missing.status_code == 400
    assert "conversation_id" in missing.json()["message"]
    assert api.get(f"{STEPS}?conversation_id=nope").status_code == 400


def test_another_workspace_sees_none_of_it(api, other_api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id)

    assert other_api.get(f"/v1/reasoning/trace/{conversation_id}").status_code == 404
    assert other_api.get(f"{STEPS}?conversation_id={conversation_id}").status_code == 404
    assert (
        other_api.post(
            STEPS, {"conversationId": conversation_id, "reasoning": "x"}, format="json"
        ).status_code
        == 404
    )
    into_step = other_api.post(TOOL_CALLS, {"toolName": "x", "stepId": step["id"]}, format="json")
    assert into_step.status_code == 404
    assert ReasoningStep.objects.count() == 1
    assert not ToolCall.objects.exists()


def test_the_routes_need_a_key_of_the_workspace(api, other_workspace):
    conversation_id = _conversation(api)
    anonymous = APIClient()
    assert anonymous.get(f"/v1/reasoning/trace/{conversation_id}").status_code == 401
    assert (
        anonymous.post(
            STEPS, {"conversationId": conversation_id, "reasoning": "x"}, format="json"
        ).status_code
        == 401
    )
    wrong = api.post(
        STEPS,
        {"conversationId": conversation_id, "reasoning": "x"},
        format="json",
        HTTP_X_WORKSPACE_ID=str(other_workspace.pk),
    )
    assert wrong.status_code == 403
    assert not ReasoningStep.objects.exists()


def test_a_retried_step_with_the_same_idempotency_key_is_recorded_once(api):
    conversation_id = _conversation(api)
    body = {"conversationId": conversation_id, "reasoning": "once"}

    first = api.post(STEPS, body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post(STEPS, body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")

    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert ReasoningStep.objects.count() == 1


def test_deleting_the_conversation_deletes_its_reasoning_with_counts(api):
    conversation_id = _conversation(api)
    step = _step(api, conversation_id)
    api.post(TOOL_CALLS, {"toolName": "a", "stepId": step["id"]}, format="json")

    assert api.delete(f"/v1/conversations/{conversation_id}").status_code == 204

    assert not ReasoningStep.objects.exists() and not ToolCall.objects.exists()
    receipt = AuditEvent.objects.get(action="conversation.delete")
    assert receipt.before["counts"]["reasoningSteps"] == 1
    assert receipt.before["counts"]["toolCalls"] == 1


def test_an_mcp_client_records_a_step_and_its_tool_call_into_the_same_trace(api):
    conversation_id = _conversation(api)
    api_key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(api.raw_key))
    caller = HttpCaller(api_key=api_key, request_id="mcp-test", ip_address=None)

    step = run_tool(
        caller,
        "record_reasoning_step",
        {"conversationId": conversation_id, "reasoning": "The parcel may be lost."},
    )
    run_tool(
        caller,
        "record_tool_call",
        {
            "conversationId": conversation_id,
            "toolName": "lookup_order",
            "stepId": step["id"],
            "input": {"order": "ORD-123456"},
            "output": "In transit, tracking 1Z999",
            "durationMs": 120,
        },
    )

    trace = api.get(f"/v1/reasoning/trace/{conversation_id}").json()
    assert [s["id"] for s in trace["steps"]] == [step["id"]]
    [call] = trace["toolCalls"]
    assert (call["toolName"], call["stepId"], call["durationMs"]) == (
        "lookup_order",
        step["id"],
        120,
    )
    assert json.loads(call["input"]) == {"order": "ORD-123456"}
