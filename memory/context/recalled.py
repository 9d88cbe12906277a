"""The recalled section: what a context read with ``query`` adds after the memory.

The context without a query is rendered (and cached) as always, and the section is put
at its end, so everything before it (the memory block, the recent messages) is byte for
byte the body the same read without a query returns, and a prompt cache keyed on that
prefix keeps hitting while the questions change. Each format carries it its own way:

- ``json``: a ``recalled`` object after the other keys: the query, the turns (tier, id,
  seq, role, name, date, text, score) and their token count;
- ``text``: a ``## Recalled`` section, one ``[name (role), date] text`` line per turn;
- ``messages``: one more system message at the end of the array.

Under ``max_tokens`` the section takes at most a quarter of the budget (whole turns,
best first): the memory and the recent messages are fitted to what it leaves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from memory.context.rendering import RenderedContext
from memory.search.index import SearchEntry
from memory.search.recall import RecalledTurn
from memory.tokens import token_count

RECALLED_HEADER = "## Recalled"
RECALLED_SYSTEM_HEADER = "Recalled from earlier in this conversation, best match first:"
# A budget's share the section may take at most.
RECALLED_BUDGET_SHARE = 4


@dataclass(frozen=True)
class RecalledLine:
    """A recalled turn as the section writes it, and its tokens, counted once."""

    turn: RecalledTurn
    text: str
    cost: int  # tokens, with the newline after it


def recalled_lines(turns: Sequence[RecalledTurn]) -> list[RecalledLine]:
    lines = []
    for turn in turns:
        hit = turn.hit
        who = f"{hit.speaker} ({hit.role})" if hit.speaker else (hit.role or hit.kind)
        text = f"[{who}, {hit.at.date().isoformat()}] {turn.text}"
        lines.append(RecalledLine(turn, text, token_count(text) + 1))
    return lines


_HEADER_COST = token_count(RECALLED_HEADER) + 1


def recalled_reserve(lines: Sequence[RecalledLine], max_tokens: int | None) -> int:
    """What the section takes out of ``max_tokens`` before the memory is fitted."""
    if max_tokens is None or not lines:
        return 0
    wanted = _HEADER_COST + sum(line.cost for line in lines)
    return min(wanted, max_tokens // RECALLED_BUDGET_SHARE)


def _kept(
    lines: Sequence[RecalledLine], rendered: RenderedContext, recall: int, max_tokens: int | None
) -> list[RecalledLine]:
    """The ``recall`` best lines the context does not hold already (a message of its
    recent tail is there), whole, within what ``max_tokens`` leaves."""
    recent_from = rendered.recent_from_seq
    unseen = [
        line
        for line in lines
        if line.turn.hit.kind != SearchEntry.Kind.MESSAGE
        or recent_from is None
        or (line.turn.hit.seq or 0) < recent_from
    ][:recall]
    if max_tokens is None:
        return unseen
    room = max_tokens - (rendered.token_count or 0) - _HEADER_COST
    kept = []
    for line in unseen:
        if line.cost > room:
            break
        kept.append(line)
        room -= line.cost
    return kept


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
    """``rendered`` with the recalled section at its end, and the ETag of the whole."""
    kept = _kept(lines, rendered, recall, max_tokens)
    texts = [line.text for line in kept]
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
            "tokenCount": sum(line.cost for line in kept),
            "turns": [_wire(line.turn) for line in kept],
        }
        body = body[:-1] + ',"recalled":' + _dumps(recalled) + "}"
    encoded = body.encode()
    etag = '"' + hashlib.sha256(encoded).hexdigest()[:32] + '"'
    return replace(rendered, body=encoded, etag=etag)
