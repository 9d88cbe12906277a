"""``pipeline_metrics``: what memory saves, what the pipeline costs and how agents fare
with it (turn latency, prompt-cache stability, escalations to a person, recall), for the
API and the dashboard's charts.

Context reads are counted in the cache only (``context_read_record``): a database row per
read would cost the hot path a write. Those figures are best effort: lost on a cache
flush or outage, and two reads of one conversation at the same instant may count once.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import (
    Avg,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    QuerySet,
    RowRange,
    Sum,
    Window,
)
from django.db.models.functions import FirstValue, Lead, TruncDate, TruncHour
from django.utils import timezone

from governance.redaction.gates import reidentifier_for_measurement
from memory.approval.queue import approval_figures
from memory.models import (
    Conversation,
    Escalation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    Reflection,
    ReflectorRun,
)
from memory.recall import recall_for_conversation, recall_for_workspace
from tenancy.models import Workspace

SERIES_DAYS = 30
ESCALATION_SERIES_HOURS = 48
# A conversation's context-read counters live this long after its last read.
CONTEXT_READS_SECONDS = SERIES_DAYS * 24 * 3600


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


def turn_latency(scope: dict[str, Any], since: datetime) -> dict[str, Any]:
    """How long users waited for an answer: from each user message to the assistant
    message that follows it (tool and system messages between them are skipped), by the
    messages' own ``created_at``, over the messages of the last SERIES_DAYS days. Of
    several user messages in a row, the last one is the one answered.

    One query with window functions (SQLite 3.25+, PostgreSQL) for the average; the median
    is a second, sorting the same rows and reading the middle one or two."""
    partition = [F("conversation_id")]
    order = [F("created_at").asc(), F("seq").asc()]
    turns = (
        Message.objects.filter(
            role__in=[Message.Role.USER, Message.Role.ASSISTANT], created_at__gte=since, **scope
        )
        .annotate(
            # The row's own role, as a window value: a plain filter on role would apply
            # before the window is computed, and so change what comes next.
            own_role=Window(
                FirstValue("role"), partition_by=partition, order_by=order, frame=RowRange(0, 0)
            ),
            next_role=Window(Lead("role"), partition_by=partition, order_by=order),
            next_at=Window(Lead("created_at"), partition_by=partition, order_by=order),
        )
        .filter(own_role=Message.Role.USER, next_role=Message.Role.ASSISTANT)
        .annotate(
            wait=ExpressionWrapper(F("next_at") - F("created_at"), output_field=DurationField())
        )
    )
    summary = turns.aggregate(turns=Count("pk"), average=Avg("wait"))
    count = summary["turns"] or 0
    median_seconds = None
    if count:
        middle = list(
            turns.order_by("wait").values_list("wait", flat=True)[(count - 1) // 2 : count // 2 + 1]
        )
        median_seconds = round(sum(w.total_seconds() for w in middle) / len(middle), 3)
    average = summary["average"]
    return {
        "turns": count,
        "averageSeconds": round(average.total_seconds(), 3) if average is not None else None,
        "medianSeconds": median_seconds,
        "days": SERIES_DAYS,
    }


def escalation_metrics(scope: dict[str, Any]) -> dict[str, Any]:
    """Escalations to a person: open, in the last SERIES_DAYS days and per hour over
    them, and the count of each of the last ESCALATION_SERIES_HOURS hours."""
    now = timezone.now()
    escalations = Escalation.objects.filter(**scope)
    recent = escalations.filter(created_at__gte=now - timedelta(days=SERIES_DAYS)).count()
    first_hour = (now - timedelta(hours=ESCALATION_SERIES_HOURS - 1)).replace(
        minute=0, second=0, microsecond=0
    )
    per_hour = dict(
        escalations.filter(created_at__gte=first_hour)
        .annotate(hour=TruncHour("created_at"))
        .values("hour")
        .annotate(n=Count("pk"))
        .values_list("hour", "n")
    )
    hours = [first_hour + timedelta(hours=n) for n in range(ESCALATION_SERIES_HOURS)]
    return {
        "open": escalations.filter(status=Escalation.Status.OPEN).count(),
        "lastDays": recent,
        "perHour": round(recent / (SERIES_DAYS * 24), 4),
        "hourly": {hour.isoformat(): per_hour.get(hour, 0) for hour in hours},
    }


# --- context reads (prompt-cache stability) -------------------------------------------------


def _context_reads_key(conversation_id: Any) -> str:
    return f"memdesk:ctxreads:{conversation_id}"


COUNTS = ("reads", "compared", "stable", "notModified")


def _counts() -> dict[str, int]:
    return dict.fromkeys(COUNTS, 0)


@dataclass
class _LocalReads:
    """One conversation's reads in this process since its counts were last added to the
    shared entry, and the digest each format was last served here."""

    digests: dict[str, str] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=_counts)
    flushed_at: float = float("-inf")


# Counted in the process and added to the shared cache at most every
# MEMDESK_CONTEXT_READS_FLUSH_SECONDS per conversation: two cache round trips per read
# were a fifth of a cached context read. Bounded; a conversation pushed out is flushed.
_LOCAL_READS: OrderedDict[Any, _LocalReads] = OrderedDict()
LOCAL_READS_KEPT = 4096
_local_reads_lock = threading.Lock()


def context_read_record(
    *, conversation_id: Any, fmt: str, memory_digest: str, not_modified: bool
) -> None:
    """Count one context read of a conversation: whether its memory block is the one the
    previous read of the same format was served (by this process), and whether it was
    answered 304.

    Counted in the process; the counts go to the conversation's shared entry (the
    workspace's figure sums the entries when asked) at most every
    MEMDESK_CONTEXT_READS_FLUSH_SECONDS, with one cache read and one write, and never to
    the database. Best effort: counts not yet flushed when a process stops are lost, a
    flush that races another process's may overwrite its counts, and with several web
    processes each compares with the read it served last."""
    now = time.monotonic()
    flushes: list[tuple[Any, dict[str, int]]] = []
    with _local_reads_lock:
        local = _LOCAL_READS.get(conversation_id)
        if local is None:
            local = _LOCAL_READS[conversation_id] = _LocalReads()
        _LOCAL_READS.move_to_end(conversation_id)
        pending = local.pending
        previous = local.digests.get(fmt)
        pending["reads"] += 1
        if previous and memory_digest:
            pending["compared"] += 1
            pending["stable"] += previous == memory_digest
        if memory_digest:
            local.digests[fmt] = memory_digest
        pending["notModified"] += not_modified
        if now - local.flushed_at >= settings.MEMDESK_CONTEXT_READS_FLUSH_SECONDS:
            flushes.append((conversation_id, pending))
            local.pending, local.flushed_at = _counts(), now
        while len(_LOCAL_READS) > LOCAL_READS_KEPT:
            evicted, old = _LOCAL_READS.popitem(last=False)
            flushes.append((evicted, old.pending))
    for flushed_id, counts in flushes:
        if counts["reads"]:
            _context_reads_add(flushed_id, counts)


def _context_reads_add(conversation_id: Any, counts: dict[str, int]) -> None:
    key = _context_reads_key(conversation_id)
    entry: dict[str, int] = cache.get(key) or _counts()
    for name in COUNTS:
        entry[name] = entry.get(name, 0) + counts[name]
    cache.set(key, entry, CONTEXT_READS_SECONDS)


def _context_reads_wire(entries: list[dict[str, Any]]) -> dict[str, Any]:
    reads = sum(e["reads"] for e in entries)
    compared = sum(e["compared"] for e in entries)
    stable = sum(e["stable"] for e in entries)
    not_modified = sum(e["notModified"] for e in entries)
    return {
        "reads": reads,
        "compared": compared,
        "stableMemoryBlock": stable,
        "stability": round(stable / compared, 3) if compared else None,
        "notModified": not_modified,
        "notModifiedShare": round(not_modified / reads, 3) if reads else None,
        "bestEffort": True,
    }


def context_read_metrics(
    *, workspace: Workspace, conversation: Conversation | None
) -> dict[str, Any]:
    """The counters of one conversation, or the sum over the workspace's most recently
    updated MEMDESK_METRICS_CONVERSATIONS conversations (one cache round trip)."""
    if conversation is not None:
        entry = cache.get(_context_reads_key(conversation.pk))
        return _context_reads_wire([entry] if entry else [])
    recent = Conversation.objects.filter(workspace=workspace).order_by("-updated_at", "-id")
    ids = recent.values_list("pk", flat=True)[: settings.MEMDESK_METRICS_CONVERSATIONS]
    found = cache.get_many([_context_reads_key(pk) for pk in ids])
    return _context_reads_wire(list(found.values()))


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
    if conversation is not None:
        recall = recall_for_conversation(
            conversation=conversation,
            reidentifier=reidentifier_for_measurement(workspace_id=workspace.pk),
        ).to_wire()
    else:
        recall = recall_for_workspace(
            workspace=workspace,
            reidentifier=reidentifier_for_measurement(workspace_id=workspace.pk),
        )
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
        "turnLatency": turn_latency(scope, since),
        "contextReads": context_read_metrics(workspace=workspace, conversation=conversation),
        "escalations": escalation_metrics(scope),
        "approval": approval_figures(
            workspace_id=workspace.pk, conversation_id=conversation.pk if conversation else None
        ).as_dict(),
        "recall": recall,
        "series": {
            "observer": _series(ObserverRun.objects.filter(**scope), since),
            "reflector": _series(ReflectorRun.objects.filter(**scope), since),
        },
    }
