"""gunicorn's settings for the web process: ``gunicorn config.wsgi -c config/gunicorn.py``
(the Procfile, docs/deployment.md). Command-line options override these.

The access log names the request by its method and path only, and by its request id:
query strings carry people's e-mail addresses and names (``?userId=``, the dashboard's
``?q=``), and so does the path of an end user's page, which is logged as
``/users/…/``. Control characters a client put in the path (``%0D%0A``, ``%00``) are
written as escapes, so they cannot forge a line (core/logs.py).

Under ``LOG_FORMAT=json`` gunicorn's error log and access log are written by the JSON
formatter of Django's log (core/logs.py): one object per line, the access line as the
message, with its request id in ``request_id``."""

from __future__ import annotations

import gc
import os
import re
from datetime import timedelta
from logging import LogRecord
from typing import Any

from gunicorn.glogging import Logger

from core.logs import JsonFormatter, control_characters_escaped

bind = os.environ.get("MEMDESK_WEB_BIND") or f"127.0.0.1:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY") or 2)
# A request still running after this many seconds is killed with its worker.
# MEMDESK_RUN_WAIT_SECONDS (observe/reflect ?wait=true) must stay under it; the Django
# settings refuse to start otherwise.
timeout = int(os.environ.get("MEMDESK_WEB_TIMEOUT") or 30)
graceful_timeout = timeout
# gunicorn's own bound on a request line is at most 8190 bytes, below a legal context
# question (up to 12,000 once percent-encoded), and it answers past it with an HTML 414.
# 0 lets every line through to Django, which refuses one over
# core.query_strings.MAX_URL_BYTES with a JSON 414; the proxy in front bounds what
# reaches gunicorn (docs/deployment.md).
limit_request_line = 0
accesslog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "warning")
access_log_format = '%(h)s %(t)s "%(m)s %(U)s %(H)s" %(s)s %(B)s %(M)sms %({x-request-id}o)s'

_PERSONAL_SEGMENT = re.compile(r"^(/users/)[^?]+?/?$")


def path_for_log(path: str) -> str:
    """The path as the access log shows it: an end user's id replaced by an ellipsis."""
    return _PERSONAL_SEGMENT.sub(r"\1…/", path)


def _with_request_id(record: LogRecord) -> bool:
    """An access record given the request id its atoms hold, for the JSON formatter."""
    record.request_id = record.args["{x-request-id}o"]  # type: ignore[call-overload, index]
    return True


class PathOnlyLogger(Logger):
    """gunicorn's logger with the query string and referrer left out of every atom, and
    JSON lines under LOG_FORMAT=json."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        if os.environ.get("LOG_FORMAT") != "json":
            return
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter())
        for handler in self.access_log.handlers:
            handler.setFormatter(JsonFormatter())
            handler.addFilter(_with_request_id)

    def atoms(
        self, resp: Any, req: Any, environ: dict[str, Any], request_time: timedelta
    ) -> dict[str, Any]:
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        path = path_for_log(environ.get("PATH_INFO", ""))
        atoms["U"] = path
        atoms["q"] = "-"
        atoms["f"] = "-"
        atoms["r"] = f"{environ.get('REQUEST_METHOD')} {path} {environ.get('SERVER_PROTOCOL')}"
        atoms.pop("{referer}i", None)
        return {
            name: control_characters_escaped(value) if isinstance(value, str) else value
            for name, value in atoms.items()
        }


logger_class = PathOnlyLogger


def post_worker_init(worker: Any) -> None:
    """Once the worker has loaded Django, its modules, settings and URL patterns (about
    190,000 objects) are moved out of the collector's sight: they live as long as the
    worker, and every full collection walked them all. A cached context read after a
    write spent 0.8 ms per request in the collector, 0.3 ms with them frozen
    (docs/benchmarks.md, issue 26).

    Its Celery tasks are sent from a thread of its own, after the response
    (``core.queue.send_in_background``), and the context reads it serves are written to
    the read ledger in batches by another (``governance.ledger.buffer``)."""
    gc.freeze()
    from core.queue import send_in_background
    from governance.ledger.buffer import ledger_buffer_start

    send_in_background()
    ledger_buffer_start()
