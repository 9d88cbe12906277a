"""``context_for_conversation``: the three tiers an agent puts into its prompt.

Pinned quotes (verbatim, never trimmed), then reflections (most condensed), then active
observations (and, in place of a stale reflection, its sources as they now stand), then
the recent messages that no observation covers yet. The rendered bytes
are cached under a key that changes with every write to the conversation (``last_seq``,
``memory_version``) and with the day (relative dates), so an unchanged conversation
answers with identical bytes and ETag.

A workspace whose redaction policy lets agents see re-identified memory is served its
pseudonyms (``<PERSON_1>``) replaced by their values, before the budget is fitted. Those
renders are cached under a key of their own that also changes whenever a pseudonym is
forgotten, so a value never outlives its deletion in the cache.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol

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
    active_reflections,
    deleted_source_ids,
    pin_list,
    served_observations,
    unobserved_messages,
)
from memory.tokens import token_count
from memory.wire import (
    memory_line,
    message_to_wire,
    observation_to_wire,
    pin_to_wire,
    reflection_to_wire,
)

FORMATS = ("json", "text", "messages")
# Tokens a chat message costs beyond its content (role and separators), as OpenAI counts.
MESSAGE_OVERHEAD_TOKENS = 4
CACHE_SECONDS = 3600


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
    dropped: dict[str, int]
    today: date  # for the relative dates in memory lines


def _fit_to_budget(tiers: _Tiers, max_tokens: int) -> int:
    """Drop whole items until the context fits: the oldest recent messages first, then the
    lowest-priority (and, among equals, oldest) observations, then the oldest reflections.
    Pins are counted first and never dropped: a budget smaller than the pins leaves only
    the pins, and the returned total says by how much it is exceeded."""
    message_costs = [_message_cost(m) for m in tiers.recent]
    observation_costs = {o.pk: _memory_cost(o, tiers.today) for o in tiers.observations}
    reflection_costs = [_memory_cost(r, tiers.today) for r in tiers.reflections]
    pin_costs = [pin.token_count + 1 for pin in tiers.pins]  # + the newline between lines
    total = (
        sum(pin_costs)
        + sum(message_costs)
        + sum(observation_costs.values())
        + sum(reflection_costs)
    )

    drop_messages = 0
    while total > max_tokens and drop_messages < len(tiers.recent):
        total -= message_costs[drop_messages]
        drop_messages += 1

    by_expendability = sorted(
        tiers.observations,
        key=lambda o: (-PRIORITY_KEEP_RANK[o.priority], o.observed_at, o.window_start_seq or 0),
    )
    dropped_observations: set[Any] = set()
    for observation in by_expendability:
        if total <= max_tokens:
            break
        total -= observation_costs[observation.pk]
        dropped_observations.add(observation.pk)

    drop_reflections = 0
    while total > max_tokens and drop_reflections < len(tiers.reflections):
        total -= reflection_costs[drop_reflections]
        drop_reflections += 1

    tiers.recent = tiers.recent[drop_messages:]
    tiers.observations = [o for o in tiers.observations if o.pk not in dropped_observations]
    tiers.reflections = tiers.reflections[drop_reflections:]
    tiers.dropped = {
        "recentMessages": drop_messages,
        "observations": len(dropped_observations),
        "reflections": drop_reflections,
    }
    return total


def _memory_sections(tiers: _Tiers) -> list[str]:
    sections = []
    if tiers.pins:
        # Only when there are pins: without them the block stays byte for byte the one
        # the neo4j-agent-memory client builds.
        sections.append("## Pinned\n" + "\n".join(pin.text for pin in tiers.pins))
    if tiers.reflections:
        lines = (memory_line(r, today=tiers.today) for r in tiers.reflections)
        sections.append("## Reflections\n" + "\n".join(lines))
    if tiers.observations:
        lines = (memory_line(o, today=tiers.today) for o in tiers.observations)
        sections.append("## Observations\n" + "\n".join(lines))
    return sections


def _render_text(tiers: _Tiers) -> str:
    """The block the neo4j-agent-memory client builds from the JSON context, byte for byte."""
    parts = _memory_sections(tiers)
    if tiers.recent:
        parts.append(
            "## Recent Messages\n" + "\n".join(f"[{m.role}] {m.content}" for m in tiers.recent)
        )
    return "\n\n".join(parts)


def _render_messages(tiers: _Tiers) -> list[dict[str, Any]]:
    """An OpenAI chat ``messages`` array: the memory as one system message, then the turns.

    OpenAI accepts a ``tool`` message only as the answer to a ``tool_calls`` entry of an
    earlier assistant message. Assistant messages carry those calls in
    ``metadata.toolCalls``; a tool result whose call is not in the array (never sent, or
    trimmed away) becomes a user message that names the tool, so the array stays valid.
    """
    chat: list[dict[str, Any]] = []
    memory_parts = _memory_sections(tiers)
    if memory_parts:
        chat.append(
            {"role": "system", "content": MEMORY_BLOCK_HEADER + "\n\n" + "\n\n".join(memory_parts)}
        )
    open_calls: set[str] = set()
    for message in tiers.recent:
        turn: dict[str, Any] = {"role": message.role, "content": message.content}
        tool_calls = (message.metadata or {}).get("toolCalls")
        if message.role == Message.Role.ASSISTANT and isinstance(tool_calls, list) and tool_calls:
            turn["tool_calls"] = tool_calls
            open_calls.update(str(c.get("id")) for c in tool_calls if isinstance(c, dict))
        elif message.role == Message.Role.TOOL:
            if message.tool_call_id and message.tool_call_id in open_calls:
                turn["tool_call_id"] = message.tool_call_id
            else:
                label = message.tool_name or "tool"
                turn = {"role": "user", "content": f"[{label} result] {message.content}"}
        chat.append(turn)
    return chat


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


def _served_tiers(
    conversation: Conversation, *, today: date, reidentifier: Reidentifies | None
) -> _Tiers:
    tiers = _Tiers(
        pins=list(pin_list(conversation=conversation)),
        reflections=list(active_reflections(conversation=conversation)),
        observations=list(served_observations(conversation=conversation)),
        recent=list(unobserved_messages(conversation=conversation)),
        dropped={},
        today=today,
    )
    if reidentifier is not None:
        reidentify_items(
            reidentifier, [*tiers.pins, *tiers.reflections, *tiers.observations, *tiers.recent]
        )
    return tiers


def _render(
    conversation: Conversation,
    *,
    fmt: str,
    max_tokens: int | None,
    today: date,
    reidentifier: Reidentifies | None = None,
) -> RenderedContext:
    tiers = _served_tiers(conversation, today=today, reidentifier=reidentifier)
    budget: dict[str, Any] = {}
    if max_tokens is not None:
        used = _fit_to_budget(tiers, max_tokens)
        budget = {"maxTokens": max_tokens, "tokenCount": used, "trimmed": tiers.dropped}

    if fmt == "text":
        body = _render_text(tiers).encode()
        content_type = "text/plain; charset=utf-8"
    else:
        payload: dict[str, Any]
        if fmt == "messages":
            payload = {"messages": _render_messages(tiers)}
        else:
            deleted = deleted_source_ids(conversation=conversation, observations=tiers.observations)
            payload = {
                "conversationId": str(conversation.id),
                "pins": [pin_to_wire(pin) for pin in tiers.pins],
                "reflections": [reflection_to_wire(r, today=today) for r in tiers.reflections],
                "observations": [
                    observation_to_wire(o, today=today, deleted_sources=deleted)
                    for o in tiers.observations
                ],
                "recentMessages": [message_to_wire(m) for m in tiers.recent],
            }
        payload.update(budget)
        body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
        content_type = "application/json"
    etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
    return RenderedContext(body=body, content_type=content_type, etag=etag)


def context_for_conversation(
    *,
    conversation: Conversation,
    fmt: str = "json",
    max_tokens: int | None = None,
    reidentifier: Reidentifies | None = None,
) -> RenderedContext:
    """The rendered context; with ``reidentifier``, pseudonyms replaced by their values."""
    if fmt not in FORMATS:
        raise MemdeskError(
            "invalid_format", f"format must be one of {', '.join(FORMATS)}.", field="format"
        )
    today = timezone.now().date()
    names = reidentifier.cache_key if reidentifier is not None else "pseudonyms"
    key = (
        f"memdesk:ctx:{conversation.pk}:{conversation.last_seq}:{conversation.memory_version}"
        f":{fmt}:{max_tokens}:{today.isoformat()}:{names}"
    )
    rendered: RenderedContext | None = cache_get(key)
    if rendered is None:
        rendered = _render(
            conversation, fmt=fmt, max_tokens=max_tokens, today=today, reidentifier=reidentifier
        )
        cache_set(key, rendered, CACHE_SECONDS)
    return rendered


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
    tiers, costed and fitted by the same functions, for pages that show the budget."""
    today = timezone.now().date()
    tiers = _served_tiers(conversation, today=today, reidentifier=reidentifier)
    if max_tokens is not None:
        _fit_to_budget(tiers, max_tokens)
    dropped = tiers.dropped or {}
    costs = [
        TierCost("Pinned", len(tiers.pins), sum(pin.token_count + 1 for pin in tiers.pins)),
        TierCost(
            "Reflections",
            len(tiers.reflections),
            sum(_memory_cost(r, today) for r in tiers.reflections),
            dropped.get("reflections", 0),
        ),
        TierCost(
            "Observations",
            len(tiers.observations),
            sum(_memory_cost(o, today) for o in tiers.observations),
            dropped.get("observations", 0),
        ),
        TierCost(
            "Recent messages",
            len(tiers.recent),
            sum(_message_cost(m) for m in tiers.recent),
            dropped.get("recentMessages", 0),
        ),
    ]
    return ContextBudget(
        tiers=costs,
        max_tokens=max_tokens,
        token_count=sum(cost.tokens for cost in costs),
        recent_message_ids=[m.pk for m in tiers.recent],
    )
