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


# CR LF and NUL, as a probe sent them (%0D%0A, %00), then NEL (C1) and U+2028, which some
# log viewers also break lines at.
FORGED = "probe\r\n2026-01-01 ERROR forged line\x00\x85next\u2028last"
FORGED_ESCAPED = r"probe\r\n2026-01-01 ERROR forged line\x00\x85next\u2028last"
FORGED_PATH = "/v1/probe%0D%0A2026-01-01 ERROR forged line%00%C2%85next%E2%80%A8last"
RAW_CONTROLS = ("\r", "\n", "\x00", "\x85", "\u2028")
FORMATTERS = [
    pytest.param(
        ContentFreeFormatter(settings.LOGGING["formatters"]["plain"]["format"]), id="plain"
    ),
    pytest.param(JsonFormatter(), id="json"),
]


def _the_line_about(stream: io.StringIO, word: str, formatter: logging.Formatter) -> str:
    """The one line that mentions ``word`` (its message, for JSON), with no raw control
    character in it: a second line would be a forged one."""
    lines = [line for line in stream.getvalue().split("\n") if word in line]
    assert len(lines) == 1
    assert not any(control in lines[0] for control in RAW_CONTROLS)
    return json.loads(lines[0])["message"] if isinstance(formatter, JsonFormatter) else lines[0]


@pytest.mark.parametrize("formatter", FORMATTERS)
def test_a_path_with_control_characters_is_one_escaped_not_found_line(client, captured, formatter):
    handler, stream = captured
    handler.setFormatter(formatter)

    client.get(FORGED_PATH, HTTP_X_REQUEST_ID="req-forged-1")

    line = _the_line_about(stream, "probe", formatter)
    assert f"Not Found: /v1/{FORGED_ESCAPED}" in line


@pytest.mark.parametrize("formatter", FORMATTERS)
def test_control_characters_in_any_log_message_are_escaped(captured, formatter):
    handler, stream = captured
    handler.setFormatter(formatter)

    logging.getLogger("memory.api").warning("refused %s", FORGED)

    assert _the_line_about(stream, "probe", formatter).endswith(f"refused {FORGED_ESCAPED}")


def test_control_characters_in_an_exceptions_message_are_escaped(captured):
    handler, stream = captured
    handler.setFormatter(ContentFreeFormatter("%(levelname)s %(message)s"))
    try:
        raise ValueError(f"bad path /v1/{FORGED}")
    except ValueError:
        logging.getLogger("core").exception("request failed")

    last = stream.getvalue().rstrip("\n").split("\n")[-1]
    assert last == f"builtins.ValueError: bad path /v1/{FORGED_ESCAPED}"
