"""``context_for_conversation``: the three tiers an agent puts into its prompt.

Pinned quotes (verbatim, never trimmed), then reflections (most condensed), then active
observations (and, in place of a stale reflection, its sources as they now stand), then
the recent messages that no observation covers yet. The rendered bytes are cached under
a key that changes with every write to the conversation (``last_seq``,
``memory_version``) and with the day (relative dates), so an unchanged conversation
answers with identical bytes and ETag. The memory block (pins, reflections,
observations, rendered and costed) is cached apart, by ``memory_version`` and the day
only: messages are written far more often than memory changes, and a message write then
renders only the tail, and leaves the memory sections' bytes (the prompt prefix a
provider's prompt cache keys on) as they were. The tail itself is cached by
``memory_version`` with the seq it runs through, and extended with the newer messages.

A workspace whose redaction policy lets agents see re-identified memory is served its
pseudonyms (``<PERSON_1>``) replaced by their values, before the budget is fitted. Those
renders are cached under a key of their own that also changes whenever a pseudonym is
forgotten, so a value never outlives its deletion in the cache.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import date
from functools import cached_property
from typing import Any, Protocol, TypeVar

from django.utils import timezone

from core.cache import cache_get, cache_set
from core.errors import MemdeskError
from memory.engines.base import MEMORY_BLOCK_HEADER
from memory.models import (
    PRIORITY_KEEP_RANK,
    Conversation,
    Message,
    Observation,
    Pin,
    Reflection,
)
from memory.selectors import (
    ContextVersions,
    active_reflections,
    covered_intervals,
    deleted_source_ids,
    pin_list,
    served_observations,
    unobserved_messages,
    unobserved_messages_between,
)
from memory.tokens import token_count
from memory.wire import (
    memory_line,
    observation_to_wire,
    pin_to_wire,
    recent_message_to_wire,
    reflection_to_wire,
    tool_result_text,
)

ItemT = TypeVar("ItemT", Message, Observation, Reflection, Pin)

FORMATS = ("json", "text", "messages")
# Tokens a chat message costs beyond its content (role and separators), as OpenAI counts.
MESSAGE_OVERHEAD_TOKENS = 4
CACHE_SECONDS = 3600
# Part of every cache key here: a change to the rendered shapes bumps it, so a server
# that is upgraded never serves a body cached in the shape before.
RENDER_VERSION = 3


class Reidentifies(Protocol):
    """``governance.pseudonyms.Reidentifier`` as memory sees it (through the gates)."""

    cache_key: str

    def prepare(self, texts: Iterable[str]) -> None: ...

    def text(self, text: str) -> str: ...


@dataclass(frozen=True)
class RenderedContext:
    body: bytes
    content_type: str
    etag: str
    # A digest of the memory sections served (pins, reflections, observations, as
    # rendered and fitted): equal digests, byte-identical memory block. Empty in
    # renders cached before it existed.
    memory_digest: str = ""


def parse_max_tokens(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise MemdeskError(
            "invalid_max_tokens",
            f"max_tokens must be a positive whole number; got {raw!r}.",
            field="max_tokens",
        )
    return value


def _message_cost(message: Message) -> int:
    return message.token_count + MESSAGE_OVERHEAD_TOKENS


def _memory_cost(item: Observation | Reflection, today: date) -> int:
    return token_count(memory_line(item, today=today)) + 1  # + the newline between lines


@dataclass
class _Tiers:
    pins: list[Pin]
    reflections: list[Reflection]
    observations: list[Observation]
    recent: list[Message]
    today: date  # for the relative dates in memory lines


@dataclass(frozen=True)
class _MemoryItem:
    cost: int  # tokens against a budget
    rendered: str  # the memory line (text, messages) or the wire object as JSON (json)


@dataclass(frozen=True)
class _MemoryBlock:
    """Pins, reflections and observations, each rendered once and costed: everything of a
    context that changes only with ``memory_version`` (and the day, and the pseudonyms
    forgotten). A message write appends to the tail and leaves this block, and so the
    bytes of the memory sections, as they were."""

    pins: tuple[_MemoryItem, ...]
    reflections: tuple[_MemoryItem, ...]
    observations: tuple[_MemoryItem, ...]
    # Indexes into ``observations``, the first to drop first: the lowest priority, and
    # among equals the oldest.
    drop_order: tuple[int, ...]


@dataclass(frozen=True)
class _Fitted:
    """Which items of a block and a tail a budget keeps."""

    pins: tuple[_MemoryItem, ...]
    reflections: tuple[_MemoryItem, ...]
    observations: tuple[_MemoryItem, ...]
    recent: list[Message]
    token_count: int
    dropped: dict[str, int]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _memory_block(tiers: _Tiers, *, fmt: str, conversation: Conversation) -> _MemoryBlock:
    today = tiers.today
    as_json = fmt == "json"
    deleted: frozenset[str] = frozenset()
    if as_json:
        deleted = deleted_source_ids(conversation=conversation, observations=tiers.observations)
    pins = tuple(
        _MemoryItem(pin.token_count + 1, _dumps(pin_to_wire(pin)) if as_json else pin.text)
        for pin in tiers.pins
    )
    reflections = tuple(
        _MemoryItem(
            _memory_cost(r, today),
            _dumps(reflection_to_wire(r, today=today)) if as_json else memory_line(r, today=today),
        )
        for r in tiers.reflections
    )
    observations = tuple(
        _MemoryItem(
            _memory_cost(o, today),
            _dumps(observation_to_wire(o, today=today, deleted_sources=deleted))
            if as_json
            else memory_line(o, today=today),
        )
        for o in tiers.observations
    )
    by_expendability = sorted(
        range(len(tiers.observations)),
        key=lambda i: (
            -PRIORITY_KEEP_RANK[tiers.observations[i].priority],
            tiers.observations[i].observed_at,
            tiers.observations[i].window_start_seq or 0,
        ),
    )
    return _MemoryBlock(pins, reflections, observations, tuple(by_expendability))


def _fit(block: _MemoryBlock, recent: list[Message], max_tokens: int | None) -> _Fitted:
    """Drop whole items until the context fits: the oldest recent messages first, then the
    lowest-priority (and, among equals, oldest) observations, then the oldest reflections.
    Pins are counted first and never dropped: a budget smaller than the pins leaves only
    the pins, and ``token_count`` says by how much it is exceeded."""
    message_costs = [_message_cost(m) for m in recent]
    total = (
        sum(item.cost for item in block.pins)
        + sum(message_costs)
        + sum(item.cost for item in block.observations)
        + sum(item.cost for item in block.reflections)
    )
    if max_tokens is None:
        return _Fitted(block.pins, block.reflections, block.observations, recent, total, {})

    drop_messages = 0
    while total > max_tokens and drop_messages < len(recent):
        total -= message_costs[drop_messages]
        drop_messages += 1

    dropped_observations: set[int] = set()
    for index in block.drop_order:
        if total <= max_tokens:
            break
        total -= block.observations[index].cost
        dropped_observations.add(index)

    drop_reflections = 0
    while total > max_tokens and drop_reflections < len(block.reflections):
        total -= block.reflections[drop_reflections].cost
        drop_reflections += 1

    return _Fitted(
        pins=block.pins,
        reflections=block.reflections[drop_reflections:],
        observations=tuple(
            item for i, item in enumerate(block.observations) if i not in dropped_observations
        ),
        recent=recent[drop_messages:],
        token_count=total,
        dropped={
            "recentMessages": drop_messages,
            "observations": len(dropped_observations),
            "reflections": drop_reflections,
        },
    )


def _memory_sections(fitted: _Fitted) -> list[str]:
    sections = []
    if fitted.pins:
        # Only when there are pins: without them the block stays byte for byte the one
        # the neo4j-agent-memory client builds.
        sections.append("## Pinned\n" + "\n".join(item.rendered for item in fitted.pins))
    if fitted.reflections:
        lines = (item.rendered for item in fitted.reflections)
        sections.append("## Reflections\n" + "\n".join(lines))
    if fitted.observations:
        lines = (item.rendered for item in fitted.observations)
        sections.append("## Observations\n" + "\n".join(lines))
    return sections


def _render_text(fitted: _Fitted) -> str:
    """The block the neo4j-agent-memory client builds from the JSON context, byte for byte."""
    parts = _memory_sections(fitted)
    if fitted.recent:
        parts.append(
            "## Recent Messages\n" + "\n".join(f"[{m.role}] {m.content}" for m in fitted.recent)
        )
    return "\n\n".join(parts)


def _render_messages(fitted: _Fitted) -> list[dict[str, Any]]:
    """An OpenAI chat ``messages`` array: the memory as one system message, then the turns.

    OpenAI accepts a ``tool`` message only as the answer to a ``tool_calls`` entry of an
    earlier assistant message. Assistant messages carry those calls in
    ``metadata.toolCalls``; a tool result whose call is not in the array (never sent, or
    trimmed away) becomes a user message that names the tool, so the array stays valid.
    """
    chat: list[dict[str, Any]] = []
    memory_parts = _memory_sections(fitted)
    if memory_parts:
        chat.append(
            {"role": "system", "content": MEMORY_BLOCK_HEADER + "\n\n" + "\n\n".join(memory_parts)}
        )
    open_calls: set[str] = set()
    for message in fitted.recent:
        turn: dict[str, Any] = {"role": message.role, "content": message.content}
        tool_calls = (message.metadata or {}).get("toolCalls")
        if message.role == Message.Role.ASSISTANT and isinstance(tool_calls, list) and tool_calls:
            turn["tool_calls"] = tool_calls
            open_calls.update(str(c.get("id")) for c in tool_calls if isinstance(c, dict))
        elif message.role == Message.Role.TOOL:
            if message.tool_call_id and message.tool_call_id in open_calls:
                turn["tool_call_id"] = message.tool_call_id
            else:
                turn = {"role": "user", "content": tool_result_text(message)}
        chat.append(turn)
    return chat


def _render_json(conversation_id: Any, fitted: _Fitted, wires: dict[Any, str]) -> str:
    """``json.dumps`` of the payload, byte for byte, with the memory items' JSON taken from
    the block and each message's from ``wires`` (filled here), rather than encoded again."""
    recent = ",".join(
        wires.get(m.pk) or wires.setdefault(m.pk, _dumps(recent_message_to_wire(m)))
        for m in fitted.recent
    )
    return (
        '{"conversationId":'
        + _dumps(str(conversation_id))
        + ',"pins":['
        + ",".join(item.rendered for item in fitted.pins)
        + '],"reflections":['
        + ",".join(item.rendered for item in fitted.reflections)
        + '],"observations":['
        + ",".join(item.rendered for item in fitted.observations)
        + '],"recentMessages":['
        + recent
        + "]"
    )


def readable_items(reidentifier: Reidentifies | None, items: Iterable[ItemT]) -> list[ItemT]:
    """The rows as an API key may read them: with the values put back when
    ``reidentifier`` is given (the workspace's policy lets agents see them)."""
    rows = list(items)
    if reidentifier is not None:
        reidentify_items(reidentifier, rows)
    return rows


def reidentify_items(
    reidentifier: Reidentifies, items: Iterable[Message | Observation | Reflection | Pin]
) -> None:
    """Put the values back into these rows' texts, in memory only (they are never saved),
    recounting the tokens of those that changed."""
    items = list(items)
    fields = [("content" if isinstance(item, Message) else "text") for item in items]
    reidentifier.prepare(getattr(item, name) for item, name in zip(items, fields, strict=True))
    for item, name in zip(items, fields, strict=True):
        before = getattr(item, name)
        after = reidentifier.text(before)
        if after != before:
            setattr(item, name, after)
            item.token_count = token_count(after)


def _memory_tiers(
    conversation: Conversation, *, today: date, reidentifier: Reidentifies | None
) -> _Tiers:
    tiers = _Tiers(
        pins=list(pin_list(conversation=conversation)),
        reflections=list(active_reflections(conversation=conversation)),
        observations=list(served_observations(conversation=conversation)),
        recent=[],
        today=today,
    )
    if reidentifier is not None:
        reidentify_items(reidentifier, [*tiers.pins, *tiers.reflections, *tiers.observations])
    return tiers


def _recent(conversation: Conversation, *, reidentifier: Reidentifies | None) -> list[Message]:
    recent = list(unobserved_messages(conversation=conversation))
    if reidentifier is not None:
        reidentify_items(reidentifier, recent)
    return recent


# The memory blocks and tails a worker rendered or fetched last, by their cache key. The
# key names every version the entry depends on, so an entry is never stale, only
# unused; a read under a busy writer then costs no round trip for the block. Bounded by
# entries and by the items (messages, memory lines) they hold together: a 10-minute
# load run with 64 entries and no such bound grew each web worker by 450 MB of tails.
_LOCAL: OrderedDict[str, Any] = OrderedDict()
LOCAL_ENTRIES_KEPT = 64
LOCAL_ITEMS_KEPT = 20_000
LOCAL_TAIL_MAX_MESSAGES = 2000
_local_items = 0
_local_lock = threading.Lock()


def _items_in(value: Any) -> int:
    if isinstance(value, _Tail):
        return len(value.messages)
    if isinstance(value, _MemoryBlock):
        return len(value.pins) + len(value.reflections) + len(value.observations)
    return 1


def local_clear() -> None:
    """Forget every block, tail and body this worker keeps (tests: a fresh worker)."""
    global _local_items, _body_bytes
    with _local_lock:
        _LOCAL.clear()
        _TAIL_KEYS.clear()
        _BODIES.clear()
        _local_items = _body_bytes = 0


def _local_get(key: str) -> Any:
    with _local_lock:
        value = _LOCAL.get(key)
        if value is not None:
            _LOCAL.move_to_end(key)
        return value


def _local_put(key: str, value: Any, *, replaces: str | None = None) -> None:
    """Keep ``value``; ``replaces``: the key of an entry it supersedes (the same
    conversation's tail before memory changed), dropped at once."""
    global _local_items
    with _local_lock:
        for old_key in (key, replaces):
            if old_key is not None and old_key in _LOCAL:
                _local_items -= _items_in(_LOCAL.pop(old_key))
        _LOCAL[key] = value
        _local_items += _items_in(value)
        while len(_LOCAL) > 1 and (
            len(_LOCAL) > LOCAL_ENTRIES_KEPT or _local_items > LOCAL_ITEMS_KEPT
        ):
            _, dropped = _LOCAL.popitem(last=False)
            _local_items -= _items_in(dropped)


# Whole rendered bodies, by the same kind of key, bounded by their size: a read that
# finds its body here costs no cache round trip (a large body read from Redis was most of
# a cached read's time).
_BODIES: OrderedDict[str, RenderedContext] = OrderedDict()
LOCAL_BODY_BYTES_KEPT = 16 * 1024 * 1024
_body_bytes = 0


def _local_body_get(key: str) -> RenderedContext | None:
    with _local_lock:
        rendered = _BODIES.get(key)
        if rendered is not None:
            _BODIES.move_to_end(key)
        return rendered


def _local_body_put(key: str, rendered: RenderedContext) -> None:
    global _body_bytes
    if len(rendered.body) > LOCAL_BODY_BYTES_KEPT // 4:
        return
    with _local_lock:
        if key in _BODIES:
            return
        _BODIES[key] = rendered
        _body_bytes += len(rendered.body)
        while _body_bytes > LOCAL_BODY_BYTES_KEPT:
            _, dropped = _BODIES.popitem(last=False)
            _body_bytes -= len(dropped.body)


class _Source:
    """The conversation a render reads: its versions, known at once, and the row itself,
    loaded only when a part of the context is in no cache (under a busy writer the memory
    block and the tail usually are, and the new messages are read by id and seq)."""

    def __init__(self, versions: ContextVersions, load: Callable[[], Conversation]) -> None:
        self.versions = versions
        self.pk = versions.conversation_id
        self._load = load

    @cached_property
    def conversation(self) -> Conversation:
        return self._load()


# The shared cache keeps one entry per slot (a conversation's memory block, or its body
# in one format, budget and naming), stamped with the versions it was rendered from and
# overwritten by the next render. Keyed by version instead, every message write left a
# body of up to a few hundred KB behind for an hour: a 7-minute load run filled Redis
# with 4,749 of them (3 GB). An older render that lands after a newer one only costs the
# next read a render.


def _shared_get(slot: str, stamp: str) -> Any:
    kept = cache_get(slot)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == stamp:
        return kept[1]
    return None


def _shared_put(slot: str, stamp: str, value: Any) -> None:
    cache_set(slot, (stamp, value), CACHE_SECONDS)


def _memory_block_cached(
    source: _Source,
    *,
    fmt: str,
    today: date,
    names: str,
    reidentifier: Reidentifies | None,
) -> _MemoryBlock:
    kind = "json" if fmt == "json" else "lines"  # text and messages share their lines
    slot = f"memdesk:ctxmem:{RENDER_VERSION}:{source.pk}:{kind}:{names}"
    stamp = f"{source.versions.memory_version}:{today.isoformat()}"
    key = f"{slot}:{stamp}"
    block: _MemoryBlock | None = _local_get(key) or _shared_get(slot, stamp)
    if block is None:
        conversation = source.conversation
        tiers = _memory_tiers(conversation, today=today, reidentifier=reidentifier)
        block = _memory_block(tiers, fmt=kind, conversation=conversation)
        _shared_put(slot, stamp, block)
    _local_put(key, block)
    return block


@dataclass(frozen=True)
class _Tail:
    """The recent messages up to ``through_seq``. Between two changes of memory (each
    moves ``memory_version``: an Observer run, a redaction, a deletion) the tail only
    grows at its end, so a newer one is this one plus the messages after it."""

    through_seq: int
    intervals: tuple[tuple[int, int], ...]  # the observed seq ranges, fixed until then
    messages: tuple[Message, ...]
    wires: dict[Any, str]  # each message's JSON, by id, as the json format needs it
    # Older unobserved messages left out of ``messages`` (the newest
    # LOCAL_TAIL_MAX_MESSAGES are kept): a budget that drops messages drops them first.
    trimmed: int = 0


# The key of each conversation's latest tail in this worker: a tail of an older
# ``memory_version`` is never read again once a newer one is kept.
_TAIL_KEYS: dict[tuple[Any, str], str] = {}


def _recent_cached(source: _Source, *, names: str, reidentifier: Reidentifies | None) -> _Tail:
    """``_recent``, reading only the messages written since this worker's tail. Kept in
    the worker only: pickling hundreds of model instances for the shared cache cost more
    (23 ms for 1,800 messages) than reading them again once per memory change."""
    versions = source.versions
    key = f"memdesk:ctxtail:{RENDER_VERSION}:{source.pk}:{versions.memory_version}:{names}"
    tail: _Tail | None = _local_get(key)
    previous_key = _TAIL_KEYS.get((source.pk, names))
    if tail is None:
        tail = _Tail(0, tuple(covered_intervals(conversation=source.conversation)), (), {})
    if tail.through_seq < versions.last_seq:
        # Every message up to last_seq committed with (or before) it: none can appear
        # below it later, so the tail is complete through last_seq.
        new = list(
            unobserved_messages_between(
                conversation_id=source.pk,
                intervals=tail.intervals,
                after_seq=tail.through_seq,
                through_seq=versions.last_seq,
            )
        )
        if reidentifier is not None:
            reidentify_items(reidentifier, new)
        messages = tail.messages + tuple(new)
        trimmed = tail.trimmed
        # A tail no Observer run shortens (the pipeline off, or far behind) would grow
        # the worker without bound: only the newest messages are kept.
        cut = len(messages) - LOCAL_TAIL_MAX_MESSAGES
        if cut > 0:
            for message in messages[:cut]:
                tail.wires.pop(message.pk, None)
            messages, trimmed = messages[cut:], trimmed + cut
        tail = _Tail(versions.last_seq, tail.intervals, messages, tail.wires, trimmed)
    _local_put(key, tail, replaces=previous_key if previous_key != key else None)
    with _local_lock:
        if len(_TAIL_KEYS) > 4 * LOCAL_ENTRIES_KEPT:
            for stale in [k for k, v in _TAIL_KEYS.items() if v not in _LOCAL]:
                del _TAIL_KEYS[stale]
        _TAIL_KEYS[(source.pk, names)] = key
    return tail


def _fit_tail(
    source: _Source,
    block: _MemoryBlock,
    tail: _Tail,
    max_tokens: int | None,
    reidentifier: Reidentifies | None,
) -> tuple[_Fitted, dict[Any, str]]:
    """``_fit`` of the whole unobserved tail, and the messages' JSON to render it with.
    When the worker kept only the tail's newest messages, that is the same fit as long as
    the budget drops some of them (it drops the oldest first, so all the older ones too);
    otherwise the tail is read whole, and encoded apart from the kept JSON, which stays
    bounded."""
    fitted = _fit(block, list(tail.messages), max_tokens)
    if not tail.trimmed:
        return fitted, tail.wires
    if fitted.dropped.get("recentMessages"):
        dropped = fitted.dropped["recentMessages"] + tail.trimmed
        return replace(fitted, dropped={**fitted.dropped, "recentMessages": dropped}), tail.wires
    whole = _recent(source.conversation, reidentifier=reidentifier)
    return _fit(block, whole, max_tokens), {}


def _render(
    conversation_id: Any,
    *,
    fitted: _Fitted,
    wires: dict[Any, str],
    fmt: str,
    max_tokens: int | None,
) -> RenderedContext:
    budget: dict[str, Any] = {}
    if max_tokens is not None:
        budget = {
            "maxTokens": max_tokens,
            "tokenCount": fitted.token_count,
            "trimmed": fitted.dropped,
        }

    if fmt == "text":
        body = _render_text(fitted).encode()
        content_type = "text/plain; charset=utf-8"
    else:
        if fmt == "messages":
            text = _dumps({"messages": _render_messages(fitted), **budget})
        else:
            text = _render_json(conversation_id, fitted, wires)
            text += "".join(f",{_dumps(name)}:{_dumps(value)}" for name, value in budget.items())
            text += "}"
        body = text.encode()
        content_type = "application/json"
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    memory = hashlib.blake2b(digest_size=16)
    for section in (fitted.pins, fitted.reflections, fitted.observations):
        for item in section:
            memory.update(item.rendered.encode())
            memory.update(b"\x1e")
        memory.update(b"\x1d")
    return RenderedContext(
        body=body, content_type=content_type, etag=etag, memory_digest=memory.hexdigest()
    )


def effective_max_tokens(conversation: Conversation, max_tokens: int | None) -> int | None:
    """The request's budget, or else the workspace's default (``None``: no budget)."""
    if max_tokens is not None:
        return max_tokens
    return conversation.workspace.context_max_tokens


@dataclass(frozen=True)
class _BodyKey:
    """Where a whole body is cached: its slot in the shared cache and the stamp of the
    versions it depends on; the reidentifier's name for its pseudonyms and the day it is
    rendered for are used by the parts' keys too."""

    slot: str
    stamp: str
    names: str
    today: date

    @property
    def local(self) -> str:
        return f"{self.slot}:{self.stamp}"


def _body_key(
    *,
    conversation_id: Any,
    last_seq: int,
    memory_version: int,
    fmt: str,
    max_tokens: int | None,
    reidentifier: Reidentifies | None,
) -> _BodyKey:
    if fmt not in FORMATS:
        raise MemdeskError(
            "invalid_format", f"format must be one of {', '.join(FORMATS)}.", field="format"
        )
    today = timezone.now().date()
    names = reidentifier.cache_key if reidentifier is not None else "pseudonyms"
    return _BodyKey(
        slot=f"memdesk:ctx:{RENDER_VERSION}:{conversation_id}:{fmt}:{max_tokens}:{names}",
        stamp=f"{last_seq}:{memory_version}:{today.isoformat()}",
        names=names,
        today=today,
    )


def _cached_body(key: _BodyKey) -> RenderedContext | None:
    rendered: RenderedContext | None = _local_body_get(key.local) or _shared_get(
        key.slot, key.stamp
    )
    if rendered is not None:
        _local_body_put(key.local, rendered)
    return rendered


def context_for_versions(
    versions: ContextVersions,
    *,
    load: Callable[[], Conversation],
    fmt: str = "json",
    max_tokens: int | None = None,
    reidentifier: Reidentifies | None = None,
) -> RenderedContext:
    """The rendered context of the conversation ``versions`` describe; ``load`` returns
    the conversation itself, and is called only when a part of it is in no cache (a read
    that finds its body, or its memory block and tail, loads nothing). Without
    ``max_tokens``, the workspace's default budget applies (if it has one).

    The whole body is cached stamped with every version it depends on; the memory block
    apart from it with the versions memory depends on, so a message write re-renders
    only the tail. The shared cache keeps the newest of each (``_shared_get``)."""
    if max_tokens is None:
        max_tokens = versions.context_max_tokens
    key = _body_key(
        conversation_id=versions.conversation_id,
        last_seq=versions.last_seq,
        memory_version=versions.memory_version,
        fmt=fmt,
        max_tokens=max_tokens,
        reidentifier=reidentifier,
    )
    rendered = _cached_body(key)
    if rendered is None:
        source = _Source(versions, load)
        block = _memory_block_cached(
            source, fmt=fmt, today=key.today, names=key.names, reidentifier=reidentifier
        )
        tail = _recent_cached(source, names=key.names, reidentifier=reidentifier)
        fitted, wires = _fit_tail(source, block, tail, max_tokens, reidentifier)
        rendered = _render(
            versions.conversation_id,
            fitted=fitted,
            wires=wires,
            fmt=fmt,
            max_tokens=max_tokens,
        )
        _shared_put(key.slot, key.stamp, rendered)
        _local_body_put(key.local, rendered)
    return rendered


def context_for_conversation(
    *,
    conversation: Conversation,
    fmt: str = "json",
    max_tokens: int | None = None,
    reidentifier: Reidentifies | None = None,
) -> RenderedContext:
    """The rendered context; with ``reidentifier``, pseudonyms replaced by their values.
    Without ``max_tokens``, the workspace's default budget applies (if it has one)."""
    versions = ContextVersions(
        conversation_id=conversation.pk,
        last_seq=conversation.last_seq,
        memory_version=conversation.memory_version,
        context_max_tokens=conversation.workspace.context_max_tokens,
        agents_see_reidentified=reidentifier is not None,  # the caller decided; not read here
    )
    return context_for_versions(
        versions,
        load=lambda: conversation,
        fmt=fmt,
        max_tokens=max_tokens,
        reidentifier=reidentifier,
    )


@dataclass(frozen=True)
class TierCost:
    """One tier of a served context: how many items, and the tokens they cost against a
    budget (as ``max_tokens`` counts them: a message's role and separators, a memory
    line's date and marker, the newline between lines)."""

    name: str
    count: int
    tokens: int
    dropped: int = 0  # items ``max_tokens`` left out


@dataclass(frozen=True)
class ContextBudget:
    tiers: list[TierCost]
    max_tokens: int | None
    token_count: int  # the whole context, after fitting the budget
    recent_message_ids: list[Any]  # the unobserved messages served, after fitting

    @property
    def over_budget(self) -> bool:
        return self.max_tokens is not None and self.token_count > self.max_tokens


def context_budget(
    *,
    conversation: Conversation,
    max_tokens: int | None = None,
    reidentifier: Reidentifies | None = None,
) -> ContextBudget:
    """What each tier of ``context_for_conversation`` (same arguments) costs: the same
    tiers, costed and fitted by the same functions, for pages that show the budget.
    Rendered afresh (not from the cache): ``reidentifier`` sees every text served."""
    max_tokens = effective_max_tokens(conversation, max_tokens)
    today = timezone.now().date()
    tiers = _memory_tiers(conversation, today=today, reidentifier=reidentifier)
    block = _memory_block(tiers, fmt="lines", conversation=conversation)
    fitted = _fit(block, _recent(conversation, reidentifier=reidentifier), max_tokens)
    dropped = fitted.dropped
    costs = [
        TierCost("Pinned", len(fitted.pins), sum(item.cost for item in fitted.pins)),
        TierCost(
            "Reflections",
            len(fitted.reflections),
            sum(item.cost for item in fitted.reflections),
            dropped.get("reflections", 0),
        ),
        TierCost(
            "Observations",
            len(fitted.observations),
            sum(item.cost for item in fitted.observations),
            dropped.get("observations", 0),
        ),
        TierCost(
            "Recent messages",
            len(fitted.recent),
            sum(_message_cost(m) for m in fitted.recent),
            dropped.get("recentMessages", 0),
        ),
    ]
    return ContextBudget(
        tiers=costs,
        max_tokens=max_tokens,
        token_count=sum(cost.tokens for cost in costs),
        recent_message_ids=[m.pk for m in fitted.recent],
    )
