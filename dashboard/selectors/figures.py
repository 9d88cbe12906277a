"""One conversation's figures for its page: counts and tokens per tier, the observations
by status and priority, and how many reflections are stale.

Aggregates, counted once per memory change rather than on every view: a
100,000-message conversation's count alone read every message row (60-100 ms on
PostgreSQL). The figures are kept in the cache with the ``memory_version`` they were
counted at; every change to memory, and every change that deletes or rewrites
messages (retention, erasure, redaction), moves it, as the rendered context's cache
relies on. Messages are only ever appended otherwise, with seq numbers handed out in
commit order, so the figures of a version stand while those of the messages after the
last seq counted are added to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from django.core.cache import cache
from django.db.models import Count, Max, Sum

from dashboard.selectors.conversations import TierStats
from dashboard.selectors.notes import observation_tally
from memory.models import (
    Conversation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    Reflection,
)

CACHE_SECONDS = 24 * 3600


@dataclass(frozen=True)
class ConversationFigures:
    stats: TierStats
    # Observations by status ("active", "reflected") and by priority, for the column's
    # heading and its filter.
    observation_counts: dict[str, int] = field(default_factory=dict)
    reflections_stale: int = 0
    memory_version: int = 0
    through_seq: int = 0  # the highest message seq counted


def _cache_key(conversation: Conversation) -> str:
    return f"memdesk:figures:{conversation.pk}"


def _messages_after(conversation: Conversation, seq: int) -> dict[str, int]:
    totals = Message.objects.filter(conversation=conversation, seq__gt=seq).aggregate(
        n=Count("pk"), tokens=Sum("token_count"), last=Max("seq")
    )
    return {"n": totals["n"], "tokens": totals["tokens"] or 0, "last": totals["last"] or seq}


def _count(conversation: Conversation) -> ConversationFigures:
    messages = _messages_after(conversation, 0)
    observation_counts, observation_tokens = observation_tally(conversation=conversation)
    reflections = {
        status: (n, tokens or 0)
        for status, n, tokens in Reflection.objects.filter(conversation=conversation)
        .order_by()
        .values_list("status")
        .annotate(n=Count("pk"), tokens=Sum("token_count"))
    }
    pins = Pin.objects.filter(conversation=conversation).aggregate(
        n=Count("pk"), tokens=Sum("token_count")
    )
    observed = ObserverRun.objects.filter(
        conversation=conversation, status=PipelineRun.Status.SUCCEEDED
    ).aggregate(tokens=Sum("tokens_in"))
    active_reflections = reflections.get(Reflection.Status.ACTIVE, (0, 0))
    return ConversationFigures(
        stats=TierStats(
            message_count=messages["n"],
            message_tokens=messages["tokens"],
            observation_count=observation_counts.get(Observation.Status.ACTIVE, 0),
            observation_tokens=observation_tokens,
            reflection_count=active_reflections[0],
            reflection_tokens=active_reflections[1],
            pin_count=pins["n"],
            pin_tokens=pins["tokens"] or 0,
            observed_tokens=observed["tokens"] or 0,
        ),
        observation_counts=observation_counts,
        reflections_stale=reflections.get(Reflection.Status.STALE, (0, 0))[0],
        memory_version=conversation.memory_version,
        through_seq=messages["last"],
    )


def conversation_figures(*, conversation: Conversation) -> ConversationFigures:
    """The figures of ``conversation`` as loaded by the request (its ``memory_version``
    and ``last_seq``): no query while neither moved since they were counted, one for the
    messages appended since when only ``last_seq`` did, and five to count them all
    again after a memory change."""
    key = _cache_key(conversation)
    figures: ConversationFigures | None = cache.get(key)
    if figures is not None and figures.memory_version == conversation.memory_version:
        if figures.through_seq >= conversation.last_seq:
            return figures
        appended = _messages_after(conversation, figures.through_seq)
        stats = replace(
            figures.stats,
            message_count=figures.stats.message_count + appended["n"],
            message_tokens=figures.stats.message_tokens + appended["tokens"],
        )
        figures = replace(figures, stats=stats, through_seq=appended["last"])
    else:
        figures = _count(conversation)
    cache.set(key, figures, CACHE_SECONDS)
    return figures
