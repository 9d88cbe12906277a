"""PostgreSQL connections dropped under the running app (pg_terminate_backend, and the
database refusing connections for a while): a clear 503 with Retry-After, JSON under
/v1/ and the product's page on the dashboard, then recovery on the next request with
nothing lost or doubled."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection
from django.test import Client

from memory.models import Message
from tests.dashboard.factories import PASSWORD

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture(autouse=True)
def _postgres_only(requires_postgres) -> None:
    pass


def _admin() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db.get("HOST") or "127.0.0.1",
        port=db.get("PORT") or 5432,
        user=db.get("USER") or "postgres",
        dbname="postgres",
        autocommit=True,
    )


def _terminate_app_connections() -> int:
    name = connection.settings_dict["NAME"]
    with _admin() as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchall()
    return len(rows)


@contextmanager
def _database_refusing_connections() -> Iterator[None]:
    name = connection.settings_dict["NAME"]
    quoted = psycopg.sql.Identifier(name)
    with _admin() as admin:
        admin.execute(psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(quoted))
    try:
        _terminate_app_connections()
        yield
    finally:
        with _admin() as admin:
            admin.execute(
                psycopg.sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(quoted)
            )


def _write(api, conversation_id: str, content: str):
    return api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": content},
        format="json",
    )


def test_a_dropped_connection_answers_503_json_then_the_next_request_recovers(api):
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()
    assert _write(api, conversation["id"], "first").status_code == 201
    assert api.get("/v1/conversations").status_code == 200  # the connection is open

    assert _terminate_app_connections() >= 1
    failed = _write(api, conversation["id"], "second")
    recovered = _write(api, conversation["id"], "second")

    assert failed.status_code == 503
    assert failed["Content-Type"] == "application/json"
    assert failed["Retry-After"] == "5"
    body = failed.json()
    assert body["code"] == "database_unavailable"
    assert body["requestId"] == failed["X-Request-Id"]
    assert recovered.status_code == 201
    newest_first = api.get(f"/v1/conversations/{conversation['id']}/messages").json()
    assert [(m["seq"], m["content"]) for m in newest_first["messages"]] == [
        (2, "second"),
        (1, "first"),
    ]


def test_while_the_database_refuses_connections_api_and_dashboard_answer_503(api, member, caplog):
    user = member("viewer")
    browser = Client(raise_request_exception=False)
    assert browser.login(username=user.username, password=PASSWORD)
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()
    assert browser.get("/conversations/").status_code == 200

    with _database_refusing_connections():
        during_api = [api.get("/v1/conversations") for _ in range(2)]
        during_write = _write(api, conversation["id"], "lost in the outage?")
        page = browser.get("/conversations/")

    assert [r.status_code for r in during_api] == [503, 503]
    assert {r.json()["code"] for r in during_api} == {"database_unavailable"}
    assert during_write.status_code == 503
    assert page.status_code == 503
    assert "Memdesk is briefly unavailable" in page.content.decode()
    assert page["Retry-After"] == "5"
    # The log names the failure, never the statement or its parameters.
    assert "lost in the outage" not in caplog.text

    # Back: the client retries the write it was refused, and it is stored once.
    assert api.get("/v1/conversations").status_code == 200
    assert browser.get("/conversations/").status_code == 200
    assert _write(api, conversation["id"], "lost in the outage?").status_code == 201
    assert Message.objects.filter(conversation_id=conversation["id"]).count() == 1
