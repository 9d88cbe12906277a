"""What waits for approval, and how long decisions took."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db.models import QuerySet
from django.utils import timezone

from memory.models import Message, Observation, Reflection

LATENCY_DAYS = 30  # the window the metrics' approval latency covers


NoteT = TypeVar("NoteT", Observation, Reflection)


def waiting_notes(model: type[NoteT], *, workspace_id: Any) -> QuerySet[NoteT]:
    """The workspace's observations or reflections waiting for approval, the longest
    waiting first."""
    return (
        model.objects.filter(conversation__workspace_id=workspace_id, status=model.Status.WAITING)
        .select_related("conversation")
        .order_by("created_at", "pk")
    )


def messages_of(observations: Sequence[Observation]) -> dict[Any, list[Message]]:
    """The messages each observation was written from, by seq (one query for all)."""
    cited_by: dict[str, list[Any]] = defaultdict(list)
    for observation in observations:
        for message_id in observation.source_message_ids:
            cited_by[str(message_id)].append(observation.pk)
    found: dict[Any, list[Message]] = {o.pk: [] for o in observations}
    for message in Message.objects.filter(pk__in=list(cited_by)).order_by("seq"):
        for observation_id in cited_by[str(message.pk)]:
            found[observation_id].append(message)
    return found


def sources_of(reflections: Sequence[Reflection]) -> dict[Any, list[Observation]]:
    """Each reflection's source observations as they now stand, in the order it cites
    them (one query for all)."""
    ids = {str(i) for r in reflections for i in r.source_observation_ids}
    stored = {str(o.pk): o for o in Observation.objects.filter(pk__in=list(ids))}
    return {
        r.pk: [stored[str(i)] for i in r.source_observation_ids if str(i) in stored]
        for r in reflections
    }


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


@dataclass(frozen=True)
class ApprovalFigures:
    waiting: int
    oldest_waiting_seconds: float | None
    approved: int  # decided in the last LATENCY_DAYS
    rejected: int
    latency_p50_seconds: float | None
    latency_p90_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "waiting": self.waiting,
            "oldestWaitingSeconds": self.oldest_waiting_seconds,
            "approved": self.approved,
            "rejected": self.rejected,
            "windowDays": LATENCY_DAYS,
            "latencyP50Seconds": self.latency_p50_seconds,
            "latencyP90Seconds": self.latency_p90_seconds,
        }


def approval_figures(
    *, workspace_id: Any, conversation_id: Any | None = None, now: datetime | None = None
) -> ApprovalFigures:
    """How many notes (observations, reflections) wait and for how long the oldest has;
    of those decided in the last ``LATENCY_DAYS``, how many were approved and rejected,
    and how long they waited (from written to decided: the median and the 90th
    percentile)."""
    now = now or timezone.now()
    waiting: list[datetime] = []
    decided: list[tuple[str, datetime, datetime | None]] = []
    for model in (Observation, Reflection):
        rows = model.objects.filter(conversation__workspace_id=workspace_id)
        if conversation_id is not None:
            rows = rows.filter(conversation_id=conversation_id)
        waiting += rows.filter(status=model.Status.WAITING).values_list("created_at", flat=True)
        decided += rows.filter(decided_at__gte=now - timedelta(days=LATENCY_DAYS)).values_list(
            "status", "created_at", "decided_at"
        )
    waits = [(at - created).total_seconds() for _, created, at in decided if at is not None]
    return ApprovalFigures(
        waiting=len(waiting),
        oldest_waiting_seconds=(now - min(waiting)).total_seconds() if waiting else None,
        approved=sum(status != "rejected" for status, _, _ in decided),
        rejected=sum(status == "rejected" for status, _, _ in decided),
        latency_p50_seconds=_percentile(waits, 0.5),
        latency_p90_seconds=_percentile(waits, 0.9),
    )
