"""Celery tasks of retention, erasure, the PII scan and the audit trail's checkpoints:
each takes ids (or nothing), calls one service, and is idempotent because the service
claims its row (PENDING to RUNNING) before acting, or, for the message scan, skips what
is already scanned."""

from __future__ import annotations

import logging
import uuid

from celery import Task, shared_task
from django.conf import settings
from django.db import OperationalError

from governance import erasure
from governance.audit.writer import audit_checkpoint_heads
from governance.redaction import review, scan
from governance.retention.sweep import retention_schedule, retention_sweep

logger = logging.getLogger(__name__)

MAX_RETRIES = 5


class ErasureRetry(Exception):
    """The service gave the request back (PENDING) after an error; Celery retries."""


class ScanRetry(Exception):
    """A message changed while it was scanned; its request is kept, so scan it again."""


@shared_task(
    acks_late=True,
    soft_time_limit=settings.MEMDESK_RETENTION_SWEEP_TIME_LIMIT,
    time_limit=settings.MEMDESK_RETENTION_SWEEP_TIME_LIMIT + 60,
)
def retention_sweep_task(sweep_id: int) -> str:
    # No retry: a failed sweep is recorded as failed, and the next scheduled sweep
    # picks up whatever is still due.
    return retention_sweep(sweep_id=sweep_id).status


@shared_task
def retention_schedule_task() -> dict[str, int]:
    counts = retention_schedule()
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


# Retries wait 10 s, 20 s, 40 s, ... up to 600 s (full jitter). A database that is busy
# (SQLite's lock) or a message rewritten mid-scan is retried; what the scan already
# stored is current and skipped on the next attempt. A task that still fails leaves its
# scan requests in place, and message_scan_sweep_task sends them again.
@shared_task(
    bind=True,
    acks_late=True,
    max_retries=MAX_RETRIES,
    autoretry_for=(ScanRetry, OperationalError),
    retry_backoff=10,
    retry_backoff_max=600,
    retry_jitter=True,
)
def message_scan_task(
    self: Task, request_ids: list[int], workspace_id: str | None = None
) -> dict[str, int]:
    outcome = scan.message_scan_requests(
        request_ids=request_ids, workspace_id=uuid.UUID(workspace_id) if workspace_id else None
    )
    if outcome.skipped:
        raise ScanRetry(len(outcome.skipped))
    return {
        "scanned": outcome.scanned,
        "reused": outcome.reused,
        "findings": outcome.new_findings,
    }


@shared_task
def message_scan_sweep_task() -> dict[str, int]:
    counts = {**scan.message_scan_sweep(), **review.rescan_run_sweep()}
    logger.info("scan sweep: %s", counts)
    return counts


@shared_task(
    acks_late=True,
    soft_time_limit=settings.MEMDESK_RESCAN_TIME_LIMIT,
    time_limit=settings.MEMDESK_RESCAN_TIME_LIMIT + 60,
)
def redaction_rescan_task(run_id: int) -> str:
    # No retry: a failed run is recorded as failed; what it scanned stays scanned.
    return str(review.rescan_run_execute(run_id=run_id).status)
