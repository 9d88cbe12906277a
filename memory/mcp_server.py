"""The MCP server moved to ``memory/mcp/server.py``; this path keeps ``config/urls.py``
importing ``McpApi`` until its import is rewritten."""

from __future__ import annotations

from memory.mcp.server import McpApi, build_server, serve_stdio

__all__ = ["McpApi", "build_server", "serve_stdio"]
