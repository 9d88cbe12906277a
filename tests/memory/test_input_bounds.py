"""Bounds on what an agent or a curator may send as memory: a note's text and tags (over
REST and MCP alike), a context's token budget, and one field sent under its two
spellings with different values."""

from __future__ import annotations

import pytest

from memory.mcp.callers import HttpCaller, McpToolError
from memory.mcp.tools import run_tool
from memory.models import Observation, ReasoningStep, ToolCall
from memory.services.notes import NOTE_TEXT_MAX_CHARS
from tenancy.models import ApiKey
from tests.memory.factories import ObservationFactory

NOTE_TAGS_MAX = 50


def _caller(api) -> HttpCaller:
    api_key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(api.raw_key))
    return HttpCaller(api_key=api_key, request_id="bounds-test", ip_address=None)


# --- a note's text and tags ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x" * 600_000}, "text"),
        ({"text": "x" * (NOTE_TEXT_MAX_CHARS + 1)}, "text"),
        ({"text": "Dana prefers e-mail.", "tags": [f"t{n}" for n in range(10_000)]}, "tags"),
        ({"text": "Dana prefers e-mail.", "tags": ["x" * 101]}, "tags[0]"),
        ({"text": "Dana prefers e-mail.", "topics": [f"t{n}" for n in range(51)]}, "topics"),
    ],
)
def test_an_oversized_note_is_refused_over_rest(curator_api, conversation_id, body, field):
    response = curator_api.post(
        f"/v1/conversations/{conversation_id}/observations", body, format="json"
    )
    assert response.status_code == 400, response.status_code
    assert response.json()["field"] == field
    assert not Observation.objects.exists()


def test_a_note_at_the_limits_is_taken(curator_api, conversation_id):
    response = curator_api.post(
        f"/v1/conversations/{conversation_id}/observations",
        {
            "text": "Dana prefers e-mail. " + "x" * (NOTE_TEXT_MAX_CHARS - 21),
            "tags": [f"t{n}" for n in range(NOTE_TAGS_MAX)],
        },
        format="json",
    )
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": "x" * (NOTE_TEXT_MAX_CHARS + 1)},
        {"text": "Dana prefers e-mail.", "tags": [f"t{n}" for n in range(NOTE_TAGS_MAX + 1)]},
    ],
)
def test_an_oversized_note_is_refused_over_mcp(curator_api, conversation_id, arguments):
    with pytest.raises(McpToolError):
        run_tool(
            _caller(curator_api),
            "add_observation",
            {"conversationId": conversation_id, **arguments},
        )
    assert not Observation.objects.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": "x" * (NOTE_TEXT_MAX_CHARS + 1), "reason": "fix"}, "content"),
        ({"text": "x" * (NOTE_TEXT_MAX_CHARS + 1), "reason": "fix"}, "text"),
        ({"tags": [f"t{n}" for n in range(NOTE_TAGS_MAX + 1)], "reason": "fix"}, "tags"),
    ],
)
def test_an_oversized_edit_is_refused_and_the_note_kept(curator_api, conversation, body, field):
    observation = ObservationFactory(conversation=conversation, text="Dana prefers e-mail.")
    response = curator_api.patch(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}", body, format="json"
    )
    assert response.status_code == 400
    assert response.json()["field"] == field
    observation.refresh_from_db()
    assert (observation.text, observation.version) == ("Dana prefers e-mail.", 1)


@pytest.mark.parametrize("text", ["\u200b", " \u200d\ufeff "])
def test_a_note_of_invisible_characters_is_empty(curator_api, conversation_id, text):
    response = curator_api.post(
        f"/v1/conversations/{conversation_id}/observations", {"text": text}, format="json"
    )
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("empty_text", "text")
    assert not Observation.objects.exists()


def test_an_edit_to_invisible_characters_is_refused(curator_api, conversation):
    observation = ObservationFactory(conversation=conversation, text="Dana prefers e-mail.")
    response = curator_api.patch(
        f"/v1/conversations/{conversation.pk}/observations/{observation.pk}",
        {"content": "\u200b", "reason": "fix"},
        format="json",
    )
    assert (response.status_code, response.json()["code"]) == (400, "empty_text")
    observation.refresh_from_db()
    assert observation.text == "Dana prefers e-mail."


# --- a context's token budget -------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", ["10000001", "99999999999999999999", "\u0665\u0660"])
def test_a_context_budget_has_an_upper_bound(api, conversation_id, max_tokens):
    response = api.get(f"/v1/conversations/{conversation_id}/context", {"max_tokens": max_tokens})
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (
        "invalid_max_tokens",
        "max_tokens",
    )
    assert "10000000" in response.json()["message"]


def test_the_largest_context_budget_is_taken(api, conversation_id):
    response = api.get(f"/v1/conversations/{conversation_id}/context", {"max_tokens": "10000000"})
    assert response.status_code == 200


@pytest.mark.parametrize("max_tokens", [True, 10_000_001, "\u0665"])
def test_the_mcp_context_budget_has_the_same_bounds(api, conversation_id, max_tokens):
    with pytest.raises(McpToolError, match="max_tokens"):
        run_tool(
            _caller(api),
            "get_context",
            {"conversationId": conversation_id, "max_tokens": max_tokens},
        )


# --- one field, two spellings -------------------------------------------------------------------


def test_a_step_list_naming_two_conversations_is_refused(api, conversation_id, other_api):
    other = other_api.post("/v1/conversations", {}, format="json").json()["id"]
    response = api.get(
        "/v1/reasoning/steps", {"conversation_id": conversation_id, "conversationId": other}
    )
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (
        "conflicting_fields",
        "conversationId",
    )


def test_a_step_list_may_name_its_conversation_both_ways_alike(api, conversation_id):
    response = api.get(
        "/v1/reasoning/steps",
        {"conversation_id": conversation_id, "conversationId": conversation_id},
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("sent", "field"),
    [
        ({"input": {"order": "A"}, "arguments": {"order": "B"}}, "arguments"),
        ({"output": "shipped", "result": "lost"}, "result"),
    ],
)
def test_a_tool_call_with_two_different_inputs_or_outputs_is_refused(
    api, conversation_id, sent, field
):
    response = api.post(
        "/v1/reasoning/tool-calls",
        {"conversationId": conversation_id, "toolName": "lookup_order", **sent},
        format="json",
    )
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("conflicting_fields", field)
    assert not ToolCall.objects.exists()


def test_a_tool_call_may_send_the_same_input_both_ways(api, conversation_id):
    response = api.post(
        "/v1/reasoning/tool-calls",
        {
            "conversationId": conversation_id,
            "toolName": "lookup_order",
            "input": {"order": "A"},
            "arguments": {"order": "A"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert not ReasoningStep.objects.exists()
