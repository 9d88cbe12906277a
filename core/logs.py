r"""Log formatting: plain lines or one JSON object per line (``LOG_FORMAT``), both
carrying the request id, neither ever quoting a database row, and neither letting a
value break a line.

Memdesk's own log calls name ids and counts, never content. A database error is the
exception: PostgreSQL's message for a refused row quotes the row ("Failing row contains
(...)", "Key (user_id)=(dana@example.com) already exists"), and a traceback prints that
message. Tracebacks here keep every frame and the error's type and SQLSTATE, and leave
the database's message out.

A value a client chose (a path, a header) may hold control characters: ``%0D%0A`` in a
path arrives decoded as a line break and would forge a log line after it. Every control
character (C0, DEL, C1) and the Unicode line and paragraph separators are written as
escapes (``\r``, ``\n``, ``\x00``, ``\u2028``), as Django's own request log writes them,
in either format and in the web server's access log (config/gunicorn.py). A traceback
alone keeps its lines, and escapes its error's message.
"""

from __future__ import annotations

import logging
import logging.config
import re
import traceback
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from pythonjsonlogger import json as jsonlogger

ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]

_LINE_BREAKING = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(character: re.Match[str]) -> str:
    code = ord(character.group())
    return _SHORT_ESCAPES.get(character.group()) or (
        f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
    )


def control_characters_escaped(text: str) -> str:
    """``text`` on one line: each control character and line separator as its escape."""
    return _LINE_BREAKING.sub(_escape, text)


# Where the drivers' and Django's database errors come from.
_DATABASE_MODULES = ("django.db", "psycopg", "psycopg2", "sqlite3")


def _is_database_error(error: BaseException) -> bool:
    return type(error).__module__.startswith(_DATABASE_MODULES)


def _described(error: BaseException) -> str:
    name = f"{type(error).__module__}.{type(error).__qualname__}"
    if not _is_database_error(error):
        return f"{name}: {control_characters_escaped(str(error))}" if str(error) else name
    code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    cause = error.__cause__
    code = code or getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    suffix = f" SQLSTATE {code}" if code else ""
    return f"{name}:{suffix} (the database's message is not logged: it may quote the row)"


def content_free_traceback(error: BaseException) -> str:
    """The traceback of ``error`` and the errors it was raised from, as Python prints
    it, with database errors' messages left out."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, traceback._cause_message  # type: ignore[attr-defined]
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, traceback._context_message  # type: ignore[attr-defined]
        else:
            current = None
    parts: list[str] = []
    for index, (exc, _) in enumerate(reversed(chain)):
        if index:
            parts.append(list(reversed(chain))[index - 1][1])
        parts.append("Traceback (most recent call last):\n")
        parts.extend(traceback.format_tb(exc.__traceback__))
        parts.append(_described(exc) + "\n")
    return "".join(parts).rstrip("\n")


def logging_configure(config: dict[str, Any]) -> None:
    """Django's ``LOGGING_CONFIG``: the settings' ``LOGGING``, with Python's warnings sent
    through it (logger ``py.warnings``), so that a warning is written in the configured
    format too, not as bare lines on stderr."""
    logging.config.dictConfig(config)
    logging.captureWarnings(True)


class ContentFreeFormatter(logging.Formatter):
    """Django's plain format on one line (a traceback follows on lines of its own), with
    tracebacks that leave database messages out."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        return control_characters_escaped(super().formatMessage(record))

    def formatException(self, ei: ExcInfo) -> str:  # type: ignore[override]  # noqa: N802
        return content_free_traceback(ei[1])


class JsonFormatter(jsonlogger.JsonFormatter):
    """One JSON object per line: time, level, logger, request_id, message, and the
    traceback (database messages left out) when there is one.

    Only those fields: Django attaches the request to its records (whose repr quotes the
    query string) and Celery its task's context, which python-json-logger would
    otherwise write as extra fields."""

    FIELDS = frozenset({"time", "level", "logger", "request_id", "message", "exception"})

    def __init__(self) -> None:
        super().__init__(
            "{asctime}{levelname}{name}{request_id}{message}",
            style="{",
            rename_fields={
                "asctime": "time",
                "levelname": "level",
                "name": "logger",
                "exc_info": "exception",
            },
            json_ensure_ascii=False,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")

    def formatException(self, ei: ExcInfo) -> str:  # type: ignore[override]  # noqa: N802
        return content_free_traceback(ei[1])

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_data, record, message_dict)
        for key in [key for key in log_data if key not in self.FIELDS]:
            del log_data[key]
        if log_data.get("request_id") is None:  # a record the request-id filter did not see
            log_data["request_id"] = "-"
        # JSON escapes C0 characters itself, but not C1 or the line separators; and a
        # reader that decodes the message and prints it must not print line breaks.
        for key in ("logger", "request_id", "message"):
            if isinstance(log_data.get(key), str):
                log_data[key] = control_characters_escaped(log_data[key])
