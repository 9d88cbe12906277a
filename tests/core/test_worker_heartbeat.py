"""A real Celery worker records its heartbeat when it starts and when it runs the
heartbeat task, and /readyz then sees a worker."""

from __future__ import annotations

import pytest
from celery import current_app

from core.models import WorkerHeartbeat
from tests.memory.celery_workers import Worker, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_started_worker_is_seen_by_readyz(client, broker):
    assert client.get("/readyz").status_code == 503  # no worker yet
    worker = Worker("heart", broker, {})
    try:
        started = wait_until(
            lambda: WorkerHeartbeat.objects.filter(hostname="heart@test").first(),
            timeout=60,
            what="the worker's heartbeat at start",
            logs=[worker],
        )
        assert client.get("/readyz").status_code == 200

        current_app.send_task("core.tasks.worker_heartbeat", queue=broker.queue)
        wait_until(
            lambda: WorkerHeartbeat.objects.filter(
                hostname="heart@test", seen_at__gt=started.seen_at
            ).exists(),
            timeout=60,
            what="the heartbeat task",
            logs=[worker],
        )
    finally:
        worker.stop()


def test_a_scanner_is_seen_with_the_queue_it_reads(client, broker):
    worker = Worker("scanner", broker, {}, queues=(broker.scan_queue,))
    try:
        seen = wait_until(
            lambda: WorkerHeartbeat.objects.filter(hostname="scanner@test").first(),
            timeout=60,
            what="the scanner's heartbeat at start",
            logs=[worker],
        )
        assert seen.queues == broker.scan_queue
        # Only a scanner alive: the worker check still fails.
        checks = client.get("/readyz").json()["checks"]
        assert (checks["scanner"]["status"], checks["worker"]["status"]) == ("ok", "unavailable")

        # Beat's heartbeat for the scanner goes to its queue.
        current_app.send_task("core.tasks.worker_heartbeat", queue=broker.scan_queue)
        wait_until(
            lambda: WorkerHeartbeat.objects.filter(
                hostname="scanner@test", seen_at__gt=seen.seen_at
            ).exists(),
            timeout=60,
            what="the heartbeat task on the scan's queue",
            logs=[worker],
        )
    finally:
        worker.stop()
