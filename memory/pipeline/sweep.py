"""The periodic sweep: lost runs sent again, runs an outage left waiting for their
provider sent again once it answers, due runs that were never scheduled scheduled, and
what quiet conversations left unobserved observed."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.queue import enqueue_on_commit
from memory.models import Conversation, PipelineRun
from memory.pipeline.engines import provider_breaker
from memory.pipeline.runs import WAITING_FOR_PROVIDER
from memory.pipeline.scheduling import (
    RUN_TASKS,
    observer_schedule_if_due,
    reflector_schedule_if_due,
)

if TYPE_CHECKING:
    from memory.engines.openai_engine import CircuitBreaker

# The sweeper re-enqueues PENDING runs older than this, and RETRYING runs this long past
# their next attempt (their task message may be lost).
STALE_PENDING = timedelta(seconds=60)
# The sweeper looks at conversations written in this window, at most this many a sweep.
SWEEP_LOOKBACK = timedelta(days=7)
SWEEP_BATCH = 500


def pipeline_sweep() -> dict[str, int]:
    """Re-enqueue lost runs, schedule runs that are due but were never scheduled (for
    example because the broker was down when the messages arrived), and observe what
    conversations that went quiet left unobserved."""
    now = timezone.now()
    counts = {"requeued": 0, "resumed": 0, "observer_scheduled": 0, "reflector_scheduled": 0}
    for model, task_name in RUN_TASKS.items():
        lost = model.objects.filter(
            Q(status=PipelineRun.Status.PENDING, created_at__lt=now - STALE_PENDING)
            | Q(status=PipelineRun.Status.RETRYING, next_attempt_at__lt=now - STALE_PENDING)
            | Q(status=PipelineRun.Status.RUNNING, lease_expires_at__lt=now)
        ).values_list("pk", flat=True)
        for run_id in lost:
            enqueue_on_commit(task_name, str(run_id))
            counts["requeued"] += 1
    counts["resumed"] = _runs_waiting_for_provider_resume()
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return counts
    candidates = (
        Conversation.objects.filter(updated_at__gte=now - SWEEP_LOOKBACK)
        .select_related("workspace")
        .order_by("-updated_at")[:SWEEP_BATCH]
    )
    for conversation in candidates:
        with transaction.atomic():
            if observer_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER, now=now
            ):
                counts["observer_scheduled"] += 1
            if reflector_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER
            ):
                counts["reflector_scheduled"] += 1
    return counts


def _runs_waiting_for_provider_resume() -> int:
    """Send the runs waiting for their provider once it may answer: all of them when its
    breaker has closed (a call succeeded), one when the breaker's cooldown is over (the
    trial call that closes it or opens it again; the run whose last attempt is oldest,
    so that no run is always the one tried), none while it is open. Returns how many
    were sent."""
    breakers: dict[object, CircuitBreaker | None] = {}
    trial_sent: set[str] = set()
    sent = 0
    for model, task_name in RUN_TASKS.items():
        waiting = (
            model.objects.filter(WAITING_FOR_PROVIDER)
            .select_related("conversation__workspace")
            .order_by("started_at")
        )
        for run in waiting:
            workspace = run.conversation.workspace
            if workspace.pk not in breakers:
                breakers[workspace.pk] = provider_breaker(workspace)
            breaker = breakers[workspace.pk]
            if breaker is not None and not breaker.is_closed():
                if breaker.is_open() or breaker.provider in trial_sent:
                    continue
                trial_sent.add(breaker.provider)
            enqueue_on_commit(task_name, str(run.pk))
            sent += 1
    return sent
