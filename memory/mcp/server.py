"""Memdesk's memory as an MCP server (the official ``mcp`` SDK's low-level server), over
two transports: stdio (``manage.py mcp_server``) and streamable HTTP at ``/mcp``.

The tools are in ``memory/mcp/tools.py`` and run synchronously, like the REST views; the
SDK is asynchronous, so each tool call is handed to Django's thread-sensitive executor
(``sync_to_async``). Over HTTP the web process is WSGI (gunicorn's sync workers), so
``/mcp`` serves the SDK's stateless transport with JSON responses, one request at a
time: the request's ASGI form is run to completion by ``async_to_sync`` inside the
view, and the tool calls come back to the request's own thread and database connection.
No session is kept between requests and no SSE stream is opened (GET and DELETE answer
405, which the protocol allows a server without a stream).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from importlib.metadata import version
from typing import Any

import anyio
from asgiref.sync import async_to_sync, sync_to_async
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from rest_framework.request import Request

from core.request_ids import request_id_of
from memory.mcp.callers import HttpCaller, McpCaller, StdioCaller
from memory.mcp.tools import list_tools, run_tool
from tenancy.api_base import ApiView

INSTRUCTIONS = (
    "Memdesk keeps the long-term memory of your conversations with end users. Start a "
    "conversation with create_conversation (or find one with list_conversations), record "
    "every turn with add_messages, and read get_context before you answer: it holds "
    "pinned quotes, reflections, dated observations and the recent messages. Pin exact "
    "wording that must never be paraphrased with pin_fact."
)


def build_server(caller: McpCaller) -> Server[Any, Any]:
    """An MCP server whose tools act as ``caller``'s API key."""
    server: Server[Any, Any] = Server(
        "memdesk", version=version("memdesk"), instructions=INSTRUCTIONS
    )

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def _list_tools() -> list[types.Tool]:
        return await sync_to_async(list_tools, thread_sensitive=True)(caller)

    # Arguments are checked by the REST API's own serializers, so that a refusal is the
    # sentence the REST API gives, not the JSON-schema validator's.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def _call_tool(name: str, arguments: dict[str, Any]) -> Any:
        result = await sync_to_async(run_tool, thread_sensitive=True)(caller, name, arguments)
        if isinstance(result, str):
            return [types.TextContent(type="text", text=result)]
        return result

    return server


# --- stdio ----------------------------------------------------------------------------------------


async def _serve_stdio(raw_key: str) -> None:
    server = build_server(StdioCaller(raw_key=raw_key))
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_stdio(raw_key: str) -> None:
    """Serve MCP on standard input and output until the client closes them."""
    anyio.run(_serve_stdio, raw_key)


# --- streamable HTTP ---------------------------------------------------------------------------


def _asgi_scope(request: Request) -> dict[str, Any]:
    headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in request.headers.items()
    ]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "root_path": "",
        "headers": headers,
        "client": (request.META.get("REMOTE_ADDR") or "", 0),
        "server": (request.META.get("SERVER_NAME", ""), int(request.META.get("SERVER_PORT") or 0)),
    }


async def _serve_http(
    caller: McpCaller, scope: dict[str, Any], body: bytes
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Run one request through the SDK's stateless transport; its status, headers and
    body."""
    server = build_server(caller)
    manager = StreamableHTTPSessionManager(app=server, stateless=True, json_response=True)
    received = False
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def receive() -> dict[str, Any]:
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": body, "more_body": False}
        # The client stays connected until the answer is sent.
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return status, headers, b"".join(chunks)


# Headers the WSGI server sets itself.
_HOP_BY_HOP = {b"content-length", b"transfer-encoding", b"connection"}


class McpApi(ApiView):
    # The MCP streamable HTTP endpoint: JSON-RPC messages in, JSON out. Authenticated,
    # scoped and rate-limited like every /v1 route; CSRF does not apply (no session).

    def perform_content_negotiation(self, request: Request, force: bool = False) -> Any:
        # A client asks for text/event-stream when it opens a stream with GET; it must be
        # answered 405 (no stream here), which it takes as "none", not 406.
        return super().perform_content_negotiation(request, force=True)

    @extend_schema(exclude=True)
    def post(self, request: Request) -> HttpResponse:
        caller = HttpCaller(
            api_key=self.api_key,
            request_id=request_id_of(request),
            ip_address=request.META.get("REMOTE_ADDR"),
        )
        status, headers, body = async_to_sync(_serve_http)(
            caller, _asgi_scope(request), request.body
        )
        response = HttpResponse(body, status=status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                response[name.decode("latin-1")] = value.decode("latin-1")
        return response
