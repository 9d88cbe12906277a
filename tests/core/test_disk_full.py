"""A write refused because the disk is full answers 503 and says so: ``disk_full``
under /v1/, a page that says it on the dashboard, never a 500 or "database unavailable"."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test import Client

from core.errors import DatabaseUnavailableMiddleware
from memory.models import Message
from tests.dashboard.factories import PASSWORD


@pytest.fixture
def sqlite_only(transactional_db) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("fills the database with SQLite's max_page_count; PostgreSQL has no such cap")


@contextmanager
def _database_full() -> Iterator[None]:
    """SQLite refuses to grow the database file past its size now: its own "database or
    disk is full" (SQLITE_FULL), as on a full disk."""
    with connection.cursor() as cursor:
        # Without the pages earlier tests freed (VACUUM, outside any transaction: the
        # tests that fill the disk run on transactional_db), every new row needs a page
        # the file cannot get.
        cursor.execute("VACUUM")
        cursor.execute("PRAGMA page_count")
        (pages,) = cursor.fetchone()
        cursor.execute(f"PRAGMA max_page_count = {pages}")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA max_page_count = 4294967294")


def _write(api, conversation_id: str):
    # Far more than the free pages left in the file: the write must grow it.
    content = " ".join(f"line {n} of a long report." for n in range(15_000))
    return api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": content},
        format="json",
    )


def test_a_write_on_a_full_disk_answers_503_disk_full(api, sqlite_only):
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()

    with _database_full():
        refused = _write(api, conversation["id"])

    assert refused.status_code == 503
    body = refused.json()
    assert body["code"] == "disk_full"
    assert "disk is full" in body["error"]
    assert body["requestId"] == refused["X-Request-Id"]
    assert refused["Retry-After"]
    assert not Message.objects.filter(conversation_id=conversation["id"]).exists()
    assert _write(api, conversation["id"]).status_code == 201  # space again: it is stored


def test_a_dashboard_write_on_a_full_disk_shows_a_page_that_says_so(api, member, sqlite_only):
    user = member("reviewer")
    browser = Client(raise_request_exception=False)
    assert browser.login(username=user.username, password=PASSWORD)
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()

    with _database_full():
        page = browser.post(
            f"/conversations/{conversation['id']}/observations/add/",
            {
                "text": " ".join(f"Refund {n} is late." for n in range(900)),
                "priority": "medium",
                "reason": "summing up the refunds",
            },
        )

    assert page.status_code == 503
    assert "disk is full" in page.content.decode()


def _postgres_disk_full() -> OperationalError:
    error = OperationalError("could not extend file")
    error.__cause__ = psycopg.errors.DiskFull("could not extend file")
    return error


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(OSError(errno.ENOSPC, "No space left on device"), id="file-write"),
        pytest.param(OSError(errno.EDQUOT, "Disk quota exceeded"), id="quota"),
        pytest.param(_postgres_disk_full(), id="postgresql"),
    ],
)
def test_every_kind_of_full_disk_is_answered_as_disk_full(db, rf, error):
    middleware = DatabaseUnavailableMiddleware(lambda request: None)

    response = middleware.process_exception(rf.post("/v1/conversations"), error)

    assert response.status_code == 503
    assert b'"code": "disk_full"' in response.content


def test_an_error_of_another_kind_is_left_alone(db, rf):
    middleware = DatabaseUnavailableMiddleware(lambda request: None)
    refused = OSError(errno.EACCES, "Permission denied")

    assert middleware.process_exception(rf.post("/v1/conversations"), refused) is None
