"""Who calls the MCP tools, and what one call acts as: the API key, its audit identity,
and memory as that key may read it."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from django.db import close_old_connections

from core.actors import Actor, ActorType
from governance.redaction.gates import reidentifier_for_api
from memory import selectors
from memory.context.tiers import Reidentifies, readable_items
from memory.models import Conversation, Message, Observation, Pin, Reflection
from tenancy.auth import api_key_authenticate
from tenancy.models import ApiKey

RowT = TypeVar("RowT", Message, Observation, Reflection, Pin)

# What a tool answers: a JSON object (sent as structured content and as its JSON text)
# or plain text (the context in text format).
ToolResult = dict[str, Any] | str


class McpToolError(Exception):
    """A refused tool call; the MCP server answers it as a tool error whose text is the
    sentence (the REST API's own for the same refusal)."""


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
