"""Running a transaction again when the database broke a lock conflict by failing it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import OperationalError

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


def retried_on_conflict(work: Callable[[], T], *, attempts: int = 3, name: str = "") -> T:
    """``work()``, one whole transaction, run again with a short backoff when it lost a
    lock conflict (up to ``attempts`` runs in all); any other error is raised at once."""
    for attempt in range(1, attempts):
        try:
            return work()
        except OperationalError as error:
            if not lost_a_conflict(error):
                raise
            logger.warning(
                "%s lost a lock conflict; trying again (run %s of %s)",
                name or "a transaction",
                attempt + 1,
                attempts,
            )
            time.sleep(0.05 * 2 ** (attempt - 1))
    return work()
