"""Work for the Celery workers, sent only once the write that made it due has committed;
in a web worker, from a thread of its own, after the response (``send_in_background``)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable

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

    transaction.on_commit(lambda: _dispatch(send))


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

    transaction.on_commit(lambda: _dispatch(send))


def queued_mark_key(mark: str) -> str:
    return f"memdesk:queued:{mark}"


def queued_mark_clear(mark: str) -> None:
    """Called by a task as it starts, before it reads the work waiting: a write that
    commits after this sends a task of its own."""
    cache.delete_many([queued_mark_key(mark)])


class _BackgroundSender:
    """Sends, one after the other, from a daemon thread: a write's request no longer waits
    for the cache's queued mark and the broker (0.2 ms and 0.6 ms of a 1-message write,
    more on the filesystem broker). Nothing is lost that a send inline would keep: the
    rows that made the work due are committed before anything is queued here, and the
    sweepers send again what a process took down with it; at a clean exit the queue is
    flushed."""

    FLUSH_SECONDS = 2.0

    def __init__(self) -> None:
        self._waiting: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._run, name="memdesk-task-sender", daemon=True).start()
        atexit.register(self.flush)

    def put(self, send: Callable[[], None]) -> None:
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._waiting.put(send)

    def _run(self) -> None:
        while True:
            send = self._waiting.get()
            try:
                send()
            except Exception:  # noqa: BLE001 - a send logs its own failures; never stop
                logger.exception("a task send failed in the background")
            with self._lock:
                self._pending -= 1
                if not self._pending:
                    self._idle.set()

    def flush(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Wait until everything queued is sent (at most ``timeout`` seconds); whether it
        was. At exit, what is left unsent is counted in the log."""
        began = time.monotonic()
        sent = self._idle.wait(timeout)
        if not sent:
            logger.warning(
                "%d task send(s) left unsent after %.1f s; the sweepers will send them",
                self._pending,
                time.monotonic() - began,
            )
        return sent


_sender: _BackgroundSender | None = None


def send_in_background() -> None:
    """From now on this process sends its tasks from a thread of its own, after the
    request that made them due has answered. Called by each web worker once it has
    started (config/gunicorn.py); Celery workers, commands and tests send inline."""
    global _sender
    if _sender is None:
        _sender = _BackgroundSender()


def sends_flush(timeout: float = _BackgroundSender.FLUSH_SECONDS) -> bool:
    """Wait for the sends queued in the background (none: True at once)."""
    return _sender.flush(timeout) if _sender is not None else True


def _dispatch(send: Callable[[], None]) -> None:
    if _sender is None:
        send()
    else:
        _sender.put(send)
