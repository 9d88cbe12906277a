"""Work for the Celery workers, sent only once the write that made it due has committed."""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction

logger = logging.getLogger(__name__)


def enqueue_on_commit(task_name: str, *args: object) -> None:
    """Send the task named ``task_name`` after the surrounding transaction commits.

    By name (``send_task``), so a module that schedules work need not import the tasks
    module that does it, which imports the scheduler back. A broker that is down must
    fail neither the write nor the request: the row that made the work due stays
    pending in the database, and the periodic sweeper sends it again.
    """

    def send() -> None:
        try:
            current_app.send_task(task_name, args=list(args), retry=False)
        except Exception:  # noqa: BLE001 - any broker failure; the sweeper recovers
            logger.warning("could not enqueue %s %s; the sweeper will retry", task_name, args)

    transaction.on_commit(send)
