"""Running a transaction again when the database broke a lock conflict by failing it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

# PostgreSQL's deadlock_detected and serialization_failure (psycopg's sqlstate).
_CONFLICT_STATES = ("40P01", "40001")


def lost_a_conflict(error: OperationalError) -> bool:
    """Whether the database failed the transaction to break a lock conflict (it rolled
    back whole, so running it again is safe): a PostgreSQL deadlock or serialization
    failure, or SQLite's busy database."""
    if getattr(error.__cause__, "sqlstate", None) in _CONFLICT_STATES:
        return True
    return "database is locked" in str(error)


def _is_lost_conflict(error: BaseException) -> bool:
    return isinstance(error, OperationalError) and lost_a_conflict(error)


def retried_on_conflict(work: Callable[[], T], *, attempts: int = 3, name: str = "") -> T:
    """``work()``, one whole transaction, run again with a short backoff (50 ms, then
    doubling) when it lost a lock conflict (up to ``attempts`` runs in all); any other
    error is raised at once, and the last conflict as it was."""

    def say_retrying(state: RetryCallState) -> None:
        logger.warning(
            "%s lost a lock conflict; trying again (run %s of %s)",
            name or "a transaction",
            state.attempt_number + 1,
            attempts,
        )

    retrying = Retrying(
        retry=retry_if_exception(_is_lost_conflict),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.05),
        before_sleep=say_retrying,
        reraise=True,
    )
    return retrying(work)
