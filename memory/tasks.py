"""Celery tasks of the pipeline: each takes a run id, calls one service, and retries
with backoff. They are idempotent because the run is claimed in the database. Beat's
periodic tasks (the pipeline sweep, the idempotency expiry) take nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval

from memory.models import AnyRun, PipelineRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.runs import (
    RunOutcome,
    observer_run_fail_interrupted,
    reflector_run_fail_interrupted,
)
from memory.pipeline.sweep import pipeline_sweep
from memory.services.idempotency import idempotency_records_expire

logger = logging.getLogger(__name__)

MAX_RETRIES = PipelineRun.MAX_ATTEMPTS - 1


class RunRetry(Exception):
    """The service made the run RETRYING after a retryable error; Celery retries."""


# Retries wait up to 10 s, 20 s, 40 s, ... up to 600 s, with full jitter so that runs
# failed by one provider outage do not all come back at once. The countdown is drawn
# before the attempt (as Celery's autoretry would draw it after), so that the run can
# say when its next attempt is.
RUN_TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "max_retries": MAX_RETRIES,
    "retry_backoff": 10,
    "retry_backoff_max": 600,
    "retry_jitter": True,
}


def _retry_countdown(task: Task) -> int:
    countdown: int = get_exponential_backoff_interval(
        factor=int(task.retry_backoff),
        retries=task.request.retries,
        maximum=task.retry_backoff_max,
        full_jitter=task.retry_jitter,
    )
    return countdown


def _soft_time_limit(task: Task) -> float | None:
    per_call = (task.request.timelimit or (None, None))[1]
    limit: float | None = per_call or task.soft_time_limit or task.app.conf.task_soft_time_limit
    return limit


def _run(
    task: Task,
    run_id: str,
    execute: Callable[..., RunOutcome],
    fail_interrupted: Callable[..., AnyRun | None],
) -> str | None:
    countdown = _retry_countdown(task)
    try:
        outcome = execute(
            run_id=run_id, final_attempt=task.request.retries >= MAX_RETRIES, retry_in=countdown
        )
    except SoftTimeLimitExceeded:
        limit = _soft_time_limit(task)
        reason = "the run exceeded its time limit"
        run = fail_interrupted(
            run_id=run_id, reason=f"{reason} of {limit:g} s" if limit else reason
        )
        return run.status if run else None
    if outcome.retry:
        raise task.retry(exc=RunRetry(run_id), countdown=countdown)
    return outcome.run.status if outcome.run else None


@shared_task(**RUN_TASK_OPTIONS)
def observe_conversation(self: Task, run_id: str) -> str | None:
    return _run(self, run_id, observer_run_execute, observer_run_fail_interrupted)


@shared_task(**RUN_TASK_OPTIONS)
def reflect_conversation(self: Task, run_id: str) -> str | None:
    return _run(self, run_id, reflector_run_execute, reflector_run_fail_interrupted)


@shared_task
def sweep_pipelines() -> dict[str, int]:
    counts = pipeline_sweep()
    logger.info("pipeline sweep: %s", counts)
    return counts


@shared_task
def expire_idempotency_records() -> int:
    # Idempotent by nature: a second run finds nothing expired that the first deleted.
    deleted = idempotency_records_expire()
    logger.info("idempotency expiry: %s stored replies deleted", deleted)
    return deleted
