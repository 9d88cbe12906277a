"""A transaction the database failed to break a lock conflict is run again; any other
database error is not."""

from __future__ import annotations

import logging
import time

import pytest
from django.db import OperationalError

from core.transactions import retried_on_conflict


class _Deadlock(Exception):
    sqlstate = "40P01"


def _work(failures: list[OperationalError]):
    runs: list[int] = []

    def work() -> str:
        runs.append(1)
        if failures:
            raise failures.pop(0)
        return "stored"

    return work, runs


def _deadlock() -> OperationalError:
    error = OperationalError("deadlock detected")
    error.__cause__ = _Deadlock()
    return error


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(time, "sleep", waits.append)
    return waits


def test_a_transaction_that_lost_a_deadlock_is_run_again_until_it_succeeds(no_backoff, caplog):
    work, runs = _work([_deadlock(), OperationalError("database is locked")])
    with caplog.at_level(logging.WARNING, logger="core.transactions"):
        assert retried_on_conflict(work, name="conversation delete") == "stored"
    assert len(runs) == 3
    assert no_backoff == [0.05, 0.1]
    assert [r.getMessage() for r in caplog.records] == [
        "conversation delete lost a lock conflict; trying again (run 2 of 3)",
        "conversation delete lost a lock conflict; trying again (run 3 of 3)",
    ]


def test_it_gives_up_after_the_last_attempt():
    work, runs = _work([_deadlock(), _deadlock(), _deadlock()])
    with pytest.raises(OperationalError, match="deadlock detected"):
        retried_on_conflict(work, attempts=3)
    assert len(runs) == 3


def test_any_other_database_error_is_raised_at_once():
    work, runs = _work([OperationalError("server closed the connection unexpectedly")])
    with pytest.raises(OperationalError, match="server closed"):
        retried_on_conflict(work)
    assert len(runs) == 1
