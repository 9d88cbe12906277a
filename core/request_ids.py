"""One id per request: the client's ``X-Request-Id`` when it sent a usable one, a new one
otherwise. It is returned in the response's ``X-Request-Id``, named in 500 bodies and
pages, recorded with every audit event the request writes, and stamped on every log
line written while the request runs, so one id finds a failure in the logs.

Written here rather than taken from django-guid or django-log-request-id: a client's
own plain id ("agent-run-42") is kept and anything else replaced, and neither does that
(django-guid keeps only UUIDs, or with validation off echoes any header as it is;
django-log-request-id never validates). django-guid also leaves its id set after the
response, so a worker thread's next log lines outside a request would carry it, and logs
a line at INFO for every request."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

HEADER = "X-Request-Id"
# What a client may choose: short and plain, so it can go into a log line and a header
# as it is. Anything else is replaced, never echoed.
_USABLE = re.compile(r"[A-Za-z0-9._:-]{1,100}")

_current: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


def request_id_of(request: HttpRequest) -> str:
    """This request's id (one is made up if the middleware did not run, as in tests that
    call a view directly)."""
    existing = getattr(request, "request_id", None)
    if existing:
        return str(existing)
    sent = request.headers.get(HEADER, "")
    request_id = sent if _USABLE.fullmatch(sent) else uuid.uuid4().hex
    request.request_id = request_id  # type: ignore[attr-defined]
    return request_id


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _current.set(request_id_of(request))
        try:
            response = self.get_response(request)
        finally:
            _current.reset(token)
        response[HEADER] = request_id_of(request)
        return response


class RequestIdFilter(logging.Filter):
    """Adds ``request_id`` to every record ("-" outside a request: workers, commands)."""

    def filter(self, record: logging.LogRecord) -> bool:
        # Django logs a 4xx answer after the middleware has returned, with the request
        # attached: its id comes from there.
        request = getattr(record, "request", None)
        if isinstance(request, HttpRequest):
            record.request_id = request_id_of(request)
        else:
            record.request_id = _current.get()
        return True
