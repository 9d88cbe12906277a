"""What a context reads: pins, active reflections, served observations and the recent
messages no observation covers, with pseudonyms replaced by their values when the
workspace lets agents see them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date
from typing import Protocol, TypeVar

from memory.models import Conversation, Message, Observation, Pin, Reflection
from memory.selectors import (
    active_reflections,
    pin_list,
    served_intervals,
    served_observations,
    unobserved_messages,
)
from memory.tokens import token_count

ItemT = TypeVar("ItemT", Message, Observation, Reflection, Pin)


class Reidentifies(Protocol):
    """``governance.redaction.reveal.Reidentifier`` as memory sees it (through the gates)."""

    cache_key: str

    def prepare(self, texts: Iterable[str]) -> None: ...

    def text(self, text: str) -> str: ...


@dataclass
class MemoryTiers:
    pins: list[Pin]
    reflections: list[Reflection]
    observations: list[Observation]
    recent: list[Message]
    today: date  # for the relative dates in memory lines


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
    """Put the values back into these rows' texts, a message's speaker name included, in
    memory only (they are never saved), recounting the tokens of those whose text
    changed."""
    items = list(items)
    fields = [("content" if isinstance(item, Message) else "text") for item in items]
    names = [item for item in items if isinstance(item, Message) and item.name]
    reidentifier.prepare(
        [getattr(item, name) for item, name in zip(items, fields, strict=True)]
        + [message.name for message in names]
    )
    for item, name in zip(items, fields, strict=True):
        before = getattr(item, name)
        after = reidentifier.text(before)
        if after != before:
            setattr(item, name, after)
            item.token_count = token_count(after)
    for message in names:
        message.name = reidentifier.text(message.name)


def memory_tiers(
    conversation: Conversation, *, today: date, reidentifier: Reidentifies | None
) -> MemoryTiers:
    tiers = MemoryTiers(
        pins=list(pin_list(conversation=conversation)),
        reflections=list(active_reflections(conversation=conversation)),
        observations=list(served_observations(conversation=conversation)),
        recent=[],
        today=today,
    )
    if reidentifier is not None:
        reidentify_items(reidentifier, [*tiers.pins, *tiers.reflections, *tiers.observations])
    return tiers


def recent_messages(
    conversation: Conversation, *, reidentifier: Reidentifies | None
) -> list[Message]:
    recent = list(
        unobserved_messages(
            conversation=conversation, intervals=served_intervals(conversation=conversation)
        )
    )
    if reidentifier is not None:
        reidentify_items(reidentifier, recent)
    return recent
