"""Celery tasks of retention and erasure: each takes an id, calls one service, and is
idempotent because the service claims its row (PENDING to RUNNING) before acting."""

from __future__ import annotations

import logging

from celery import shared_task

from governance import erasure, retention

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


def _backoff(retries: int) -> int:
    return min(30 * 2**retries, 1800)


@shared_task(acks_late=True)
def retention_sweep_task(sweep_id: int) -> str:
    # No retry: a failed sweep is recorded as failed, and the next scheduled sweep
    # picks up whatever is still due.
    return retention.retention_sweep(sweep_id=sweep_id).status


@shared_task
def retention_schedule_task() -> dict[str, int]:
    counts = retention.retention_schedule()
    logger.info("retention schedule: %s", counts)
    return counts


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def erasure_task(self, request_id: int) -> str:  # type: ignore[no-untyped-def]
    outcome = erasure.erasure_execute(
        request_id=request_id, final_attempt=self.request.retries >= MAX_RETRIES
    )
    if outcome.retry:
        raise self.retry(countdown=_backoff(self.request.retries))
    return outcome.request.status
