"""The worker heartbeat: recorded when a worker starts and whenever one runs the task
that beat sends every minute (to the default queue and to the scan's), with the queues
it reads, so ``/readyz`` can tell that a worker and a scanner are alive."""

from __future__ import annotations

import socket
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from core.readiness import worker_heartbeat_record


def _queues_read(app: Any) -> list[str]:
    """The queues this worker process reads: those given with --queues, else the default."""
    consumed = app.amqp.queues.consume_from
    return sorted(consumed) if consumed else [app.conf.task_default_queue]


@shared_task(bind=True, ignore_result=True)
def worker_heartbeat(self: Task) -> None:
    # Applied in a process that is no worker (a test, a shell), it records no queues:
    # not known.
    worker_heartbeat_record(
        hostname=self.request.hostname or socket.gethostname(),
        queues=() if self.request.is_eager else _queues_read(self.app),
    )


@worker_ready.connect
def _heartbeat_at_start(sender: Any = None, **kwargs: Any) -> None:
    worker_heartbeat_record(
        hostname=getattr(sender, "hostname", "") or socket.gethostname(),
        queues=_queues_read(sender.app) if sender is not None else (),
    )
