"""Search across the conversations of a workspace."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governance.redaction.masking import mask_messages
from memory.models import Conversation, Message, Observation, Reflection
from memory.search.query import Question, highlights, question_of, snippet
from memory.search.ranked import Filters, Hit, Scope, search
from tenancy.models import Workspace

SEARCH_KINDS = {
    "messages": "Messages",
    "observations": "Observations",
    "reflections": "Reflections",
}
_TIER = {"messages": "message", "observations": "observation", "reflections": "reflection"}
# The index ranks this many candidates of each kind; a message candidate is kept only
# if the question's words are still in what a person sees of it (masked).
SEARCH_CANDIDATES = 500


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "message", "observation", "reflection"
    conversation: Conversation
    item_id: uuid.UUID
    anchor: str  # the item's element id on the conversation page
    query: str  # what the conversation page needs to show the item ("at=12")
    parts: tuple[tuple[str, bool], ...]  # the snippet, each stretch marked or not
    when: datetime
    seq: int | None = None
    role: str = ""
    priority: str = ""
    status: str = ""


def _parts(text: str, question: Question) -> tuple[tuple[str, bool], ...] | None:
    """``text`` cut around the question's words, split into marked and plain stretches;
    None when none of the words is in it."""
    spans = highlights(text, question)
    if not spans and question.only_stop_words:
        at = text.lower().find(" ".join(question.words))
        spans = [(at, at + len(" ".join(question.words)))] if at >= 0 else []
    if not spans:
        return None
    cut, spans = snippet(text, spans)
    parts, at = [], 0
    for start, end in spans:
        parts += [(cut[at:start], False), (cut[start:end], True)]
        at = end
    parts.append((cut[at:], False))
    return tuple((piece, marked) for piece, marked in parts if piece)


@dataclass
class SearchResults:
    counts: dict[str, int]
    capped: bool  # more candidates matched than were read
    hits: dict[str, Sequence[SearchHit]]

    def first_kind_found(self) -> str:
        return next((kind for kind, n in self.counts.items() if n), "messages")


def _ranked(
    workspace: Workspace, question: Question, query: str, end_user: str, kind: str
) -> list[Hit]:
    return search(
        question=question,
        scope=Scope(workspace_id=workspace.pk, end_user=end_user or None),
        filters=Filters(kinds=(_TIER[kind],)),
        limit=SEARCH_CANDIDATES,
        substring=query,
    )


def _in_rank_order(model: type[Any], hits: Sequence[Hit]) -> list[Any]:
    rows = model.objects.select_related("conversation").in_bulk([h.source_id for h in hits])
    return [rows[h.source_id] for h in hits if h.source_id in rows]


def _message_hits(
    workspace: Workspace, question: Question, query: str, end_user: str
) -> tuple[list[SearchHit], bool]:
    ranked = _ranked(workspace, question, query, end_user, "messages")
    rows = _in_rank_order(Message, ranked)
    mask_messages(messages=rows, workspace_id=workspace.pk)
    hits = []
    for message in rows:
        # What the page shows: a hit only inside a masked value is no hit.
        parts = _parts(message.masked_text, question)
        if parts is None:
            continue
        hits.append(
            SearchHit(
                "message",
                message.conversation,
                message.pk,
                anchor=f"m-{message.seq}",
                query=f"at={message.seq}",
                parts=parts,
                when=message.created_at,
                seq=message.seq,
                role=message.role,
            )
        )
    return hits, len(ranked) >= SEARCH_CANDIDATES


def memory_hit(item: Observation | Reflection, question: Question) -> SearchHit | None:
    if isinstance(item, Observation):
        kind, anchor, link = "observation", f"obs-{item.pk}", f"highlight={item.pk}"
    else:
        kind, anchor, link = "reflection", f"refl-{item.pk}", f"reflection={item.pk}"
    parts = _parts(item.text, question)
    if parts is None:
        return None
    return SearchHit(
        kind,
        item.conversation,
        item.pk,
        anchor=anchor,
        query=link,
        parts=parts,
        when=item.observed_at,
        priority=item.priority,
        status=item.status,
    )


def _note_hits(
    workspace: Workspace, question: Question, query: str, end_user: str, kind: str
) -> tuple[list[SearchHit], bool]:
    ranked = _ranked(workspace, question, query, end_user, kind)
    model = Observation if kind == "observations" else Reflection
    hits = [memory_hit(item, question) for item in _in_rank_order(model, ranked)]
    return [hit for hit in hits if hit is not None], len(ranked) >= SEARCH_CANDIDATES


def memory_search(*, workspace: Workspace, query: str, end_user: str = "") -> SearchResults:
    """Messages, observations and reflections of one workspace that best answer
    ``query``, best first, through the recall index (memory/search/): words by their
    stems, accents folded, "phrases" and prefix*. A message is matched on what a
    person sees of it (masked), so search confirms no value a page masks."""
    question = question_of(query)
    found = {"messages": _message_hits(workspace, question, query, end_user)}
    for kind in ("observations", "reflections"):
        found[kind] = _note_hits(workspace, question, query, end_user, kind)
    return SearchResults(
        counts={kind: len(hits) for kind, (hits, _) in found.items()},
        capped=found["messages"][1],
        hits={kind: hits for kind, (hits, _) in found.items()},
    )


def conversations_matching(*, workspace: Workspace, query: str) -> set[uuid.UUID]:
    """The conversations whose messages (as a page shows them), observations or
    reflections hold ``query``'s words: the conversation list's search."""
    results = memory_search(workspace=workspace, query=query)
    return {hit.conversation.pk for hits in results.hits.values() for hit in hits}
