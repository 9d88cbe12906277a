"""Logs carry the request id and never content: JSON lines when LOG_FORMAT=json, and no
database error's message (PostgreSQL's quotes the refused row) in any traceback."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.conf import settings
from django.db import IntegrityError, transaction

from core.logs import ContentFreeFormatter, JsonFormatter
from core.request_ids import RequestIdFilter
from tenancy.models import Workspace

SECRET = "dana.whitfield@example.com"
# Built here, so that the traceback's source lines (which name the variable) cannot hold it.
ROW_VALUE = "-".join(["dana", "whitfield"])


@pytest.fixture
def captured():
    """What the root logger writes, through the formatter each test picks."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler, stream
    finally:
        root.removeHandler(handler)


def test_json_logs_are_one_object_per_line_with_the_request_id(api, captured):
    handler, stream = captured
    handler.setFormatter(JsonFormatter())
    conversation = api.post("/v1/conversations", {"userId": "dana"}, format="json").json()
    api.post(
        f"/v1/conversations/{conversation['id']}/messages",
        {"role": "user", "content": f"Write to me at {SECRET}"},
        format="json",
        HTTP_X_REQUEST_ID="req-json-1",
    )
    api.get("/v1/no-such-route", HTTP_X_REQUEST_ID="req-json-2")

    entries = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert entries
    assert all({"time", "level", "logger", "request_id", "message"} <= set(e) for e in entries)
    assert any(e["request_id"] == "req-json-2" and e["level"] == "WARNING" for e in entries)
    assert SECRET not in stream.getvalue()


def test_a_json_line_holds_the_documented_fields_only(client, captured):
    handler, stream = captured
    handler.setFormatter(JsonFormatter())
    # Django logs the 404 with the request attached: its repr would quote the query string.
    client.get("/v1/no-such-route?q=dana.whitfield", HTTP_X_REQUEST_ID="req-json-3")
    logging.getLogger("memory.pipeline").info("observer run %s stored %s notes", "8f14e45f", 2)

    first, second = (json.loads(line) for line in stream.getvalue().splitlines()[-2:])
    assert list(first) == ["time", "level", "logger", "request_id", "message"]
    assert first["request_id"] == "req-json-3" and "dana" not in stream.getvalue()
    assert second["message"] == "observer run 8f14e45f stored 2 notes"
    assert second["request_id"] == "-"
    assert second["time"].endswith("+00:00") and len(second["time"]) == 29  # milliseconds


def test_a_refused_rows_values_never_reach_a_traceback(db, captured):
    handler, stream = captured
    handler.setFormatter(ContentFreeFormatter("%(levelname)s %(name)s %(message)s"))
    Workspace.objects.create(name=ROW_VALUE)
    try:
        with transaction.atomic():
            Workspace.objects.create(name=ROW_VALUE)
    except IntegrityError:
        logging.getLogger("django.request").exception("Internal Server Error: /v1/x")
    text = stream.getvalue()
    assert "IntegrityError" in text and "Traceback" in text
    assert "the database's message is not logged" in text
    assert ROW_VALUE not in text


def test_json_tracebacks_leave_database_messages_out_too(db, captured):
    handler, stream = captured
    handler.setFormatter(JsonFormatter())
    Workspace.objects.create(name=ROW_VALUE)
    try:
        with transaction.atomic():
            Workspace.objects.create(name=ROW_VALUE)
    except IntegrityError:
        logging.getLogger("memory").exception("write refused")
    entry = json.loads(stream.getvalue().splitlines()[-1])
    assert "IntegrityError" in entry["exception"] and ROW_VALUE not in entry["exception"]


def test_sql_with_its_parameters_is_never_logged():
    assert settings.LOGGING["loggers"]["django.db.backends"]["level"] == "INFO"
