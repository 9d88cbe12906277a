"""The MCP tools moved to ``memory/mcp/``; this path keeps the tests that import them
from here working until their imports are rewritten."""

from __future__ import annotations

from memory.mcp.callers import HttpCaller, McpCaller, McpToolError, StdioCaller
from memory.mcp.tools import TOOLS, TOOLS_BY_NAME, list_tools, run_tool, tools_for

__all__ = [
    "TOOLS",
    "TOOLS_BY_NAME",
    "HttpCaller",
    "McpCaller",
    "McpToolError",
    "StdioCaller",
    "list_tools",
    "run_tool",
    "tools_for",
]
