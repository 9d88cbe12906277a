"""The worker heartbeat: recorded when a worker starts and whenever one runs the task
that beat sends every minute, so ``/readyz`` can tell that some worker is alive."""

from __future__ import annotations

import socket
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from core.readiness import worker_heartbeat_record


@shared_task(bind=True, ignore_result=True)
def worker_heartbeat(self: Task) -> None:
    worker_heartbeat_record(hostname=self.request.hostname or socket.gethostname())


@worker_ready.connect
def _heartbeat_at_start(sender: Any = None, **kwargs: Any) -> None:
    worker_heartbeat_record(hostname=getattr(sender, "hostname", "") or socket.gethostname())
