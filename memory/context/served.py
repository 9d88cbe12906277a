"""A context read as the agent edges serve it: the REST route and the MCP tool.

The cached path is short on purpose: the versions the body depends on (one query), the
redaction policy's word on re-identification from the same row, then the body from a
cache; only a miss loads the conversation and renders it. Every read is counted for
the prompt-cache stability metric (``context_read_record``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from governance.ledger.buffer import Reader, Served, context_read_logged
from governance.redaction.gates import reidentifier_for_api
from memory import selectors
from memory.context.caches import RENDER_VERSION
from memory.context.read import context_for_versions
from memory.context.recalled import recalled_lines, recalled_reserve, with_recalled
from memory.context.rendering import RenderedContext
from memory.metrics import context_read_record
from memory.models import Conversation
from memory.search.recall import RECALL_DEFAULT, recall_for_context


@dataclass(frozen=True)
class ContextRead:
    rendered: RenderedContext
    # The caller's If-None-Match named this body: answer 304 without it.
    not_modified: bool


def context_read(
    *,
    workspace_id: Any,
    conversation_id: str,
    reader: Reader | None,
    fmt: str,
    max_tokens: int | None,
    if_none_match: str | None = None,
    load: Callable[[], Conversation] | None = None,
    query: str = "",
    recall: int = RECALL_DEFAULT,
) -> ContextRead:
    """The context of a conversation in the workspace, as an API key may read it, and
    the read recorded: counted for the metrics, and in the read ledger as ``reader``'s
    (None: not served to an agent, as a bench's read). ``load`` returns the conversation
    when no cache holds its render (by default, the conversation with its workspace in
    one query). With ``query``, up
    to ``recall`` verbatim turns that answer it follow the memory
    (memory/context/recalled.py)."""
    versions = selectors.context_versions(
        workspace_id=workspace_id, conversation_id=conversation_id
    )
    reidentifier = reidentifier_for_api(
        workspace_id=workspace_id, allowed=versions.agents_see_reidentified
    )
    if max_tokens is None:
        max_tokens = versions.context_max_tokens
    lines = (
        recalled_lines(
            recall_for_context(
                workspace_id=workspace_id,
                conversation_id=versions.conversation_id,
                query=query,
                # Those the recent tail holds are left out after the render: ask for more.
                limit=recall * 2,
                reidentifier=reidentifier,
            )
        )
        if query.strip()
        else []
    )
    reserve = recalled_reserve(max_tokens) if query.strip() else 0
    rendered = context_for_versions(
        versions,
        load=load
        or (
            lambda: selectors.conversation_get_with_workspace(
                workspace_id=workspace_id, conversation_id=conversation_id
            )
        ),
        fmt=fmt,
        max_tokens=None if max_tokens is None else max_tokens - reserve,
        reidentifier=reidentifier,
    )
    base_sha256 = ""
    if query.strip():
        base_sha256 = rendered.digest
        rendered = with_recalled(
            rendered, lines, recall=recall, max_tokens=max_tokens, fmt=fmt, query=query
        )
    not_modified = if_none_match is not None and if_none_match == rendered.etag
    context_read_record(
        conversation_id=versions.conversation_id,
        fmt=fmt,
        memory_digest=rendered.memory_digest,
        not_modified=not_modified,
    )
    if reader is not None:
        context_read_logged(
            workspace_id=workspace_id,
            conversation_id=versions.conversation_id,
            reader=reader,
            fmt=fmt,
            max_tokens=max_tokens,
            query=query.strip(),
            recall=recall,
            served=Served(
                memory_version=versions.memory_version,
                last_seq=versions.last_seq,
                body_sha256=rendered.digest,
                token_count=rendered.token_count,
                status=304 if not_modified else 200,
                reidentified=reidentifier is not None,
                render_version=RENDER_VERSION,
                base_sha256=base_sha256,
            ),
        )
    return ContextRead(rendered=rendered, not_modified=not_modified)
