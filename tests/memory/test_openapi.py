"""The OpenAPI document at /v1/schema/ describes every route, and every real response.

Most bodies are rendered by the DRF serializers that document them
(``memory/api/presenters.py``); the context's shapes are rendered by hand on its hot path
(``memory/wire.py``, ``memory/context.py``) and declared apart (``memory/api_schema.py``).
Each case below calls one route as an agent would and validates the body against the
schema documented for that status, with undocumented fields counted as errors, so a
hand-rendered body and its declaration cannot drift apart unnoticed, and every status a
route answers is documented.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import pytest
from django.http import HttpResponse
from django.urls import URLResolver
from django.utils import timezone
from rest_framework.test import APIClient

from config import urls as root_urls
from core.actors import SYSTEM_ACTOR
from memory import unsupported
from memory import urls as memory_urls
from memory.context.read import context_for_conversation
from memory.models import (
    Conversation,
    Message,
    Observation,
    Pin,
    PipelineRun,
    Reflection,
    ReflectionVersion,
    ReflectorRun,
)
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_create, observation_update
from memory.services.pins import pin_create
from memory.services.reasoning import reasoning_step_record, tool_call_record
from memory.services.reflections import reflection_update
from tests.memory.factories import ReflectionFactory
from tests.openapi_document import NOT_OPERATIONS, OpenApi, openapi_document


@pytest.fixture(scope="module")
def openapi() -> OpenApi:
    return openapi_document()


def _routes(patterns: list | None = None, prefix: str = "") -> dict[str, set[str]]:
    """Every API route under /v1/ (the agent API and the governance routes mounted
    beside it), as an OpenAPI path with the methods it answers."""
    routes: dict[str, set[str]] = {}
    for pattern in root_urls.urlpatterns if patterns is None else patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            routes.update(_routes(pattern.url_patterns, route))
            continue
        # The NAMS routes Memdesk does not serve answer 501 and are left out of the
        # document (tests/memory/test_nams_routes.py checks them).
        if not route.startswith("v1/") or pattern.name in ("schema", "docs", unsupported.URL_NAME):
            continue
        view = pattern.callback.view_class
        path = "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)
        routes[path] = {
            m for m in view.http_method_names if m not in ("options", "head") and hasattr(view, m)
        }
    return routes


def _memory_routes() -> set[tuple[str, str]]:
    """The agent API's own operations: the ones this module calls case by case (the
    governance routes have their own behaviour tests in tests/governance/)."""
    mounted = _routes()
    prefixes = {
        "/v1/" + str(p.pattern).split("<")[0].split("/")[0] for p in memory_urls.urlpatterns
    }
    return {
        (path, method)
        for path, methods in mounted.items()
        for method in methods
        if any(path.startswith(prefix) for prefix in prefixes)
    }


# --- the document itself -----------------------------------------------------------------------


def test_the_schema_is_served_as_json_without_a_key(openapi):
    assert openapi.document["openapi"].startswith("3.")
    assert openapi.document["info"]["title"] == "Memdesk agent API"


def test_it_documents_every_route_with_its_methods(openapi):
    routes = _routes()
    documented = {
        path: set(item) - NOT_OPERATIONS for path, item in openapi.document["paths"].items()
    }

    assert documented == routes


# Deletes that NAMS clients expect to be idempotent: an unknown id is a success, not a 404.
IDEMPOTENT_DELETES = {("/v1/conversations/{conversation_id}", "delete")}


@pytest.mark.parametrize("status", ["400", "401", "404"])
def test_every_operation_documents_its_error_bodies(openapi, status):
    for path, method in openapi.operations():
        if status == "404" and (path, method) in IDEMPOTENT_DELETES:
            assert status not in openapi.document["paths"][path][method]["responses"]
            continue
        response = openapi.document["paths"][path][method]["responses"].get(status)
        assert response, f"{method.upper()} {path} does not document {status}"
        schema = openapi.resolve(response["content"]["application/json"]["schema"])
        assert {"error", "code", "message"} <= set(schema["required"]), f"{method.upper()} {path}"
        assert response["description"], f"{method.upper()} {path} {status} needs a description"


# --- every route, validated ----------------------------------------------------------------------


@dataclass
class World:
    """One workspace's conversation with all three tiers, and another workspace's."""

    conversation: Conversation
    messages: list[Message]
    observation: Observation
    reflection: Reflection
    superseded: Reflection
    pin: Pin
    theirs: Conversation
    their_message: Message
    context_etag: str
    run: PipelineRun
    retrying_run: PipelineRun
    finished_run: PipelineRun
    their_run: PipelineRun
    clients: dict[str, APIClient]

    def conversation_id(self, which: str) -> str:
        return {
            "mine": str(self.conversation.id),
            "theirs": str(self.theirs.id),
            "unknown": str(uuid.uuid4()),
            "malformed": "conversation-42",
        }[which]

    def observation_id(self, which: str) -> str:
        return {
            "mine": str(self.observation.id),
            "unknown": str(uuid.uuid4()),
            "malformed": "obs-1",
        }[which]

    def reflection_id(self, which: str) -> str:
        return {
            "mine": str(self.reflection.id),
            "superseded": str(self.superseded.id),
            "unknown": str(uuid.uuid4()),
            "malformed": "refl-1",
        }[which]

    def pin_id(self, which: str) -> str:
        return {
            "mine": str(self.pin.id),
            "unknown": str(uuid.uuid4()),
            "malformed": "pin-1",
        }[which]

    def run_id(self, which: str) -> str:
        return {
            "mine": str(self.run.id),
            "retrying": str(self.retrying_run.id),
            "finished": str(self.finished_run.id),
            "theirs": str(self.their_run.id),
            "unknown": str(uuid.uuid4()),
            "malformed": "run-1",
        }[which]


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    status: int
    error: str | None = None
    error_field: str | None = None
    query: dict[str, Any] | Callable[[World], dict[str, Any]] = field(default_factory=dict)
    body: Any = None  # or a function of the World
    raw_body: str | None = None
    headers: dict[str, str] | Callable[[World], dict[str, str]] = field(default_factory=dict)
    client: str = "key"
    conversation: str = "mine"
    observation: str = "mine"
    reflection: str = "mine"
    run: str = "mine"
    pin: str = "mine"
    label: str = ""

    @property
    def id(self) -> str:
        route = self.path.removeprefix("/v1/conversations").replace("conversation_id", "c")
        route = route.replace("observation_id", "o").replace("reflection_id", "rf")
        route = route.replace("run_id", "r")
        route = route.replace("pin_id", "p") or "/"
        outcome = " ".join(part for part in (self.error, self.label) if part)
        return f"{self.method.upper()} {route} {self.status} {outcome}".strip()

    def send(self, world: World) -> HttpResponse:
        client = world.clients[self.client]
        path = self.path.format(
            conversation_id=world.conversation_id(self.conversation),
            observation_id=world.observation_id(self.observation),
            reflection_id=world.reflection_id(self.reflection),
            run_id=world.run_id(self.run),
            pin_id=world.pin_id(self.pin),
        )
        headers = self.headers(world) if callable(self.headers) else self.headers
        query = self.query(world) if callable(self.query) else self.query
        if self.method == "get":
            return client.get(path, query, headers=headers)
        if query:
            path += "?" + urlencode(query)
        send = getattr(client, self.method)
        if self.raw_body is not None:
            return send(path, self.raw_body, content_type="application/json", headers=headers)
        body = self.body(world) if callable(self.body) else self.body
        return send(path, body, format="json", headers=headers)


CONVERSATIONS = "/v1/conversations"
CONVERSATION = "/v1/conversations/{conversation_id}"
MESSAGES = f"{CONVERSATION}/messages"
BULK = f"{CONVERSATION}/messages/bulk"
SEARCH = f"{CONVERSATION}/search"
SEARCH_ALL = "/v1/search"
CONTEXT = f"{CONVERSATION}/context"
CONTEXT_READS = f"{CONVERSATION}/context-reads"
OBSERVATIONS = f"{CONVERSATION}/observations"
OBSERVATION = f"{CONVERSATION}/observations/{{observation_id}}"
HISTORY = f"{OBSERVATION}/history"
REVERT = f"{OBSERVATION}/revert"
REFLECTIONS = f"{CONVERSATION}/reflections"
REFLECTION = f"{CONVERSATION}/reflections/{{reflection_id}}"
REFLECTION_HISTORY = f"{REFLECTION}/history"
REFLECTION_REVERT = f"{REFLECTION}/revert"
EXTRACTION = f"{CONVERSATION}/extraction-status"
OBSERVE = f"{CONVERSATION}/observe"
REFLECT = f"{CONVERSATION}/reflect"
PINS = f"{CONVERSATION}/pins"
PIN = f"{PINS}/{{pin_id}}"
ESCALATIONS = f"{CONVERSATION}/escalations"
RUN = "/v1/runs/{run_id}"
RUN_CANCEL = f"{RUN}/cancel"
METRICS = "/v1/metrics"
SETTINGS = "/v1/workspace/settings"
STEPS = "/v1/reasoning/steps"
TOOL_CALLS = "/v1/reasoning/tool-calls"
TRACE = "/v1/reasoning/trace/{conversation_id}"


TOOL_RESULT = {
    "role": "tool",
    "content": '{"order": "A-4417", "status": "shipped", "carrier": "DHL"}',
    "toolName": "lookup_order",
    "toolCallId": "call_7",
    "metadata": {"latencyMs": 212},
    "createdAt": "2026-02-10T09:30:00+00:00",
}


def _edited_then_revert_body(world: World) -> dict[str, Any]:
    """Give the observation a version 1 to go back to, then ask for it."""
    observation_update(
        observation=world.observation, actor=SYSTEM_ACTOR, reason="typo", text="Edited."
    )
    return {"version": 1, "reason": "the edit was wrong"}


def _reflection_edited_then_revert_body(world: World) -> dict[str, Any]:
    reflection_update(
        reflection=world.reflection, actor=SYSTEM_ACTOR, reason="typo", text="Edited."
    )
    return {"version": 1, "reason": "the edit was wrong"}


def _superseded_with_a_version_body(world: World) -> dict[str, Any]:
    ReflectionVersion.objects.create(
        reflection_id=world.superseded.id,
        conversation=world.conversation,
        version=1,
        text="before",
        priority="medium",
        change="edit",
        reason="r",
        changed_by="system:memdesk",
    )
    return {"version": 1, "reason": "back"}


def _unauthenticated(method: str, path: str) -> list[Case]:
    return [
        Case(method, path, 401, "unauthorized", client="anonymous", label="no key"),
        Case(method, path, 401, "unauthorized", client="wrong_key", label="wrong key"),
    ]


def _not_found(method: str, path: str, **kwargs: Any) -> list[Case]:
    return [
        Case(method, path, 404, "not_found", conversation="unknown", **kwargs),
        Case(method, path, 404, "not_found", conversation="theirs", label="theirs", **kwargs),
    ]


CASES: list[Case] = [
    # conversations
    Case("get", CONVERSATIONS, 200, label="first page", query={"limit": 1}),
    Case("get", CONVERSATIONS, 200, label="one user", query={"userId": "alice"}),
    Case("get", CONVERSATIONS, 400, "invalid_limit", "limit", query={"limit": 201}),
    Case("get", CONVERSATIONS, 400, "invalid_cursor", "cursor", query={"cursor": "%%%"}),
    Case(
        "get",
        CONVERSATIONS,
        403,
        "forbidden",
        headers={"X-Workspace-Id": "globex"},
        label="another workspace",
    ),
    *_unauthenticated("get", CONVERSATIONS),
    Case(
        "post",
        CONVERSATIONS,
        201,
        body={"userId": "zoe", "title": "Refund", "metadata": {"channel": "chat"}},
    ),
    Case("post", CONVERSATIONS, 201, body={}, label="empty body"),
    Case(
        "post",
        CONVERSATIONS,
        201,
        body={"userId": "first"},
        headers={"Idempotency-Key": "create-1"},
        label="replayed",
    ),
    Case(
        "post",
        CONVERSATIONS,
        409,
        "idempotency_key_reused",
        body={"userId": "second"},
        headers={"Idempotency-Key": "create-1"},
    ),
    Case("post", CONVERSATIONS, 400, "invalid_request", "userId", body={"userId": 42}),
    Case("post", CONVERSATIONS, 400, "malformed_json", raw_body='{"userId": '),
    *_unauthenticated("post", CONVERSATIONS),
    Case("get", CONVERSATION, 200),
    Case("get", CONVERSATION, 400, "invalid_id", "conversationId", conversation="malformed"),
    Case(
        "get",
        CONVERSATION,
        403,
        "forbidden",
        headers={"X-Workspace-Id": "globex"},
        label="another workspace",
    ),
    *_not_found("get", CONVERSATION),
    *_unauthenticated("get", CONVERSATION),
    Case("delete", CONVERSATION, 204, query={"reason": "customer asked"}),
    Case("delete", CONVERSATION, 204, body={"reason": "in the body"}, label="reason in body"),
    Case("delete", CONVERSATION, 400, "invalid_id", "conversationId", conversation="malformed"),
    # Idempotent: an id this workspace does not hold (gone, or another workspace's) is 204.
    Case("delete", CONVERSATION, 204, conversation="unknown", label="unknown id"),
    Case("delete", CONVERSATION, 204, conversation="theirs", label="theirs, left alone"),
    *_unauthenticated("delete", CONVERSATION),
    # messages
    Case("get", MESSAGES, 200),
    Case("get", MESSAGES, 200, query={"limit": 2}, label="limit"),
    Case("get", MESSAGES, 400, "invalid_limit", "limit", query={"limit": "lots"}),
    *_not_found("get", MESSAGES),
    *_unauthenticated("get", MESSAGES),
    Case("post", MESSAGES, 201, body=TOOL_RESULT, label="tool result"),
    Case("post", MESSAGES, 201, body={"role": "user", "content": "Thanks!"}, label="plain"),
    Case(
        "post",
        MESSAGES,
        201,
        body={"role": "user", "content": "Thanks!", "name": "Maria Lopez"},
        label="named",
    ),
    Case(
        "post",
        MESSAGES,
        409,
        "idempotency_key_reused",
        body={"role": "user", "content": "Another text."},
        headers={"Idempotency-Key": "message-1"},
    ),
    Case("post", MESSAGES, 400, "invalid_role", "role", body={"role": "bot", "content": "Hi"}),
    Case("post", MESSAGES, 400, "empty_content", "content", body={"role": "user", "content": ""}),
    Case("post", MESSAGES, 400, "invalid_request", "content", body={"role": "user", "content": 5}),
    Case(
        "post",
        MESSAGES,
        400,
        "invalid_request",
        "name",
        body={"role": "user", "content": "Hi", "name": "x" * 65},
        label="name too long",
    ),
    *_not_found("post", MESSAGES, body={"role": "user", "content": "Hello?"}),
    *_unauthenticated("post", MESSAGES),
    Case(
        "post",
        BULK,
        201,
        body={
            "messages": [
                {"role": "user", "content": "Where is my order?"},
                {"role": "assistant", "content": "Checking now."},
                TOOL_RESULT,
            ]
        },
    ),
    Case(
        "post",
        BULK,
        400,
        "too_many_messages",
        "messages",
        body={"messages": [{"role": "user", "content": f"m{n}"} for n in range(101)]},
    ),
    Case("post", BULK, 400, "empty_batch", "messages", body={"messages": []}),
    Case(
        "post",
        BULK,
        400,
        "invalid_request",
        "messages[1].role",
        body={"messages": [{"role": "user", "content": "ok"}, {"content": "no role"}]},
    ),
    Case(
        "post",
        BULK,
        400,
        "invalid_request",
        "messages[1].name",
        body={
            "messages": [
                {"role": "user", "content": "ok"},
                {"role": "user", "content": "y", "name": 7},
            ]
        },
        label="name not text",
    ),
    Case(
        "post",
        BULK,
        400,
        "invalid_role",
        "messages[1].role",
        body={"messages": [{"role": "user", "content": "ok"}, {"role": "x", "content": "y"}]},
    ),
    *_not_found("post", BULK, body={"messages": [{"role": "user", "content": "Hi"}]}),
    *_unauthenticated("post", BULK),
    Case("post", SEARCH, 200, body={"query": "BERLIN", "limit": 5}),
    Case("post", SEARCH, 200, body={"query": "no such words anywhere"}, label="no hits"),
    Case("post", SEARCH, 400, "empty_query", "query", body={"query": "   "}),
    Case("post", SEARCH, 400, "invalid_limit", "limit", body={"query": "berlin", "limit": 0}),
    Case("post", SEARCH, 400, "invalid_request", "query", body={"limit": 3}),
    *_not_found("post", SEARCH, body={"query": "berlin"}),
    *_unauthenticated("post", SEARCH),
    Case(
        "post",
        SEARCH_ALL,
        200,
        body=lambda w: {"query": "berlin", "conversationId": w.conversation_id("mine")},
    ),
    Case("post", SEARCH_ALL, 200, body={"query": "berlin", "userId": "alice"}, label="one user"),
    Case("post", SEARCH_ALL, 200, body={"query": "berlin", "tiers": ["observation"]}, label="all"),
    Case("post", SEARCH_ALL, 403, "scope_required", "userId", body={"query": "x"}, client="agent"),
    Case("post", SEARCH_ALL, 400, "invalid_request", "query", body={"userId": "alice"}),
    Case(
        "post",
        SEARCH_ALL,
        400,
        "invalid_request",
        "tiers[0]",
        body={"query": "x", "tiers": ["memo"]},
    ),
    Case(
        "post",
        SEARCH_ALL,
        404,
        "not_found",
        body=lambda w: {"query": "x", "conversationId": w.conversation_id("theirs")},
        label="theirs",
    ),
    *_unauthenticated("post", SEARCH_ALL),
    # context
    Case("get", CONTEXT, 200, label="json"),
    Case("get", CONTEXT, 200, query={"max_tokens": 40}, label="json in a budget"),
    Case("get", CONTEXT, 200, query={"format": "text"}, label="text"),
    Case("get", CONTEXT, 200, query={"format": "messages"}, label="chat messages"),
    Case("get", CONTEXT, 200, query={"query": "berlin", "recall": 3}, label="with a question"),
    Case("get", CONTEXT, 400, "invalid_recall", "recall", query={"query": "x", "recall": 0}),
    Case(
        "get",
        CONTEXT,
        200,
        query={"format": "messages", "max_tokens": 60},
        label="chat messages in a budget",
    ),
    Case(
        "get",
        CONTEXT,
        304,
        headers=lambda world: {"If-None-Match": world.context_etag},
        label="unchanged",
    ),
    Case("get", CONTEXT, 400, "invalid_format", "format", query={"format": "xml"}),
    Case("get", CONTEXT, 400, "invalid_max_tokens", "max_tokens", query={"max_tokens": 0}),
    *_not_found("get", CONTEXT),
    *_unauthenticated("get", CONTEXT),
    # the read ledger (compliance keys and above)
    Case("get", CONTEXT_READS, 200, client="admin", label="first page", query={"limit": 1}),
    Case("get", CONTEXT_READS, 400, "invalid_limit", "limit", client="admin", query={"limit": 0}),
    Case(
        "get",
        CONTEXT_READS,
        400,
        "invalid_cursor",
        "cursor",
        client="admin",
        query={"cursor": "%%%"},
    ),
    *_not_found("get", CONTEXT_READS, client="admin"),
    *_unauthenticated("get", CONTEXT_READS),
    # observations
    Case("get", OBSERVATIONS, 200),
    Case("get", OBSERVATIONS, 200, query={"status": "reflected"}, label="reflected"),
    Case("get", OBSERVATIONS, 400, "invalid_status", "status", query={"status": "gone"}),
    *_not_found("get", OBSERVATIONS),
    *_unauthenticated("get", OBSERVATIONS),
    Case(
        "post",
        OBSERVATIONS,
        201,
        body=lambda world: {
            "text": "Order A-4417 shipped with DHL.",
            "priority": "completed",
            "referencedAt": "2026-02-09T00:00:00+00:00",
            "tags": ["orders"],
            "topics": ["shipping"],
            "ticketId": "T-88",
            "sourceMessageIds": [str(m.id) for m in world.messages[2:]],
            "reason": "agent summary",
        },
    ),
    Case("post", OBSERVATIONS, 201, body={"text": "User is polite."}, label="bare"),
    Case(
        "post",
        OBSERVATIONS,
        400,
        "invalid_priority",
        "priority",
        body={"text": "x", "priority": "urgent"},
    ),
    Case(
        "post",
        OBSERVATIONS,
        400,
        "unknown_source_message",
        "sourceMessageIds",
        body=lambda world: {"text": "x", "sourceMessageIds": [str(world.their_message.id)]},
    ),
    Case("post", OBSERVATIONS, 400, "empty_text", "text", body={"text": "   "}),
    *_not_found("post", OBSERVATIONS, body={"text": "x"}),
    *_unauthenticated("post", OBSERVATIONS),
    Case("get", OBSERVATION, 200),
    Case("get", OBSERVATION, 400, "invalid_id", "observationId", observation="malformed"),
    Case("get", OBSERVATION, 404, "not_found", observation="unknown", label="observation"),
    *_not_found("get", OBSERVATION),
    *_unauthenticated("get", OBSERVATION),
    Case(
        "patch",
        OBSERVATION,
        200,
        body={"text": "User moves to Berlin in March.", "reason": "date was wrong"},
    ),
    Case(
        "patch",
        OBSERVATION,
        200,
        body={"content": "User moves to Berlin in April.", "reason": "month was wrong"},
        label="content",
    ),
    Case(
        "patch",
        OBSERVATION,
        400,
        "conflicting_fields",
        "content",
        body={"content": "Berlin in April.", "text": "Berlin in May.", "reason": "r"},
    ),
    Case("patch", OBSERVATION, 400, "reason_required", "reason", body={"priority": "low"}),
    Case("patch", OBSERVATION, 400, "nothing_to_change", body={"reason": "no change"}),
    Case(
        "patch",
        OBSERVATION,
        400,
        "invalid_priority",
        "priority",
        body={"priority": "urgent", "reason": "r"},
    ),
    Case(
        "patch",
        OBSERVATION,
        412,
        "precondition_failed",
        body={"priority": "low", "reason": "r"},
        headers={"If-Match": '"9"'},
    ),
    Case(
        "patch",
        OBSERVATION,
        409,
        "version_conflict",
        "version",
        body={"priority": "low", "version": 9, "reason": "r"},
    ),
    Case("patch", OBSERVATION, 404, "not_found", observation="unknown", body={"reason": "r"}),
    *_not_found("patch", OBSERVATION, body={"text": "x", "reason": "r"}),
    *_unauthenticated("patch", OBSERVATION),
    Case("delete", OBSERVATION, 204, query={"reason": "duplicate"}),
    Case("delete", OBSERVATION, 400, "reason_required", "reason"),
    Case(
        "delete",
        OBSERVATION,
        412,
        "precondition_failed",
        query={"reason": "r"},
        headers={"If-Match": '"9"'},
    ),
    Case(
        "delete",
        OBSERVATION,
        409,
        "version_conflict",
        "version",
        body={"reason": "r", "version": 9},
    ),
    Case("delete", OBSERVATION, 404, "not_found", observation="unknown", query={"reason": "r"}),
    *_not_found("delete", OBSERVATION),
    *_unauthenticated("delete", OBSERVATION),
    Case("get", HISTORY, 200),
    Case("get", HISTORY, 400, "invalid_id", "observationId", observation="malformed"),
    Case("get", HISTORY, 404, "not_found", observation="unknown", label="observation"),
    *_not_found("get", HISTORY),
    *_unauthenticated("get", HISTORY),
    Case("post", REVERT, 200, body=lambda w: _edited_then_revert_body(w)),
    Case(
        "post",
        REVERT,
        412,
        "precondition_failed",
        body=lambda w: _edited_then_revert_body(w),
        headers={"If-Match": '"1"'},
    ),
    Case("post", REVERT, 400, "reason_required", "reason", body={"version": 1}),
    Case("post", REVERT, 400, "unknown_version", "version", body={"version": 9, "reason": "x"}),
    Case("post", REVERT, 400, "invalid_request", "version", body={"version": "one"}),
    Case("post", REVERT, 404, "not_found", observation="unknown", label="observation"),
    *_not_found("post", REVERT, body={"version": 1, "reason": "x"}),
    *_unauthenticated("post", REVERT),
    # reflections, extraction status
    Case("get", REFLECTIONS, 200),
    Case("get", REFLECTIONS, 200, query={"status": "superseded"}, label="superseded"),
    Case("get", REFLECTIONS, 200, query={"status": "stale"}, label="stale"),
    Case("get", REFLECTIONS, 400, "invalid_status", "status", query={"status": "reflected"}),
    *_not_found("get", REFLECTIONS),
    *_unauthenticated("get", REFLECTIONS),
    Case("get", REFLECTION, 200),
    Case("get", REFLECTION, 200, reflection="superseded", label="superseded"),
    Case("get", REFLECTION, 400, "invalid_id", "reflectionId", reflection="malformed"),
    Case("get", REFLECTION, 404, "not_found", reflection="unknown", label="reflection"),
    *_not_found("get", REFLECTION),
    *_unauthenticated("get", REFLECTION),
    Case(
        "patch",
        REFLECTION,
        200,
        body={"content": "User moves to Berlin; order A-4417 goes there.", "reason": "clearer"},
    ),
    Case(
        "patch",
        REFLECTION,
        200,
        body={"text": "User moves to Berlin.", "reason": "shorter"},
        label="text",
    ),
    Case("patch", REFLECTION, 400, "reason_required", "reason", body={"priority": "low"}),
    Case("patch", REFLECTION, 400, "nothing_to_change", body={"reason": "no change"}),
    Case(
        "patch",
        REFLECTION,
        400,
        "invalid_priority",
        "priority",
        body={"priority": "urgent", "reason": "r"},
    ),
    Case(
        "patch",
        REFLECTION,
        400,
        "conflicting_fields",
        "content",
        body={"content": "Berlin.", "text": "Paris.", "reason": "r"},
    ),
    Case(
        "patch",
        REFLECTION,
        409,
        "reflection_superseded",
        reflection="superseded",
        body={"priority": "low", "reason": "r"},
    ),
    Case(
        "patch",
        REFLECTION,
        412,
        "precondition_failed",
        body={"priority": "low", "reason": "r"},
        headers={"If-Match": '"9"'},
    ),
    Case(
        "patch",
        REFLECTION,
        409,
        "version_conflict",
        "version",
        body={"priority": "low", "version": 9, "reason": "r"},
    ),
    Case("patch", REFLECTION, 404, "not_found", reflection="unknown", body={"reason": "r"}),
    *_not_found("patch", REFLECTION, body={"text": "x", "reason": "r"}),
    *_unauthenticated("patch", REFLECTION),
    Case("delete", REFLECTION, 204, query={"reason": "wrong"}),
    Case("delete", REFLECTION, 204, body={"reason": "in the body"}, label="reason in body"),
    Case("delete", REFLECTION, 400, "reason_required", "reason"),
    Case("delete", REFLECTION, 404, "not_found", reflection="unknown", query={"reason": "r"}),
    *_not_found("delete", REFLECTION),
    *_unauthenticated("delete", REFLECTION),
    Case("get", REFLECTION_HISTORY, 200),
    Case("get", REFLECTION_HISTORY, 400, "invalid_id", "reflectionId", reflection="malformed"),
    Case("get", REFLECTION_HISTORY, 404, "not_found", reflection="unknown", label="reflection"),
    *_not_found("get", REFLECTION_HISTORY),
    *_unauthenticated("get", REFLECTION_HISTORY),
    Case("post", REFLECTION_REVERT, 200, body=lambda w: _reflection_edited_then_revert_body(w)),
    Case(
        "post",
        REFLECTION_REVERT,
        412,
        "precondition_failed",
        body=lambda w: _reflection_edited_then_revert_body(w),
        headers={"If-Match": '"1"'},
    ),
    Case("post", REFLECTION_REVERT, 400, "reason_required", "reason", body={"version": 1}),
    Case(
        "post",
        REFLECTION_REVERT,
        400,
        "unknown_version",
        "version",
        body={"version": 9, "reason": "x"},
    ),
    Case(
        "post",
        REFLECTION_REVERT,
        400,
        "invalid_request",
        "version",
        body={"version": "one"},
    ),
    Case(
        "post",
        REFLECTION_REVERT,
        409,
        "reflection_superseded",
        reflection="superseded",
        body=lambda w: _superseded_with_a_version_body(w),
    ),
    Case("post", REFLECTION_REVERT, 404, "not_found", reflection="unknown", label="reflection"),
    *_not_found("post", REFLECTION_REVERT, body={"version": 1, "reason": "x"}),
    *_unauthenticated("post", REFLECTION_REVERT),
    Case("get", EXTRACTION, 200),
    Case("get", EXTRACTION, 200, query={"limit": 2}, label="limit"),
    Case("get", EXTRACTION, 400, "invalid_limit", "limit", query={"limit": 500}),
    *_not_found("get", EXTRACTION),
    *_unauthenticated("get", EXTRACTION),
    # pins
    Case("get", PINS, 200),
    Case("get", PINS, 400, "invalid_id", "conversationId", conversation="malformed"),
    *_not_found("get", PINS),
    *_unauthenticated("get", PINS),
    Case("post", PINS, 201, body=lambda w: {"messageId": str(w.messages[0].id)}, label="whole"),
    Case(
        "post",
        PINS,
        201,
        body=lambda w: {"messageId": str(w.messages[0].id), "start": 4, "end": 20},
        label="span",
    ),
    Case(
        "post",
        PINS,
        400,
        "invalid_span",
        "end",
        body=lambda w: {"messageId": str(w.messages[0].id), "start": 5, "end": 5},
    ),
    Case(
        "post",
        PINS,
        400,
        "unknown_message",
        "messageId",
        body=lambda w: {"messageId": str(w.their_message.id)},
    ),
    Case("post", PINS, 400, "invalid_request", "messageId", body={"messageId": "m-1"}),
    *_not_found("post", PINS, body={"messageId": str(uuid.uuid4())}),
    *_unauthenticated("post", PINS),
    Case("delete", PIN, 204, query={"reason": "no longer binding"}),
    Case("delete", PIN, 400, "reason_required", "reason"),
    Case("delete", PIN, 400, "invalid_id", "pinId", pin="malformed", query={"reason": "r"}),
    Case("delete", PIN, 404, "not_found", pin="unknown", query={"reason": "r"}, label="pin"),
    *_not_found("delete", PIN, query={"reason": "r"}),
    *_unauthenticated("delete", PIN),
    # escalations
    Case("post", ESCALATIONS, 201, body={"reason": "Wants a person", "metadata": {"a": 1}}),
    Case("post", ESCALATIONS, 400, "invalid_request", "reason", body={}),
    Case("post", ESCALATIONS, 400, "reason_required", "reason", body={"reason": " "}),
    Case("post", ESCALATIONS, 400, "invalid_id", "conversationId", conversation="malformed"),
    *_not_found("post", ESCALATIONS, body={"reason": "r"}),
    *_unauthenticated("post", ESCALATIONS),
    Case("get", ESCALATIONS, 200),
    Case("get", ESCALATIONS, 400, "invalid_id", "conversationId", conversation="malformed"),
    *_not_found("get", ESCALATIONS),
    *_unauthenticated("get", ESCALATIONS),
    # the pipeline
    Case("post", OBSERVE, 202, label="queued"),
    Case("post", OBSERVE, 200, query={"wait": "true"}, label="finished"),
    Case("post", OBSERVE, 400, "invalid_id", "conversationId", conversation="malformed"),
    *_not_found("post", OBSERVE),
    *_unauthenticated("post", OBSERVE),
    Case("post", REFLECT, 202, label="queued"),
    Case("post", REFLECT, 200, query={"wait": "true"}, label="finished"),
    Case("post", REFLECT, 400, "invalid_id", "conversationId", conversation="malformed"),
    *_not_found("post", REFLECT),
    *_unauthenticated("post", REFLECT),
    # RunOut renders what it documents, so one state stands for all of them.
    Case("get", RUN, 200),
    Case("get", RUN, 400, "invalid_id", "runId", run="malformed"),
    Case("get", RUN, 404, "not_found", run="unknown"),
    Case("get", RUN, 404, "not_found", run="theirs", label="theirs"),
    *_unauthenticated("get", RUN),
    Case("post", RUN_CANCEL, 200, label="queued"),
    Case("post", RUN_CANCEL, 200, run="retrying", body={"reason": "provider down"}),
    Case("post", RUN_CANCEL, 409, "run_finished", run="finished"),
    Case("post", RUN_CANCEL, 400, "invalid_id", "runId", run="malformed"),
    Case("post", RUN_CANCEL, 404, "not_found", run="unknown"),
    Case("post", RUN_CANCEL, 404, "not_found", run="theirs", label="theirs"),
    *_unauthenticated("post", RUN_CANCEL),
    Case("get", METRICS, 200, label="workspace"),
    Case(
        "get",
        METRICS,
        200,
        query=lambda world: {"conversationId": str(world.conversation.id)},
        label="one conversation",
    ),
    Case(
        "get",
        METRICS,
        400,
        "invalid_id",
        "conversationId",
        query={"conversationId": "conversation-42"},
    ),
    Case(
        "get",
        METRICS,
        404,
        "not_found",
        query=lambda world: {"conversationId": str(world.theirs.id)},
        label="theirs",
    ),
    *_unauthenticated("get", METRICS),
    # reasoning memory (NAMS): error bodies are checked against the schema; the codes and
    # fields by tests/memory/test_reasoning_api.py
    Case(
        "post",
        STEPS,
        201,
        body=lambda w: {
            "conversationId": w.conversation_id("mine"),
            "reasoning": "Look up the order",
            "actionTaken": "order_status",
            "result": "shipped",
            "metadata": {"model": "m-1"},
        },
    ),
    Case(
        "post",
        STEPS,
        400,
        body=lambda w: {"conversationId": w.conversation_id("mine"), "reasoning": " "},
        label="empty step",
    ),
    Case("post", STEPS, 400, body={"reasoning": "x"}, label="no conversation"),
    Case(
        "post",
        STEPS,
        404,
        body=lambda w: {"conversationId": w.conversation_id("theirs"), "reasoning": "x"},
        label="theirs",
    ),
    *_unauthenticated("post", STEPS),
    Case(
        "get",
        STEPS,
        200,
        query=lambda w: {"conversation_id": w.conversation_id("mine")},
    ),
    Case("get", STEPS, 400, query={"conversation_id": "conversation-42"}, label="malformed"),
    Case(
        "get",
        STEPS,
        404,
        query=lambda w: {"conversation_id": w.conversation_id("theirs")},
        label="theirs",
    ),
    *_unauthenticated("get", STEPS),
    Case(
        "post",
        TOOL_CALLS,
        201,
        body=lambda w: {
            "stepId": str(w.conversation.reasoning_steps.get().pk),
            "toolName": "order_status",
            "input": '{"order": "A-4417"}',
            "output": '{"status": "shipped"}',
            "status": "success",
            "durationMs": 42,
        },
    ),
    Case(
        "post",
        TOOL_CALLS,
        201,
        body=lambda w: {
            "conversationId": w.conversation_id("mine"),
            "toolName": "weather",
            "arguments": {"city": "Lisbon"},
            "result": {"forecast": "sunny"},
            "status": "error",
            "error": "quota",
        },
        label="no step",
    ),
    Case("post", TOOL_CALLS, 400, body={"toolName": "x"}, label="no conversation"),
    Case(
        "post",
        TOOL_CALLS,
        404,
        body={"toolName": "x", "stepId": str(uuid.uuid4())},
        label="unknown step",
    ),
    *_unauthenticated("post", TOOL_CALLS),
    Case("get", TRACE, 200),
    Case("get", TRACE, 400, conversation="malformed"),
    *_not_found("get", TRACE),
    *_unauthenticated("get", TRACE),
    Case("get", SETTINGS, 200),
    *_unauthenticated("get", SETTINGS),
    Case(
        "patch",
        SETTINGS,
        200,
        body={"fidelity": "detailed", "reason": "agents need the answers"},
        client="admin",
    ),
    Case(
        "patch",
        SETTINGS,
        200,
        body={"fidelity": None, "reason": "back to the default"},
        client="admin",
        label="default",
    ),
    Case(
        "patch",
        SETTINGS,
        400,
        "invalid_fidelity",
        "fidelity",
        body={"fidelity": "verbose", "reason": "x"},
        client="admin",
    ),
    Case(
        "patch",
        SETTINGS,
        400,
        "reason_required",
        "reason",
        body={"fidelity": "compact"},
        client="admin",
    ),
    Case("patch", SETTINGS, 403, "forbidden", body={"fidelity": "compact", "reason": "x"}),
    Case(
        "patch",
        OBSERVATION,
        403,
        "forbidden",
        body={"content": "x", "reason": "x"},
        client="agent",
        label="agent key",
    ),
    Case("delete", REFLECTION, 403, "forbidden", query={"reason": "x"}, client="agent"),
    Case("post", REFLECTION_REVERT, 403, "forbidden", body={"version": 1}, client="agent"),
    *_unauthenticated("patch", SETTINGS),
]


@pytest.fixture
def world(workspace, other_workspace, api, other_api, make_client) -> World:
    conversation = conversation_create(
        workspace=workspace, user_id="alice", title="Move", metadata={"channel": "email"}
    )
    messages = messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="I'm moving to Berlin on 2026-03-01."),
            MessageInput(
                role="assistant",
                content="I'll look up your order first.",
                metadata={"toolCalls": [{"id": "call_1", "type": "function"}]},
            ),
            MessageInput(
                role="tool",
                content='{"order": "A-4417", "status": "packed"}',
                tool_name="lookup_order",
                tool_call_id="call_1",
            ),
            MessageInput(
                role="user", content="Please ship it to Berlin instead.", name="Maria Lopez"
            ),
        ],
    )
    observation = observation_create(
        conversation=conversation,
        actor=SYSTEM_ACTOR,
        text="User moves to Berlin; ship order A-4417 there.",
        priority="high",
        referenced_at=datetime(2026, 3, 1, tzinfo=UTC),
        tags=["address"],
        source_message_ids=[m.id for m in messages[:2]],
    )
    observation_update(
        observation=observation, actor=SYSTEM_ACTOR, reason="tagging", tags=["address", "move"]
    )
    observation.refresh_from_db()
    successor = ReflectionFactory(
        conversation=conversation,
        engine="extractive",
        source_observation_ids=[str(observation.id)],
        window_start_seq=1,
        window_end_seq=2,
    )
    superseded = ReflectionFactory(
        conversation=conversation,
        status="superseded",
        superseded_by=successor,
        source_observation_ids=[str(observation.id)],
    )
    pin = pin_create(
        conversation=conversation, actor=SYSTEM_ACTOR, message_id=messages[3].id, start=0, end=6
    )
    theirs = conversation_create(workspace=other_workspace, user_id="mallory")
    [their_message] = messages_append(
        conversation=theirs, items=[MessageInput(role="user", content="Berlin too.")]
    )
    conversation.refresh_from_db()

    # Requests that later cases replay or collide with.
    assert (
        api.post(
            CONVERSATIONS,
            {"userId": "first"},
            format="json",
            headers={"Idempotency-Key": "create-1"},
        ).status_code
        == 201
    )
    assert (
        api.post(
            f"{CONVERSATIONS}/{conversation.id}/messages",
            {"role": "user", "content": "Hello."},
            format="json",
            headers={"Idempotency-Key": "message-1"},
        ).status_code
        == 201
    )
    conversation.refresh_from_db()
    # Reasoning for the reads to return: a step with a tool call, and a call without one.
    step = reasoning_step_record(
        conversation=conversation, actor=SYSTEM_ACTOR, reasoning="Check the order"
    )
    tool_call_record(
        conversation=None,
        workspace=workspace,
        actor=SYSTEM_ACTOR,
        tool_name="order_status",
        step_id=step.pk,
        input='{"order": "A-4417"}',
        output='{"status": "shipped"}',
        duration_ms=12,
    )
    tool_call_record(
        conversation=conversation, workspace=workspace, actor=SYSTEM_ACTOR, tool_name="ping"
    )
    run = observer_schedule(conversation=conversation, trigger="manual")
    their_run = observer_schedule(conversation=theirs, trigger="manual")
    retrying_run = ReflectorRun.objects.create(
        conversation=conversation,
        trigger="threshold",
        status="retrying",
        attempts=1,
        error="provider returned 503",
        next_attempt_at=timezone.now() + timedelta(seconds=20),
    )
    finished_run = ReflectorRun.objects.create(
        conversation=conversation,
        trigger="manual",
        status="failed",
        attempts=6,
        error="circuit open: the provider failed repeatedly",
        finished_at=timezone.now(),
    )

    wrong_key = APIClient()
    wrong_key.credentials(HTTP_AUTHORIZATION="Bearer md_this-key-was-never-issued")
    return World(
        conversation=conversation,
        messages=messages,
        observation=observation,
        reflection=successor,
        superseded=superseded,
        pin=pin,
        theirs=theirs,
        their_message=their_message,
        context_etag=context_for_conversation(conversation=conversation).etag,
        run=run,
        retrying_run=retrying_run,
        finished_run=finished_run,
        their_run=their_run,
        clients={
            # Response shapes, whatever the scope: a curator key reaches every memory
            # route; tests/core/test_api_scopes.py checks who may call what.
            "key": make_client(workspace, scope="curator"),
            "agent": api,
            "admin": make_client(workspace, scope="admin"),
            "anonymous": APIClient(),
            "wrong_key": wrong_key,
        },
    )


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_each_response_matches_its_documented_schema(openapi, world, case):
    response = case.send(world)

    assert response.status_code == case.status, response.content[:400]
    if case.error:
        body = response.json()
        assert body["code"] == case.error
        assert body.get("field") == case.error_field
    openapi.assert_documents(case.method, case.path, response)


def test_the_cases_cover_every_operation_and_its_errors(openapi):
    for path, method in sorted(_memory_routes()):
        statuses = {c.status for c in CASES if (c.path, c.method) == (path, method)}
        operation = openapi.document["paths"][path][method]
        # A read that takes no parameter and no body has no bad input to answer 400 to.
        takes_input = "requestBody" in operation or any(
            p["in"] in ("path", "query") for p in operation.get("parameters", [])
        )
        answers_404 = "{" in path and (path, method) not in IDEMPOTENT_DELETES
        expected = {401} | ({400} if takes_input else set()) | ({404} if answers_404 else set())
        assert any(200 <= s < 300 for s in statuses), f"no success case for {method} {path}"
        assert expected <= statuses, f"{method.upper()} {path} lacks {expected - statuses}"


def test_interactive_docs_load_nothing_from_the_internet(client):
    import re

    response = client.get("/v1/docs/")
    assert response.status_code == 200
    page = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any("swagger-ui-bundle.js" in a for a in assets)
    # Each from static/, but for the page's own script (?script: no inline script).
    assert all(a.startswith("/static/") or a == "/v1/docs/?script=" for a in assets), assets
    assert "cdn." not in page


def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    from django.core.management import call_command

    # --fail-on-warn: an undocumented response, an unresolvable serializer or a clash of
    # enum names is a failure here, not a warning nobody reads.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    assert (tmp_path / "s.yml").read_text().startswith("openapi: 3.")


def test_serializer_rendered_bodies_keep_the_clients_wire_formats(api, workspace):
    """The bodies the presenters' serializers render keep what the NAMS clients were
    always sent: dates as ``isoformat()`` writes them, blank text as null, and a run's
    fields of the other kind of run left out rather than sent as null."""
    created = api.post("/v1/conversations", {}, format="json").json()
    assert created["userId"] is None and created["title"] is None
    assert created["createdAt"].endswith("+00:00")
    conversation = Conversation.objects.get(pk=created["id"])

    observer = observer_schedule(conversation=conversation, trigger="manual")
    reflector = ReflectorRun.objects.create(conversation=conversation, trigger="manual")
    observer_body = api.get(f"/v1/runs/{observer.pk}").json()
    reflector_body = api.get(f"/v1/runs/{reflector.pk}").json()

    assert "generation" not in observer_body and "windowStartSeq" in observer_body
    assert "windowStartSeq" not in reflector_body and "currentTask" not in reflector_body
    assert reflector_body["generation"] is None
    assert observer_body["engine"] is None and observer_body["startedAt"] is None
    assert observer_body["createdAt"].endswith("+00:00")


def test_the_document_names_and_describes_the_speakers_name(openapi):
    """A client generated from the document can send a message's speaker and read it
    back: ``name`` is an optional, bounded, nullable text on writes and an optional text on
    reads (absent, not null, when no one is named), described in words."""
    components = openapi.document["components"]["schemas"]
    sent = components["MessageInRequest"]["properties"]["name"]
    assert sent["type"] == "string" and sent["maxLength"] == 64 and sent["nullable"] is True
    assert "OpenAI" in sent["description"] and "metadata.name" in sent["description"]
    assert "name" not in components["MessageInRequest"]["required"]
    for shape in ("MessageOut", "RecentMessageOut"):
        read = components[shape]["properties"]["name"]
        assert read["type"] == "string" and "absent" in read["description"]
        assert "name" not in components[shape]["required"]
    chat = components["ChatMessageOut"]["properties"]["name"]
    assert chat["pattern"] == "^[A-Za-z0-9_-]{1,64}$"
