"""What recall gives back: hits as their caller may read them, and the verbatim turns a
context adds for a question.

A hit is shown to each caller exactly as its tier is: an agent reads a note's
pseudonyms, or their values where the workspace's policy lets agents see them (the
``reidentifier`` the API passes), and a message as it is stored (redacted at ingest
where the policy says). The dashboard masks for people on its own side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from core.errors import MemdeskError
from memory.context.tiers import Reidentifies
from memory.models import Observation
from memory.search.index import SearchEntry
from memory.search.query import Question, highlights, question_of, snippet
from memory.search.ranked import Filters, Hit, Scope, search, with_covering_observations

# A recalled turn longer than this is cut to the stretch around the question's words.
RECALLED_TEXT_MAX_CHARS = 600
RECALL_DEFAULT = 10
RECALL_MAX = 50


def parse_recall(raw: object) -> int:
    """``recall``: how many turns a context's recalled section may hold, 1 to 50."""
    if raw is None or raw == "":
        return RECALL_DEFAULT
    value = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    if isinstance(raw, str) and raw.isascii() and raw.isdecimal():
        value = int(raw)
    if value is None or not 1 <= value <= RECALL_MAX:
        raise MemdeskError(
            "invalid_recall",
            f"recall must be a whole number from 1 to {RECALL_MAX}; got {raw!r}.",
            field="recall",
        )
    return value


def readable_hits(hits: Sequence[Hit], reidentifier: Reidentifies | None) -> list[Hit]:
    """The hits with their texts (and speakers) as an API key may read them."""
    if reidentifier is None or not hits:
        return list(hits)
    reidentifier.prepare([h.text for h in hits] + [h.speaker for h in hits if h.speaker])
    return [
        replace(h, text=reidentifier.text(h.text), speaker=reidentifier.text(h.speaker))
        for h in hits
    ]


def hit_to_wire(hit: Hit, question: Question) -> dict:
    """A hit as the API returns it: the stretch of its text around the question's words
    and where in it those words are."""
    text, spans = snippet(hit.text, highlights(hit.text, question))
    wire: dict[str, Any] = {
        "tier": hit.kind,
        "id": str(hit.source_id),
        "conversationId": str(hit.conversation_id),
        "seq": hit.seq,
        "role": hit.role or None,
        "name": hit.speaker or None,
        "at": hit.at.isoformat(),
        "status": hit.status or None,
        "snippet": text,
        "highlights": [list(span) for span in spans],
        "score": hit.score,
    }
    if hit.kind == SearchEntry.Kind.MESSAGE:
        wire["observationIds"] = [str(i) for i in hit.covered_by]
    return wire


def search_wire(
    *,
    query: str,
    scope: Scope,
    filters: Filters,
    limit: int,
    reidentifier: Reidentifies | None,
) -> list[dict]:
    """``/v1/search`` and the MCP ``recall`` tool: the hits, best first, as the caller
    may read them, each with its snippet and a message's observations."""
    question = question_of(query)
    hits = search(question=question, scope=scope, filters=filters, limit=limit, substring=query)
    hits = readable_hits(with_covering_observations(hits), reidentifier)
    return [hit_to_wire(hit, question) for hit in hits]


@dataclass(frozen=True)
class RecalledTurn:
    hit: Hit
    text: str  # as served: the whole turn, or the stretch around the question's words


def recall_for_context(
    *,
    workspace_id: Any,
    conversation_id: Any,
    query: str,
    limit: int,
    reidentifier: Reidentifies | None,
) -> list[RecalledTurn]:
    """What a context may recall for ``query``, best first: the conversation's messages
    and the observations a reflection has since condensed (which the context no longer
    serves), not its active notes (which it does). Which of the messages its recent
    tail already holds is known only once it is rendered (memory/context/recalled.py)."""
    question = question_of(query)
    hits = search(
        question=question,
        scope=Scope(workspace_id=workspace_id, conversation_ids=(conversation_id,)),
        filters=Filters(kinds=(SearchEntry.Kind.MESSAGE, SearchEntry.Kind.OBSERVATION)),
        limit=limit * 3,
        substring=query,
    )
    wanted = [
        hit
        for hit in hits
        if hit.kind == SearchEntry.Kind.MESSAGE or hit.status == Observation.Status.REFLECTED
    ][:limit]
    turns = []
    for hit in readable_hits(wanted, reidentifier):
        text = hit.text
        if len(text) > RECALLED_TEXT_MAX_CHARS:
            text, _ = snippet(text, highlights(text, question), width=RECALLED_TEXT_MAX_CHARS)
        turns.append(RecalledTurn(hit=hit, text=text))
    return turns
