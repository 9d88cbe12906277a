"""The agent API under /v1, one module per resource. Views parse and check input
(``inputs``), call one service or selector, and shape the answer (``presenters``); the
services own every rule. The MCP tools (``memory.mcp``) share ``inputs`` and
``presenters``."""
