"""Search across the conversations of a workspace, matching messages as the searching
role sees them.

Every page masks the values the scan found in messages, so a role that sees masks
(viewer, reviewer) matches a message on its masked text: a card number, an e-mail
address or a name shown masked finds nothing, and the words around it are found as
ever. A role that may reveal those values (``raw_values``: compliance officer, admin)
matches the stored text; a hit is still shown masked, with the masked value that holds
the question's words marked, and the caller audits a search whose results a masked
value accounts for (``governance.redaction.masked_search``). Observations and
reflections are matched as stored, as their pages show them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from governance.redaction.masking import TextPart, mask_messages
from memory.models import Conversation, Message, Observation, Reflection
from memory.search.query import Question, highlights, question_of, snippet
from memory.search.ranked import MAX_HITS, Filters, Hit, Scope, search
from tenancy.models import Workspace

SEARCH_KINDS = {
    "messages": "Messages",
    "observations": "Observations",
    "reflections": "Reflections",
}
_TIER = {"messages": "message", "observations": "observation", "reflections": "reflection"}
# The index ranks this many candidates of each kind (the most it gives); a message
# candidate is kept only if the question's words are in what the role matches of it
# (masked, unless raw). A kind that fills them says so: more may match.
SEARCH_CANDIDATES = MAX_HITS


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
    # A search of raw values only: a masked value holds some of the question's words
    # (``in_masked``), or all the words found (``only_masked``: a role that sees masks
    # would not have this hit).
    in_masked: bool = False
    only_masked: bool = False


Span = tuple[int, int]


def _spans(text: str, question: Question) -> list[Span]:
    """Where the question's words are in ``text``."""
    spans = highlights(text, question)
    if not spans and question.only_stop_words:
        at = text.lower().find(" ".join(question.words))
        spans = [(at, at + len(" ".join(question.words)))] if at >= 0 else []
    return spans


def _parts(text: str, question: Question) -> tuple[tuple[str, bool], ...] | None:
    """``text`` cut around the question's words, split into marked and plain stretches;
    None when none of the words is in it."""
    spans = _spans(text, question)
    return _cut(text, spans) if spans else None


def _shown_spans(parts: Sequence[TextPart], spans: Sequence[Span]) -> tuple[list[Span], bool, bool]:
    """``spans`` of a message's stored text moved to its masked text (the parts joined
    as a page shows them): a span in a plain stretch stays on its words, one that
    touches a masked value marks the whole ``<ENTITY_TYPE>`` label. Also whether any
    span touched a masked value and whether any fell outside one."""
    shown: list[Span] = []
    in_masked = in_plain = False
    start = at = 0  # where the part starts in the stored text, and in the masked one
    for part in parts:
        end = start + len(part.text)
        inside = [(a, b) for a, b in spans if a < end and start < b]
        if inside and part.masked:
            shown.append((at, at + len(part.label)))
            in_masked = True
        elif inside:
            shown += [(max(a, start) - start + at, min(b, end) - start + at) for a, b in inside]
            in_plain = True
        start, at = end, at + len(part.label if part.masked else part.text)
    return sorted(set(shown)), in_masked, in_plain


def _cut(text: str, spans: list[Span]) -> tuple[tuple[str, bool], ...]:
    """``text`` cut around ``spans``, split into marked and plain stretches."""
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
    masked_matches: int = 0  # hits that mark a masked value (a search of raw values)

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
    workspace: Workspace, question: Question, query: str, end_user: str, raw_values: bool
) -> tuple[list[SearchHit], bool]:
    ranked = _ranked(workspace, question, query, end_user, "messages")
    rows = _in_rank_order(Message, ranked)
    mask_messages(messages=rows, workspace_id=workspace.pk)
    hits = []
    for message in rows:
        in_masked = in_plain = False
        if raw_values:
            # The stored text is matched; the hit is shown masked all the same.
            spans, in_masked, in_plain = _shown_spans(
                message.parts, _spans(message.content, question)
            )
        else:
            # What the page shows: a hit only inside a masked value is no hit.
            spans = _spans(message.masked_text, question)
        if not spans:
            continue
        hits.append(
            SearchHit(
                "message",
                message.conversation,
                message.pk,
                anchor=f"m-{message.seq}",
                query=f"at={message.seq}",
                parts=_cut(message.masked_text, spans),
                when=message.created_at,
                seq=message.seq,
                role=message.role,
                in_masked=in_masked,
                only_masked=in_masked and not in_plain,
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


def memory_search(
    *, workspace: Workspace, query: str, end_user: str = "", raw_values: bool = False
) -> SearchResults:
    """Messages, observations and reflections of one workspace that best answer
    ``query``, best first, through the recall index (memory/search/): words by their
    stems, accents folded, "phrases" and prefix*. A message is matched on what a
    person sees of it (masked), so search confirms no value a page masks; with
    ``raw_values`` (a role that may reveal them) on its stored text, each hit shown
    masked and counted in ``masked_matches`` when it marks a masked value."""
    question = question_of(query)
    found = {"messages": _message_hits(workspace, question, query, end_user, raw_values)}
    for kind in ("observations", "reflections"):
        found[kind] = _note_hits(workspace, question, query, end_user, kind)
    return SearchResults(
        counts={kind: len(hits) for kind, (hits, _) in found.items()},
        capped=found["messages"][1],
        hits={kind: hits for kind, (hits, _) in found.items()},
        masked_matches=sum(hit.in_masked for hit in found["messages"][0]),
    )


@dataclass(frozen=True)
class ConversationMatches:
    """The conversations whose memory holds a query's words: the conversation list's
    search, beside its title, end user and id."""

    ids: frozenset[uuid.UUID]
    # Of ``ids`` (a search of raw values only): the conversations found only inside
    # masked values, which a role that sees masks would not find.
    only_masked: frozenset[uuid.UUID] = frozenset()


def conversations_matching(
    *, workspace: Workspace, query: str, raw_values: bool = False
) -> ConversationMatches:
    """The conversations whose messages (as the role sees them: masked, unless
    ``raw_values``), observations or reflections hold ``query``'s words."""
    results = memory_search(workspace=workspace, query=query, raw_values=raw_values)
    hits = [hit for kind_hits in results.hits.values() for hit in kind_hits]
    seen = {hit.conversation.pk for hit in hits if not hit.only_masked}
    return ConversationMatches(
        ids=frozenset(hit.conversation.pk for hit in hits),
        only_masked=frozenset(hit.conversation.pk for hit in hits) - seen,
    )
