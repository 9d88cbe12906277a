"""Celery tasks of the pipeline: each takes a run id, calls one service, and retries
with backoff. They are idempotent because the run is claimed in the database."""

from __future__ import annotations

import logging

from celery import shared_task

from memory import pipeline

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


def _backoff(retries: int) -> int:
    return min(10 * 2**retries, 600)


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def observe_conversation(self, run_id: str) -> str | None:  # type: ignore[no-untyped-def]
    outcome = pipeline.observer_run_execute(
        run_id=run_id, final_attempt=self.request.retries >= MAX_RETRIES
    )
    if outcome.retry:
        raise self.retry(countdown=_backoff(self.request.retries))
    return outcome.run.status if outcome.run else None


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def reflect_conversation(self, run_id: str) -> str | None:  # type: ignore[no-untyped-def]
    outcome = pipeline.reflector_run_execute(
        run_id=run_id, final_attempt=self.request.retries >= MAX_RETRIES
    )
    if outcome.retry:
        raise self.retry(countdown=_backoff(self.request.retries))
    return outcome.run.status if outcome.run else None


@shared_task
def sweep_pipelines() -> dict[str, int]:
    counts = pipeline.pipeline_sweep()
    logger.info("pipeline sweep: %s", counts)
    return counts
