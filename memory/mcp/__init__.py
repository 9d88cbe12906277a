"""Memdesk's memory as an MCP server: the tools (``tools``, run by ``handlers``, acting
as a ``callers`` key) and the transports (``server``). It shares the REST API's
``memory.api.inputs`` and ``memory.api.presenters``, nothing else of it."""
