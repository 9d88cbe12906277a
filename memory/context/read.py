"""``context_for_conversation``: the rendered context of a conversation, through the
caches. The whole body is cached stamped with every version it depends on, the memory
block apart from it, and the tail of recent messages in the worker, extended with the
newer messages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from functools import cached_property
from typing import Any

from django.utils import timezone

from core.errors import MemdeskError
from governance.ledger.buffer import context_manifest_noted
from memory.context.budget import budget_fit
from memory.context.caches import (
    RENDER_VERSION,
    latest_tail_key,
    latest_tail_key_set,
    local_body_get,
    local_body_put,
    local_extendable_get,
    local_extendable_put,
    local_get,
    local_put,
    shared_get,
    shared_put,
)
from memory.context.extension import extend, render_extendable
from memory.context.rebuild import Manifest
from memory.context.rendering import (
    FORMATS,
    Fitted,
    MemoryBlock,
    RenderedContext,
    Tail,
    memory_block,
)
from memory.context.tiers import Reidentifies, memory_tiers, recent_messages, reidentify_items
from memory.models import Conversation, Message
from memory.selectors import (
    ContextVersions,
    deleted_source_ids,
    served_intervals,
    unobserved_messages_between,
)

# The newest unobserved messages a worker keeps of a tail.
LOCAL_TAIL_MAX_MESSAGES = 2000


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


def _memory_block_cached(
    source: _Source,
    *,
    fmt: str,
    today: date,
    names: str,
    reidentifier: Reidentifies | None,
) -> MemoryBlock:
    kind = "json" if fmt == "json" else "lines"  # text and messages share their lines
    slot = f"memdesk:ctxmem:{RENDER_VERSION}:{source.pk}:{kind}:{names}"
    stamp = f"{source.versions.memory_version}:{today.isoformat()}"
    key = f"{slot}:{stamp}"
    block: MemoryBlock | None = local_get(key) or shared_get(slot, stamp)
    if block is None:
        conversation = source.conversation
        tiers = memory_tiers(conversation, today=today, reidentifier=reidentifier)
        block = memory_block(tiers, fmt=kind, conversation=conversation)
        shared_put(slot, stamp, block)
        # What the version served, for the read ledger to render it again
        # (memory/context/rebuild.py): made only the first time the process notes it.
        context_manifest_noted(
            conversation_id=source.pk,
            memory_version=source.versions.memory_version,
            manifest=lambda: Manifest.of(
                tiers,
                intervals=served_intervals(conversation=conversation),
                deleted_sources=deleted_source_ids(
                    conversation=conversation, observations=tiers.observations
                ),
            ).as_json(),
        )
    local_put(key, block)
    return block


def _messages_after(
    source: _Source,
    intervals: tuple[tuple[int, int], ...],
    after_seq: int,
    reidentifier: Reidentifies | None,
) -> list[Message]:
    """The unobserved messages after ``after_seq`` through the read's last_seq, by seq,
    with their pseudonyms replaced when the caller sees values."""
    new = list(
        unobserved_messages_between(
            conversation_id=source.pk,
            intervals=intervals,
            after_seq=after_seq,
            through_seq=source.versions.last_seq,
        )
    )
    if reidentifier is not None:
        reidentify_items(reidentifier, new)
    return new


def _recent_cached(source: _Source, *, names: str, reidentifier: Reidentifies | None) -> Tail:
    """``recent_messages``, reading only the messages written since this worker's tail. Kept in
    the worker only: pickling hundreds of model instances for the shared cache cost more
    (23 ms for 1,800 messages) than reading them again once per memory change."""
    versions = source.versions
    key = f"memdesk:ctxtail:{RENDER_VERSION}:{source.pk}:{versions.memory_version}:{names}"
    tail: Tail | None = local_get(key)
    previous_key = latest_tail_key(source.pk, names)
    if tail is None:
        tail = Tail(0, tuple(served_intervals(conversation=source.conversation)), (), {})
    if tail.through_seq < versions.last_seq:
        # Every message up to last_seq committed with (or before) it: none can appear
        # below it later, so the tail is complete through last_seq.
        new = _messages_after(source, tail.intervals, tail.through_seq, reidentifier)
        messages = tail.messages + tuple(new)
        trimmed = tail.trimmed
        # A tail no Observer run shortens (the pipeline off, or far behind) would grow
        # the worker without bound: only the newest messages are kept.
        cut = len(messages) - LOCAL_TAIL_MAX_MESSAGES
        if cut > 0:
            for message in messages[:cut]:
                tail.wires.pop(message.pk, None)
            messages, trimmed = messages[cut:], trimmed + cut
        tail = Tail(versions.last_seq, tail.intervals, messages, tail.wires, trimmed)
    local_put(key, tail, replaces=previous_key if previous_key != key else None)
    latest_tail_key_set(source.pk, names, key)
    return tail


def _fit_tail(
    source: _Source,
    block: MemoryBlock,
    tail: Tail,
    max_tokens: int | None,
    reidentifier: Reidentifies | None,
) -> tuple[Fitted, dict[Any, str]]:
    """``budget_fit`` of the whole unobserved tail, and the messages' JSON to render it with.
    When the worker kept only the tail's newest messages, that is the same fit as long as
    the budget drops some of them (it drops the oldest first, so all the older ones too);
    otherwise the tail is read whole, and encoded apart from the kept JSON, which stays
    bounded."""
    fitted = budget_fit(block, list(tail.messages), max_tokens)
    if not tail.trimmed:
        return fitted, tail.wires
    if fitted.dropped.get("recentMessages"):
        dropped = fitted.dropped["recentMessages"] + tail.trimmed
        return replace(fitted, dropped={**fitted.dropped, "recentMessages": dropped}), tail.wires
    whole = recent_messages(source.conversation, reidentifier=reidentifier)
    return budget_fit(block, whole, max_tokens), {}


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


def _shared_body(key: _BodyKey) -> RenderedContext | None:
    rendered: RenderedContext | None = shared_get(key.slot, key.stamp)
    if rendered is not None:
        local_body_put(key.local, rendered)
    return rendered


def _extended_body(
    source: _Source, key: _BodyKey, reidentifier: Reidentifies | None
) -> RenderedContext | None:
    """The body this worker rendered last for the slot, extended by the messages written
    since (memory/context/extension.py); None when it keeps none to extend, or the budget
    would drop something once they are in. Kept in the worker only: putting a body of
    hundreds of KB in the shared cache on every write costs more than the extension."""
    versions = source.versions
    kept = local_extendable_get(key.slot)
    if (
        kept is None
        or not kept.matches(memory_version=versions.memory_version, today=key.today)
        # The same body (pushed out of the bodies kept: rendered again, as rarely as
        # that), or one ahead of the versions read (rendered from a newer commit).
        or kept.through_seq >= versions.last_seq
    ):
        return None
    # Read by seq and id, apart from the tail: a worker keeps a bounded number of tails,
    # and one pushed out would be read whole again (thousands of messages under a writer).
    new = _messages_after(source, kept.intervals, kept.through_seq, reidentifier)
    extended = extend(kept, new, wires={}, through_seq=versions.last_seq)
    if extended is None:
        return None
    rendered, kept = extended
    local_extendable_put(key.slot, kept)
    local_body_put(key.local, rendered)
    return rendered


def _rendered_body(
    source: _Source,
    key: _BodyKey,
    fmt: str,
    max_tokens: int | None,
    reidentifier: Reidentifies | None,
) -> RenderedContext:
    """The body rendered from the memory block and the tail (each from its cache when
    there), kept in both caches, and kept to extend."""
    versions = source.versions
    block = _memory_block_cached(
        source, fmt=fmt, today=key.today, names=key.names, reidentifier=reidentifier
    )
    tail = _recent_cached(source, names=key.names, reidentifier=reidentifier)
    fitted, wires = _fit_tail(source, block, tail, max_tokens, reidentifier)
    rendered, kept = render_extendable(
        versions.conversation_id,
        fitted=fitted,
        wires=wires,
        fmt=fmt,
        max_tokens=max_tokens,
        intervals=tail.intervals,
        through_seq=versions.last_seq,
        memory_version=versions.memory_version,
        today=key.today,
    )
    shared_put(key.slot, key.stamp, rendered)
    local_body_put(key.local, rendered)
    if kept is not None:
        local_extendable_put(key.slot, kept)
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

    In order: the body this worker keeps for these versions; the one it rendered last
    for the slot, extended by the messages written since; the shared cache's (it keeps
    the newest render of each slot, ``shared_get``); a render, from the memory block
    (cached apart, with the versions memory depends on) and the tail."""
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
    rendered = local_body_get(key.local)
    if rendered is not None:
        return rendered
    source = _Source(versions, load)
    rendered = _extended_body(source, key, reidentifier) or _shared_body(key)
    if rendered is None:
        rendered = _rendered_body(source, key, fmt, max_tokens, reidentifier)
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
