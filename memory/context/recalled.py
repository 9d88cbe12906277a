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
from dataclasses import replace
from typing import Any

from memory.context.rendering import RenderedContext
from memory.search.recall import RecalledTurn
from memory.tokens import token_count

RECALLED_HEADER = "## Recalled"
RECALLED_SYSTEM_HEADER = "Recalled from earlier in this conversation, best match first:"
# A budget's share the section may take at most.
RECALLED_BUDGET_SHARE = 4


def _line(turn: RecalledTurn) -> str:
    hit = turn.hit
    who = f"{hit.speaker} ({hit.role})" if hit.speaker else (hit.role or hit.kind)
    return f"[{who}, {hit.at.date().isoformat()}] {turn.text}"


def line_cost(turn: RecalledTurn) -> int:
    return token_count(_line(turn)) + 1  # + the newline


def recalled_reserve(turns: Sequence[RecalledTurn], max_tokens: int | None) -> int:
    """What the section takes out of ``max_tokens`` before the memory is fitted."""
    if max_tokens is None or not turns:
        return 0
    wanted = token_count(RECALLED_HEADER) + 1 + sum(line_cost(t) for t in turns)
    return min(wanted, max_tokens // RECALLED_BUDGET_SHARE)


def fit_turns(turns: Sequence[RecalledTurn], room: int | None) -> list[RecalledTurn]:
    """Whole turns, best first, within ``room`` tokens (None: all of them)."""
    if room is None:
        return list(turns)
    kept: list[RecalledTurn] = []
    used = token_count(RECALLED_HEADER) + 1
    for turn in turns:
        cost = line_cost(turn)
        if used + cost > room:
            break
        kept.append(turn)
        used += cost
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
    rendered: RenderedContext, turns: Sequence[RecalledTurn], *, fmt: str, query: str
) -> RenderedContext:
    """``rendered`` with the recalled section at its end, and the ETag of the whole."""
    lines = [_line(t) for t in turns]
    body = rendered.body.decode()
    if fmt == "text":
        section = RECALLED_HEADER + "\n" + "\n".join(lines) if lines else ""
        body = body + "\n\n" + section if body and section else body + section
    elif fmt == "messages":
        payload = json.loads(body)
        if lines:
            content = RECALLED_SYSTEM_HEADER + "\n" + "\n".join(lines)
            payload["messages"].append({"role": "system", "content": content})
        body = _dumps(payload)
    else:
        recalled = {
            "query": query,
            "tokenCount": sum(token_count(line) + 1 for line in lines),
            "turns": [_wire(t) for t in turns],
        }
        body = body[:-1] + ',"recalled":' + _dumps(recalled) + "}"
    encoded = body.encode()
    etag = '"' + hashlib.sha256(encoded).hexdigest()[:32] + '"'
    return replace(rendered, body=encoded, etag=etag)
