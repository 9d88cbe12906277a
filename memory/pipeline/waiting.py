"""The deadline of a run executed inside a request (``?wait=true``): SIGALRM, as Celery's
soft time limit does in a worker, never in the middle of a database call."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection


class RunWaitExceeded(BaseException):
    """``?wait=true`` has waited as long as it may: the run goes back to the queue.

    A BaseException, so that no ``except Exception`` on the way (the cache helpers, an
    engine's error handling) swallows it."""


class _WaitDeadline:
    """Interrupts a run executed inside a request when the wait is over (SIGALRM, as
    Celery's soft time limit does in a worker). Never in the middle of a database call:
    an interrupted query would leave the connection unusable, so an alarm that comes
    during one takes effect as soon as it returns."""

    def __init__(self) -> None:
        self.in_query = False
        self.expired = False

    def on_alarm(self, signum: int, frame: object) -> None:
        self.expired = True
        if not self.in_query:
            raise RunWaitExceeded

    def around_query(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        self.in_query = True
        try:
            result = execute(sql, params, many, context)
        finally:
            self.in_query = False
        if self.expired:
            raise RunWaitExceeded
        return result


def can_interrupt_runs() -> bool:
    """Signals reach only the main thread: a threaded server (runserver, gunicorn's
    gthread workers) cannot bound a run it executes, so it leaves runs to the workers."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interrupted_at(deadline: float | None) -> Iterator[None]:
    if deadline is None:
        yield
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise RunWaitExceeded
    watch = _WaitDeadline()
    previous = signal.signal(signal.SIGALRM, watch.on_alarm)
    signal.setitimer(signal.ITIMER_REAL, remaining)
    try:
        with connection.execute_wrapper(watch.around_query):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
