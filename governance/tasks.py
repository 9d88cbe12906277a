"""Celery tasks of retention, erasure and the audit trail's checkpoints. Retention and
erasure tasks take an id, call one service, and are idempotent because the service claims
its row (PENDING to RUNNING) before acting."""

from __future__ import annotations

import logging

from celery import Task, shared_task
from django.conf import settings

from governance import erasure, retention
from governance.audit import audit_checkpoint_heads

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


class ErasureRetry(Exception):
    """The service gave the request back (PENDING) after an error; Celery retries."""


@shared_task(
    acks_late=True,
    soft_time_limit=settings.MEMDESK_RETENTION_SWEEP_TIME_LIMIT,
    time_limit=settings.MEMDESK_RETENTION_SWEEP_TIME_LIMIT + 60,
)
def retention_sweep_task(sweep_id: int) -> str:
    # No retry: a failed sweep is recorded as failed, and the next scheduled sweep
    # picks up whatever is still due.
    return retention.retention_sweep(sweep_id=sweep_id).status


@shared_task
def retention_schedule_task() -> dict[str, int]:
    counts = retention.retention_schedule()
    logger.info("retention schedule: %s", counts)
    return counts


@shared_task
def audit_checkpoint_task() -> int:
    # Writing the same head twice is harmless: a checkpoint only adds to what is known.
    written = audit_checkpoint_heads()
    logger.info("audit checkpoints written: %s", written)
    return written


# Retries wait up to 30 s, 60 s, 120 s, ... 1,800 s (full jitter): erasure is idempotent,
# what is gone stays gone, so each attempt continues where the last one stopped.
@shared_task(
    bind=True,
    acks_late=True,
    max_retries=MAX_RETRIES,
    autoretry_for=(ErasureRetry,),
    retry_backoff=30,
    retry_backoff_max=1800,
    retry_jitter=True,
)
def erasure_task(self: Task, request_id: int) -> str:
    outcome = erasure.erasure_execute(
        request_id=request_id, final_attempt=self.request.retries >= MAX_RETRIES
    )
    if outcome.retry:
        raise ErasureRetry(request_id)
    return str(outcome.request.status)
