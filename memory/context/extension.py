"""A body extended by the messages written since it was rendered, instead of rendered again.

Under a busy writer nearly every read follows a write to its conversation. Between two
changes of memory (each moves ``memory_version``) a write only appends to the unobserved
tail, and every format lays the recent messages out last (``rendering.Layout``): the new
body is the old layout with the new messages' pieces after its recent ones, the oldest
dropped as the budget requires, and a new end. The worker keeps, per body slot, that
layout and the messages it holds (``Extendable``); nothing of the memory block and no
message already there is rendered or costed again.

What cannot be extended is rendered whole: a body without recent messages (the text format
adds their heading with the first), a budget that would drop more than recent messages,
and, in the messages format, dropping a turn whose tool calls later turns answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, NamedTuple

from memory.context.rendering import (
    CONTENT_TYPES,
    Fitted,
    Layout,
    RenderedContext,
    chat_turn,
    compose,
    json_end,
    json_message,
    layout,
    memory_digest_of,
    message_cost,
    text_line,
    tool_calls_of,
)
from memory.models import Message


class Held(NamedTuple):
    """What the budget and the messages format need of a message a body holds: not the
    model instance (a body holds a thousand of them)."""

    seq: int
    cost: int  # tokens, as ``budget_fit`` counts them
    calls: bool  # an assistant turn with tool calls (``tool_calls_of``)

    @classmethod
    def of(cls, message: Message) -> Held:
        return cls(message.seq, message_cost(message), bool(tool_calls_of(message)))


@dataclass(frozen=True)
class Extendable:
    """A rendered body a worker can extend: the versions it was rendered from, its layout,
    the recent messages it holds (one per piece of ``laid.recent``) and its budget."""

    laid: Layout  # never changed once kept: an extension lays out a copy
    held: tuple[Held, ...]
    # The observed seq ranges at ``memory_version`` (fixed until it moves): the messages
    # after ``through_seq`` outside them are what extends the body.
    intervals: tuple[tuple[int, int], ...]
    through_seq: int  # the conversation's last_seq the body was rendered at
    memory_version: int
    today: date
    fmt: str
    max_tokens: int | None
    token_count: int  # of the whole body, as the budget counts it
    dropped: dict[str, int]  # what the budget left out (only older messages, if anything)
    memory_digest: str
    size: int  # the bytes it holds: the body's twice (the layout's pieces, ``prefix``)
    # The body but its end, and its SHA-256 so far: a body extended without dropping a
    # message adds the new pieces' bytes to both instead of joining and hashing it all
    # again (a py-spy profile of the mixed load put 8% of a web worker's samples in the
    # join, 4% in the hash).
    prefix: bytes
    prefix_hash: Any  # hashlib's sha256 of ``prefix``; None lays the body out whole

    def matches(self, *, memory_version: int, today: date) -> bool:
        return self.memory_version == memory_version and self.today == today


def render_extendable(
    conversation_id: Any,
    *,
    fitted: Fitted,
    wires: dict[Any, str],
    fmt: str,
    max_tokens: int | None,
    intervals: tuple[tuple[int, int], ...],
    through_seq: int,
    memory_version: int,
    today: date,
) -> tuple[RenderedContext, Extendable | None]:
    """The body of ``fitted``, and what extends it later (None for a body without recent
    messages)."""
    laid = layout(conversation_id, fitted=fitted, wires=wires, fmt=fmt, max_tokens=max_tokens)
    if not fitted.recent:
        return compose(laid, fitted=fitted, fmt=fmt), None
    prefix = laid.prefix()
    prefix_hash = hashlib.sha256(prefix)
    rendered = RenderedContext.of_parts(
        prefix,
        prefix_hash,
        laid.end.encode(),
        content_type=CONTENT_TYPES[fmt],
        memory_digest=memory_digest_of(fitted),
        token_count=fitted.token_count,
        recent_from_seq=fitted.recent[0].seq,
    )
    return rendered, Extendable(
        laid=laid,
        held=tuple(Held.of(m) for m in fitted.recent),
        intervals=intervals,
        through_seq=through_seq,
        memory_version=memory_version,
        today=today,
        fmt=fmt,
        max_tokens=max_tokens,
        token_count=fitted.token_count,
        dropped=dict(fitted.dropped),
        memory_digest=rendered.memory_digest,
        size=2 * len(rendered.body),
        prefix=prefix,
        prefix_hash=prefix_hash,
    )


def _oldest_to_drop(kept: Extendable, token_count: int) -> tuple[int, int] | None:
    """How many of the kept messages the budget drops, oldest first, and the tokens left;
    None when dropping them all would not be enough (observations would go next)."""
    drop = 0
    if kept.max_tokens is not None:
        while token_count > kept.max_tokens and drop < len(kept.held):
            token_count -= kept.held[drop].cost
            drop += 1
        if token_count > kept.max_tokens:
            return None
    return drop, token_count


def extend(
    kept: Extendable,
    messages: Sequence[Message],
    *,
    wires: dict[Any, str],
    through_seq: int,
) -> tuple[RenderedContext, Extendable] | None:
    """``kept``'s body with ``messages`` (every recent message after its ``through_seq``,
    up to ``through_seq``, in order) after its recent ones and the oldest dropped as the
    budget requires, byte for byte what a render of the whole gives (``budget_fit``
    drops the oldest messages first, so the messages it drops now are the kept ones'
    first); None where that is not so (see the module)."""
    added_held = tuple(Held.of(m) for m in messages)
    token_count = kept.token_count + sum(h.cost for h in added_held)
    dropping = _oldest_to_drop(kept, token_count)
    if dropping is None:
        return None
    drop, token_count = dropping
    if kept.fmt == "messages" and any(h.calls for h in kept.held[:drop]):
        return None  # a later tool turn may answer one of its calls: rendered otherwise
    open_calls = set(kept.laid.open_calls)
    if kept.fmt == "text":
        added = [text_line(m) for m in messages]
    elif kept.fmt == "messages":
        added = [chat_turn(m, open_calls) for m in messages]
    else:
        added = [json_message(m, wires) for m in messages]
    dropped = kept.dropped
    if kept.max_tokens is not None:
        dropped = {**dropped, "recentMessages": dropped["recentMessages"] + drop}
    end = "" if kept.fmt == "text" else json_end(kept.max_tokens, token_count, dropped)
    laid = replace(
        kept.laid, recent=kept.laid.recent[drop:] + added, end=end, open_calls=open_calls
    )
    if drop or kept.prefix_hash is None:
        prefix = laid.prefix()
        prefix_hash = hashlib.sha256(prefix)
    else:
        # The pieces after the kept ones: the kept prefix and its hash carry on.
        pieces = kept.laid.lead + kept.laid.recent
        new = ((laid.sep if pieces else "") + laid.sep.join(added)).encode() if added else b""
        prefix = kept.prefix + new
        prefix_hash = kept.prefix_hash.copy()
        prefix_hash.update(new)
    held = kept.held[drop:] + added_held
    rendered = RenderedContext.of_parts(
        prefix,
        prefix_hash,
        end.encode(),
        content_type=CONTENT_TYPES[kept.fmt],
        memory_digest=kept.memory_digest,
        token_count=token_count,
        recent_from_seq=held[0].seq,
    )
    extended = replace(
        kept,
        laid=laid,
        held=held,
        through_seq=through_seq,
        token_count=token_count,
        dropped=dropped,
        size=2 * len(rendered.body),
        prefix=prefix,
        prefix_hash=prefix_hash,
    )
    return rendered, extended
