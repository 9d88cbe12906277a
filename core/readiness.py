"""What ``/readyz`` checks that every app shares: the database, the broker, that a
worker and a scanner were alive lately, and free disk for the data directory. Each check answers in
words and never raises."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import connection
from django.utils import timezone

from core.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

# Brokers that live inside Memdesk's own processes: nothing to reach.
EMBEDDED_BROKERS = ("filesystem://", "memory://")
# Rows of workers not seen for this long are forgotten (container hostnames change).
HEARTBEAT_KEPT = timedelta(days=1)


def worker_heartbeat_record(*, hostname: str, queues: Iterable[str] = ()) -> None:
    """Note that the worker ``hostname``, reading ``queues`` (none: not known), is alive
    now."""
    now = timezone.now()
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname[:255], defaults={"seen_at": now, "queues": ",".join(sorted(queues))[:500]}
    )
    WorkerHeartbeat.objects.filter(seen_at__lt=now - HEARTBEAT_KEPT).delete()


# What the last probe of this process found missing: a probe every few seconds while
# something is down logs once when it goes down and once when it is back.
_last_unready: frozenset[str] = frozenset()


def readiness_log(unready: frozenset[str]) -> None:
    """Log a change of readiness, naming the checks that fail (each check logs its
    error's type at INFO)."""
    global _last_unready
    if unready == _last_unready:
        return
    if unready:
        logger.warning("readiness: not ready (%s)", ", ".join(sorted(unready)))
    else:
        logger.warning("readiness: ready again")
    _last_unready = unready


def database_check() -> dict[str, object]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:  # noqa: BLE001 - readiness answers whatever the failure
        logger.info("readiness: database check failed (%s)", type(error).__name__)
        return {"status": "unavailable", "vendor": connection.vendor}
    return {"status": "ok", "vendor": connection.vendor}


def broker_check() -> dict[str, object]:
    """One connection attempt, bounded by CELERY_BROKER_CONNECTION_TIMEOUT."""
    if settings.CELERY_BROKER_URL.startswith(EMBEDDED_BROKERS):
        return {"status": "ok", "embedded": True}
    try:
        with current_app.connection_for_write() as broker:
            broker.ensure_connection(
                max_retries=1, timeout=settings.CELERY_BROKER_CONNECTION_TIMEOUT
            )
    except Exception as error:  # noqa: BLE001 - any transport's failure
        logger.info("readiness: broker check failed (%s)", type(error).__name__)
        return {"status": "unavailable", "embedded": False}
    return {"status": "ok", "embedded": False}


def worker_check() -> dict[str, object]:
    """A worker reading the default queue (Observer and Reflector runs, erasure,
    retention) was seen within MEMDESK_READY_HEARTBEAT_SECONDS."""
    return _heartbeat_check(current_app.conf.task_default_queue)


def scanner_check() -> dict[str, object]:
    """A worker reading the scan's queue (MEMDESK_SCAN_QUEUE: the Procfile's scanner) was
    seen within MEMDESK_READY_HEARTBEAT_SECONDS: without one, messages wait unscanned."""
    return _heartbeat_check(settings.MEMDESK_SCAN_QUEUE)


def _heartbeat_check(queue: str) -> dict[str, object]:
    try:
        rows = list(WorkerHeartbeat.objects.order_by("-seen_at"))
    except Exception:  # noqa: BLE001 - the database check reports the cause
        return {"status": "unknown"}
    latest = next((row for row in rows if not row.queues or queue in row.queues.split(",")), None)
    if latest is None:
        return {"status": "unavailable", "lastSeenSecondsAgo": None}
    ago = max(int((timezone.now() - latest.seen_at).total_seconds()), 0)
    fresh = ago <= settings.MEMDESK_READY_HEARTBEAT_SECONDS
    return {"status": "ok" if fresh else "unavailable", "lastSeenSecondsAgo": ago}


def disk_check() -> dict[str, object]:
    """At least MEMDESK_MIN_FREE_DISK_MB free on the disk under the data directory
    (MEMDESK_VAR_DIR). Below it writes soon fail: SQLite's, the embedded broker's (a
    task file left empty), the audit checkpoints'."""
    minimum = settings.MEMDESK_MIN_FREE_DISK_MB
    try:
        free = shutil.disk_usage(settings.VAR_DIR).free // 2**20
    except OSError as error:
        logger.info("readiness: disk check failed (%s)", type(error).__name__)
        return {"status": "unknown", "freeMb": None, "minimumMb": minimum}
    if free < minimum:
        logger.info("readiness: %d MB free under the data directory, below %d MB", free, minimum)
        return {"status": "low", "freeMb": free, "minimumMb": minimum}
    return {"status": "ok", "freeMb": free, "minimumMb": minimum}
