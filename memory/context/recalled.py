"""The recalled section: what a context read with ``query`` adds after the memory.

The section is put at the end of the context the same read renders without a query, so
everything before it (the memory block, the recent messages) stays byte for byte the same
while the questions change, and a prompt cache keyed on that prefix keeps hitting. Each
format carries it its own way:

- ``json``: a ``recalled`` object after the other keys: the query, the turns (tier, id,
  seq, role, name, date, text, score) and their token count;
- ``text``: a ``## Recalled`` section: a ``### <day>`` heading, then one
  ``[name (role)] text`` line per turn, as the recent messages are written;
- ``messages``: one more system message at the end of the array, holding those lines.

The best turns are chosen (whole, best first); they are written in the conversation's
order, which reads as a transcript and dates each day once rather than every line.

Under ``max_tokens`` a read with a query keeps a quarter of the budget for the section,
whatever the question, and fits the memory and the recent messages to the rest: so the
prefix is the same for every question under one budget. The section may also use what
the memory leaves.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.context.rendering import RenderedContext
from memory.search.index import SearchEntry
from memory.search.recall import RecalledTurn
from memory.tokens import token_count

RECALLED_HEADER = "## Recalled"
RECALLED_SYSTEM_HEADER = "Recalled from earlier in this conversation:"
# The share of ``max_tokens`` kept for the section when a read has a query: the memory is
# fitted to the rest, whatever the question, so it stays the same from one question to
# the next (docs/benchmarks.md, "Recall", has the shares measured).
RECALLED_BUDGET_SHARE = 4


@dataclass(frozen=True)
class RecalledLine:
    """A recalled turn as the section writes it (``[speaker] text``, under its day's
    heading), and its tokens, counted once."""

    turn: RecalledTurn
    text: str
    day: str
    cost: int  # tokens, with the newline after it


def _day_heading(day: str) -> str:
    return f"### {day}"


def recalled_lines(turns: Sequence[RecalledTurn]) -> list[RecalledLine]:
    lines = []
    for turn in turns:
        hit = turn.hit
        who = f"{hit.speaker} ({hit.role})" if hit.speaker else (hit.role or hit.kind)
        text = f"[{who}] {turn.text}"
        lines.append(RecalledLine(turn, text, hit.at.date().isoformat(), token_count(text) + 1))
    return lines


_HEADER_COST = token_count(RECALLED_HEADER) + 1
_DAY_COST = token_count(_day_heading("2000-01-01")) + 1


def recalled_reserve(max_tokens: int | None) -> int:
    """What a read with a query keeps for the section out of ``max_tokens`` before the
    memory is fitted: the same share for every question."""
    return 0 if max_tokens is None else max_tokens // RECALLED_BUDGET_SHARE


def _kept(
    lines: Sequence[RecalledLine], rendered: RenderedContext, recall: int, max_tokens: int | None
) -> list[RecalledLine]:
    """The ``recall`` best lines the context does not hold already (a message of its
    recent tail is there), whole, within what ``max_tokens`` leaves, in the
    conversation's order."""
    recent_from = rendered.recent_from_seq
    unseen = [
        line
        for line in lines
        if line.turn.hit.kind != SearchEntry.Kind.MESSAGE
        or recent_from is None
        or (line.turn.hit.seq or 0) < recent_from
    ][:recall]
    room = None if max_tokens is None else max_tokens - (rendered.token_count or 0) - _HEADER_COST
    kept: list[RecalledLine] = []
    days: set[str] = set()
    for line in unseen:
        cost = line.cost + (0 if line.day in days else _DAY_COST)
        if room is not None:
            if cost > room:
                break
            room -= cost
        kept.append(line)
        days.add(line.day)
    return sorted(kept, key=lambda line: (line.turn.hit.at, line.turn.hit.seq or 0))


def _section_lines(kept: Sequence[RecalledLine]) -> list[str]:
    """The kept lines under a heading for each day they come from."""
    written: list[str] = []
    day = None
    for line in kept:
        if line.day != day:
            day = line.day
            written.append(_day_heading(day))
        written.append(line.text)
    return written


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _wire(turn: RecalledTurn) -> dict[str, Any]:
    hit = turn.hit
    return {
        "tier": hit.kind,
        "id": str(hit.source_id),
        "seq": hit.seq,
        "role": hit.role or None,
        "name": hit.speaker or None,
        "at": hit.at.isoformat(),
        "text": turn.text,
        "score": hit.score,
    }


def with_recalled(
    rendered: RenderedContext,
    lines: Sequence[RecalledLine],
    *,
    recall: int,
    max_tokens: int | None,
    fmt: str,
    query: str,
) -> RenderedContext:
    """``rendered`` with the recalled section at its end, the ETag and digest of the whole,
    and the section's tokens added to its count."""
    kept = _kept(lines, rendered, recall, max_tokens)
    texts = _section_lines(kept)
    section_tokens = sum(line.cost for line in kept) + _DAY_COST * len({line.day for line in kept})
    body = rendered.body.decode()
    if fmt == "text":
        section = RECALLED_HEADER + "\n" + "\n".join(texts) if texts else ""
        body = body + "\n\n" + section if body and section else body + section
    elif fmt == "messages":
        payload = json.loads(body)
        if texts:
            content = RECALLED_SYSTEM_HEADER + "\n" + "\n".join(texts)
            payload["messages"].append({"role": "system", "content": content})
        body = _dumps(payload)
    else:
        recalled = {
            "query": query,
            "tokenCount": section_tokens,
            "turns": [_wire(line.turn) for line in kept],
        }
        body = body[:-1] + ',"recalled":' + _dumps(recalled) + "}"
    return rendered.with_body(
        body.encode(), token_count=(rendered.token_count or 0) + section_tokens
    )
