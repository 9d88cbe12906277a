"""Where rendered parts of a context are kept: in this worker (memory blocks, tails and
whole bodies, bounded) and in the shared cache (one entry per slot, stamped with the
versions it was rendered from)."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from cachetools import LRUCache
from django.core.cache import cache

from memory.context.rendering import MemoryBlock, RenderedContext, Tail

if TYPE_CHECKING:
    from memory.context.extension import Extendable

CACHE_SECONDS = 3600
# Part of every cache key here: a change to the rendered shapes bumps it, so a server
# that is upgraded never serves a body cached in the shape before.
RENDER_VERSION = 6


class _EntriesAndItems(LRUCache[str, Any]):
    """An LRU bounded by its items (``getsizeof``) and by its number of entries."""

    def __init__(self, *, entries: int, items: int) -> None:
        super().__init__(maxsize=items, getsizeof=_items_in)
        self.entries = entries

    def __setitem__(self, key: str, value: Any) -> None:
        while key not in self and len(self) >= self.entries:
            self.popitem()
        super().__setitem__(key, value)


def _items_in(value: Any) -> int:
    if isinstance(value, Tail):
        return len(value.messages)
    if isinstance(value, MemoryBlock):
        return len(value.pins) + len(value.reflections) + len(value.observations)
    return 1


def _body_size(rendered: RenderedContext) -> int:
    return len(rendered.body)


# The memory blocks and tails a worker rendered or fetched last, by their cache key. The
# key names every version the entry depends on, so an entry is never stale, only
# unused; a read under a busy writer then costs no round trip for the block. Bounded by
# entries and by the items (messages, memory lines) they hold together: a 10-minute
# load run with 64 entries and no such bound grew each web worker by 450 MB of tails.
LOCAL_ENTRIES_KEPT = 64
LOCAL_ITEMS_KEPT = 20_000
_LOCAL = _EntriesAndItems(entries=LOCAL_ENTRIES_KEPT, items=LOCAL_ITEMS_KEPT)
# Whole rendered bodies, by the same kind of key, bounded by their size: a read that
# finds its body here costs no cache round trip (a large body read from Redis was most of
# a cached read's time).
LOCAL_BODY_BYTES_KEPT = 16 * 1024 * 1024
_BODIES: LRUCache[str, RenderedContext] = LRUCache(
    maxsize=LOCAL_BODY_BYTES_KEPT, getsizeof=_body_size
)
# What extends the newest body of each slot this worker rendered or extended by newer
# messages (memory/context/extension.py), bounded by the size of the bodies they lay out.
# Under a busy writer every read of a slot whose entry was pushed out renders the whole
# tail again: 16 conversations' bodies of 500 KB each (a 32,000-token budget) did not fit
# in 16 MB counted twice.
LOCAL_EXTENDABLE_BYTES_KEPT = 32 * 1024 * 1024
_EXTENDABLE: LRUCache[str, Extendable] = LRUCache(
    maxsize=LOCAL_EXTENDABLE_BYTES_KEPT, getsizeof=lambda kept: kept.size
)
# cachetools' caches are not thread-safe; gthread workers serve reads in threads.
_local_lock = threading.Lock()


def local_clear() -> None:
    """Forget every block, tail and body this worker keeps (tests: a fresh worker)."""
    with _local_lock:
        _LOCAL.clear()
        _TAIL_KEYS.clear()
        _BODIES.clear()
        _EXTENDABLE.clear()
        _LISTED.clear()


def local_get(key: str) -> Any:
    with _local_lock:
        return _LOCAL.get(key)


def local_put(key: str, value: Any, *, replaces: str | None = None) -> None:
    """Keep ``value``; ``replaces``: the key of an entry it supersedes (the same
    conversation's tail before memory changed), dropped at once. A value of more items
    than the whole bound allows is not kept."""
    with _local_lock:
        if replaces is not None:
            _LOCAL.pop(replaces, None)
        try:
            _LOCAL[key] = value
        except ValueError:  # larger than LOCAL_ITEMS_KEPT on its own
            _LOCAL.pop(key, None)


def local_body_get(key: str) -> RenderedContext | None:
    with _local_lock:
        return _BODIES.get(key)


def local_body_put(key: str, rendered: RenderedContext) -> None:
    if len(rendered.body) > LOCAL_BODY_BYTES_KEPT // 4:
        return
    with _local_lock:
        if key not in _BODIES:
            _BODIES[key] = rendered


def local_extendable_get(slot: str) -> Extendable | None:
    with _local_lock:
        return _EXTENDABLE.get(slot)


def local_extendable_put(slot: str, kept: Extendable) -> None:
    if kept.size > LOCAL_EXTENDABLE_BYTES_KEPT // 8:
        return
    with _local_lock:
        _EXTENDABLE[slot] = kept


# The key of each conversation's latest tail in this worker: a tail of an older
# ``memory_version`` is never read again once a newer one is kept.
_TAIL_KEYS: dict[tuple[Any, str], str] = {}


def latest_tail_key(conversation_id: Any, names: str) -> str | None:
    return _TAIL_KEYS.get((conversation_id, names))


def latest_tail_key_set(conversation_id: Any, names: str, key: str) -> None:
    with _local_lock:
        if len(_TAIL_KEYS) > 4 * LOCAL_ENTRIES_KEPT:
            for stale in [k for k, v in _TAIL_KEYS.items() if v not in _LOCAL]:
                del _TAIL_KEYS[stale]
        _TAIL_KEYS[(conversation_id, names)] = key


# The shared cache keeps one entry per slot (a conversation's memory block, or its body
# in one format, budget and naming), stamped with the versions it was rendered from and
# overwritten by the next render. Keyed by version instead, every message write left a
# body of up to a few hundred KB behind for an hour: a 7-minute load run filled Redis
# with 4,749 of them (3 GB). An older render that lands after a newer one only costs the
# next read a render.


def shared_get(slot: str, stamp: str) -> Any:
    kept = cache.get(slot)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == stamp:
        return kept[1]
    return None


def shared_put(slot: str, stamp: str, value: Any) -> None:
    cache.set(slot, (stamp, value), CACHE_SECONDS)
    _slot_listed(slot)


# How many slots one conversation's list names (formats x budgets x naming a client
# asks for; a handful in practice). A slot pushed out of the list expires on its own.
SLOTS_LISTED = 256
# The lists live twice as long as a slot and this worker writes each again once half a
# slot's life has passed, so a list outlives every slot it names without a round trip to
# the shared cache on each render: only a slot this worker has not listed lately costs
# one (a read and a write of its list).
SLOT_LISTS_SECONDS = 2 * CACHE_SECONDS
_LISTED: LRUCache[str, float] = LRUCache(maxsize=4096)  # slot -> when this worker listed it


def _slot_listed(slot: str) -> None:
    """List ``slot`` under its conversation (or end user's memory) id, so that a
    deletion can take every slot (``caches_forget``): a body holds the messages."""
    now = time.monotonic()
    with _local_lock:
        listed_at = _LISTED.get(slot)
    if listed_at is not None and now - listed_at < CACHE_SECONDS / 2:
        return
    owner = _slots_of(_owner_of(slot))
    slots = [s for s in cache.get(owner) or [] if s != slot]
    cache.set(owner, [*slots, slot][-SLOTS_LISTED:], SLOT_LISTS_SECONDS)
    with _local_lock:
        _LISTED[slot] = now


def _owner_of(key: str) -> str:
    """The conversation (or end user) id a key names: ``memdesk:ctx:<version>:<id>:...``."""
    parts = key.split(":")
    return parts[3] if len(parts) > 3 else ""


def _slots_of(owner_id: str) -> str:
    return f"memdesk:ctxslots:{owner_id}"


def caches_forget(owner_ids: Any) -> int:
    """Drop every cached part rendered from these conversations (or end users' memory),
    in this worker and in the shared cache: after a deletion or an erasure nothing the
    cache keeps repeats their messages. Another worker's own LRU keeps its entries until
    they are pushed out; it never serves them (their keys name versions no read asks for
    once the rows are gone). Returns how many shared slots went."""
    ids = [str(i) for i in owner_ids]
    if not ids:
        return 0
    with _local_lock:
        for store in (_LOCAL, _BODIES, _EXTENDABLE):
            for key in [k for k in store if _owner_of(k) in ids]:
                store.pop(key, None)
        for pair in [p for p in _TAIL_KEYS if str(p[0]) in ids]:
            del _TAIL_KEYS[pair]
        for slot in [s for s in _LISTED if _owner_of(s) in ids]:
            del _LISTED[slot]
    owners = [_slots_of(i) for i in ids]
    slots = [slot for listed in cache.get_many(owners).values() for slot in listed]
    cache.delete_many([*slots, *owners])
    return len(slots)
