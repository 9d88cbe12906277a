"""Celery tasks of the pipeline: each takes a run id, calls one service, and retries
with backoff. They are idempotent because the run is claimed in the database."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded

from memory import pipeline
from memory.models import AnyRun

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


class RunRetry(Exception):
    """The service gave the run back (PENDING) after a retryable error; Celery retries."""


# Retries wait 10 s, 20 s, 40 s, ... up to 600 s, with full jitter so that runs failed
# by one provider outage do not all come back at once.
RUN_TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "max_retries": MAX_RETRIES,
    "autoretry_for": (RunRetry,),
    "retry_backoff": 10,
    "retry_backoff_max": 600,
    "retry_jitter": True,
}


def _soft_time_limit(task: Task) -> float | None:
    per_call = (task.request.timelimit or (None, None))[1]
    limit: float | None = per_call or task.soft_time_limit or task.app.conf.task_soft_time_limit
    return limit


def _run(
    task: Task,
    run_id: str,
    execute: Callable[..., pipeline.RunOutcome],
    fail_interrupted: Callable[..., AnyRun | None],
) -> str | None:
    try:
        outcome = execute(run_id=run_id, final_attempt=task.request.retries >= MAX_RETRIES)
    except SoftTimeLimitExceeded:
        limit = _soft_time_limit(task)
        reason = "the run exceeded its time limit"
        run = fail_interrupted(
            run_id=run_id, reason=f"{reason} of {limit:g} s" if limit else reason
        )
        return run.status if run else None
    if outcome.retry:
        raise RunRetry(run_id)
    return outcome.run.status if outcome.run else None


@shared_task(**RUN_TASK_OPTIONS)
def observe_conversation(self: Task, run_id: str) -> str | None:
    return _run(self, run_id, pipeline.observer_run_execute, pipeline.observer_run_fail_interrupted)


@shared_task(**RUN_TASK_OPTIONS)
def reflect_conversation(self: Task, run_id: str) -> str | None:
    return _run(
        self, run_id, pipeline.reflector_run_execute, pipeline.reflector_run_fail_interrupted
    )


@shared_task
def sweep_pipelines() -> dict[str, int]:
    counts = pipeline.pipeline_sweep()
    logger.info("pipeline sweep: %s", counts)
    return counts
