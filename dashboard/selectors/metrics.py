"""The pipeline's figures laid out for the metrics page's charts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Avg, Max
from django.db.models.functions import TruncDate
from django.utils import timezone

from memory.metrics import SERIES_DAYS, pipeline_metrics
from memory.models import Conversation, ObserverRun, PipelineRun, ReflectorRun
from tenancy.models import Workspace


def metrics_for_charts(
    *, workspace: Workspace, conversation: Conversation | None
) -> dict[str, Any]:
    """``pipeline_metrics`` plus its daily series laid on one axis of the last
    SERIES_DAYS days (days without runs as zeros), as the charts need them."""
    metrics = pipeline_metrics(workspace=workspace, conversation=conversation)
    today = timezone.now().date()
    days = [(today - timedelta(days=n)).isoformat() for n in range(SERIES_DAYS - 1, -1, -1)]
    empty = {"runs": 0, "failures": 0, "tokensIn": 0, "tokensOut": 0}
    metrics["days"] = days
    metrics["daily"] = {
        kind: [dict(metrics["series"][kind].get(day, empty)) for day in days]
        for kind in ("observer", "reflector")
    }
    scope: dict[str, Any] = (
        {"conversation": conversation} if conversation else {"conversation__workspace": workspace}
    )
    since = timezone.now() - timedelta(days=SERIES_DAYS)
    for kind, model in (("observer", ObserverRun), ("reflector", ReflectorRun)):
        # pipeline_metrics gives duration percentiles overall; the chart of durations over
        # time needs them per day (succeeded runs, averaged and the slowest).
        rows = {
            row["day"].isoformat(): row
            for row in model.objects.filter(
                status=PipelineRun.Status.SUCCEEDED, created_at__gte=since, **scope
            )
            .exclude(duration_ms=None)
            .annotate(day=TruncDate("created_at"))
            .values("day")
            .annotate(avg=Avg("duration_ms"), slowest=Max("duration_ms"))
        }
        for day, entry in zip(days, metrics["daily"][kind], strict=True):
            row = rows.get(day)
            entry["durationAvgMs"] = round(row["avg"]) if row else None
            entry["durationMaxMs"] = row["slowest"] if row else None
    return metrics
