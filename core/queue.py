"""Work for the Celery workers, sent only once the write that made it due has committed."""

from __future__ import annotations

import logging

from celery import current_app
from django.core.cache import cache
from django.db import transaction

from core.cache import cache_add

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


# A task sent under a mark and not started yet stays marked this long at most, so a task
# the broker lost stops holding back new ones (the sweepers send its work again).
QUEUED_MARK_SECONDS = 60


def enqueue_on_commit_unless_queued(task_name: str, *args: object, mark: str) -> None:
    """``enqueue_on_commit``, unless a task sent under ``mark`` is still waiting for a
    worker: for a task that does all the work waiting when it starts (it calls
    ``queued_mark_clear(mark)`` first), one queued task is enough, however many writes
    made work meanwhile. With the cache down every write sends its task."""

    def send() -> None:
        if not cache_add(queued_mark_key(mark), 1, QUEUED_MARK_SECONDS, when_down=True):
            return
        try:
            current_app.send_task(task_name, args=list(args), retry=False)
        except Exception:  # noqa: BLE001 - any broker failure; the sweeper recovers
            queued_mark_clear(mark)
            logger.warning("could not enqueue %s %s; the sweeper will retry", task_name, args)

    transaction.on_commit(send)


def queued_mark_key(mark: str) -> str:
    return f"memdesk:queued:{mark}"


def queued_mark_clear(mark: str) -> None:
    """Called by a task as it starts, before it reads the work waiting: a write that
    commits after this sends a task of its own."""
    cache.delete_many([queued_mark_key(mark)])
