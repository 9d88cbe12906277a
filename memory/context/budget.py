"""Fitting a context into ``max_tokens`` (whole items dropped, pins never), and what each
tier of a served context costs, for pages that show the budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from core.errors import MemdeskError
from core.paging import whole_number
from memory.context.rendering import (
    Fitted,
    MemoryBlock,
    memory_block,
    message_cost,
)
from memory.context.tiers import Reidentifies, memory_tiers, recent_messages
from memory.models import Conversation, Message
from memory.services.workspace_settings import MAX_CONTEXT_MAX_TOKENS


def parse_max_tokens(raw: object) -> int | None:
    """``max_tokens``: a whole number from 1 to ``MAX_CONTEXT_MAX_TOKENS``, the bound of a
    workspace's default budget too. Each budget is a body cached apart: without a bound,
    every number a client tries is one more entry."""
    if raw is None or raw == "":
        return None
    value = whole_number(raw)
    if value is None or not 1 <= value <= MAX_CONTEXT_MAX_TOKENS:
        raise MemdeskError(
            "invalid_max_tokens",
            f"max_tokens must be a positive whole number, at most {MAX_CONTEXT_MAX_TOKENS}; "
            f"got {raw!r}.",
            field="max_tokens",
        )
    return value


def budget_fit(block: MemoryBlock, recent: list[Message], max_tokens: int | None) -> Fitted:
    """Drop whole items until the context fits: the oldest recent messages first, then the
    lowest-priority (and, among equals, oldest) observations, then the oldest reflections.
    Pins are counted first and never dropped: a budget smaller than the pins leaves only
    the pins, and ``token_count`` says by how much it is exceeded."""
    message_costs = [message_cost(m) for m in recent]
    total = (
        sum(item.cost for item in block.pins)
        + sum(message_costs)
        + sum(item.cost for item in block.observations)
        + sum(item.cost for item in block.reflections)
    )
    if max_tokens is None:
        return Fitted(block.pins, block.reflections, block.observations, recent, total, {})

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

    return Fitted(
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


def effective_max_tokens(conversation: Conversation, max_tokens: int | None) -> int | None:
    """The request's budget, or else the workspace's default (``None``: no budget)."""
    if max_tokens is not None:
        return max_tokens
    return conversation.workspace.context_max_tokens


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
    tiers = memory_tiers(conversation, today=today, reidentifier=reidentifier)
    block = memory_block(tiers, fmt="lines", conversation=conversation)
    fitted = budget_fit(block, recent_messages(conversation, reidentifier=reidentifier), max_tokens)
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
            sum(message_cost(m) for m in fitted.recent),
            dropped.get("recentMessages", 0),
        ),
    ]
    return ContextBudget(
        tiers=costs,
        max_tokens=max_tokens,
        token_count=sum(cost.tokens for cost in costs),
        recent_message_ids=[m.pk for m in fitted.recent],
    )
