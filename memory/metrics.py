"""``pipeline_metrics``: what memory saves and what the pipeline costs, for the API and
the dashboard's charts."""

from __future__ import annotations

from datetime import datetime, timedelta
from statistics import median
from typing import Any

from django.conf import settings
from django.db.models import Count, QuerySet, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from memory.models import (
    Conversation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    Reflection,
    ReflectorRun,
    Workspace,
)

SERIES_DAYS = 30


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 2) if denominator else None


def _percentile(values: list[int], share: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _run_summary(runs: QuerySet[Any]) -> dict[str, Any]:
    by_status = dict(runs.values_list("status").annotate(n=Count("pk")).values_list("status", "n"))
    succeeded = runs.filter(status=PipelineRun.Status.SUCCEEDED)
    durations = list(succeeded.exclude(duration_ms=None).values_list("duration_ms", flat=True))
    tokens = succeeded.aggregate(tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
    return {
        "total": sum(by_status.values()),
        # Keyed by the stored status: "pending" counts the runs the API calls queued.
        "byStatus": {status: by_status.get(status, 0) for status in PipelineRun.Status.values},
        "failures": by_status.get(PipelineRun.Status.FAILED, 0),
        "retrying": by_status.get(PipelineRun.Status.RETRYING, 0),
        "cancelled": by_status.get(PipelineRun.Status.CANCELLED, 0),
        "tokensIn": tokens["tokens_in"] or 0,
        "tokensOut": tokens["tokens_out"] or 0,
        "compression": _ratio(tokens["tokens_in"] or 0, tokens["tokens_out"] or 0),
        "durationMs": {
            "p50": int(median(durations)) if durations else None,
            "p95": _percentile(durations, 0.95),
            "max": max(durations) if durations else None,
        },
    }


def _series(runs: QuerySet[Any], since: datetime) -> dict[str, dict[str, int]]:
    rows = (
        runs.filter(created_at__gte=since)
        .annotate(day=TruncDate("created_at"))
        .values("day", "status")
        .annotate(n=Count("pk"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
    )
    days: dict[str, dict[str, int]] = {}
    for row in rows:
        day = days.setdefault(
            row["day"].isoformat(), {"runs": 0, "failures": 0, "tokensIn": 0, "tokensOut": 0}
        )
        day["runs"] += row["n"]
        if row["status"] == PipelineRun.Status.FAILED:
            day["failures"] += row["n"]
        if row["status"] == PipelineRun.Status.SUCCEEDED:
            day["tokensIn"] += row["tokens_in"] or 0
            day["tokensOut"] += row["tokens_out"] or 0
    return days


def served_token_count(
    *,
    pin_tokens: int,
    reflection_tokens: int,
    observation_tokens: int,
    message_tokens: int,
    observed_tokens: int,
) -> int:
    """The tokens an agent is served: the pinned quotes, the active reflections and
    observations, and the messages no succeeded Observer run has read yet (message
    tokens less what the runs read). The API's metrics and the dashboard's figures use
    this one sum."""
    unobserved = max(message_tokens - observed_tokens, 0)
    return pin_tokens + reflection_tokens + observation_tokens + unobserved


def pipeline_metrics(
    *, workspace: Workspace, conversation: Conversation | None = None
) -> dict[str, Any]:
    """Raw tokens vs tokens served, compression per tier, runs, durations, failures.

    Observed tokens are what succeeded Observer runs read; the tokens an agent is served
    are ``served_token_count``.
    """
    scope: dict[str, Any] = (
        {"conversation": conversation} if conversation else {"conversation__workspace": workspace}
    )
    raw = Message.objects.filter(**scope).aggregate(n=Count("pk"), tokens=Sum("token_count"))
    raw_tokens = raw["tokens"] or 0
    observer = _run_summary(ObserverRun.objects.filter(**scope))
    reflector = _run_summary(ReflectorRun.objects.filter(**scope))
    active_observation_tokens = (
        Observation.objects.filter(status=Observation.Status.ACTIVE, **scope).aggregate(
            t=Sum("token_count")
        )["t"]
        or 0
    )
    active_reflection_tokens = (
        Reflection.objects.filter(status=Reflection.Status.ACTIVE, **scope).aggregate(
            t=Sum("token_count")
        )["t"]
        or 0
    )
    unobserved_tokens = max(raw_tokens - observer["tokensIn"], 0)
    threshold = settings.MEMDESK_GROUNDING_THRESHOLD
    pin_tokens = Pin.objects.filter(**scope).aggregate(t=Sum("token_count"))["t"] or 0
    served = served_token_count(
        pin_tokens=pin_tokens,
        reflection_tokens=active_reflection_tokens,
        observation_tokens=active_observation_tokens,
        message_tokens=raw_tokens,
        observed_tokens=observer["tokensIn"],
    )
    since = timezone.now() - timedelta(days=SERIES_DAYS)
    return {
        "scope": {
            "workspaceId": str(workspace.pk),
            "conversationId": str(conversation.pk) if conversation else None,
        },
        "messages": raw["n"],
        "rawTokens": raw_tokens,
        "servedTokens": served,
        "tokensSaved": max(raw_tokens - served, 0),
        "compression": {
            "overall": _ratio(raw_tokens, served),
            "observer": observer["compression"],
            "reflector": reflector["compression"],
        },
        "tiers": {
            "pinTokens": pin_tokens,
            "reflectionTokens": active_reflection_tokens,
            "observationTokens": active_observation_tokens,
            "unobservedMessageTokens": unobserved_tokens,
        },
        "weaklyGrounded": {
            "observations": Observation.objects.filter(
                status=Observation.Status.ACTIVE, grounding__lt=threshold, **scope
            ).count(),
            "reflections": Reflection.objects.filter(
                status=Reflection.Status.ACTIVE, grounding__lt=threshold, **scope
            ).count(),
            "threshold": threshold,
        },
        "observer": observer,
        "reflector": reflector,
        "series": {
            "observer": _series(ObserverRun.objects.filter(**scope), since),
            "reflector": _series(ReflectorRun.objects.filter(**scope), since),
        },
    }
