"""One domain error for every service, and the API's JSON error bodies.

Every API error is ``{"error": sentence, "code": code, "message": sentence[, "field":
name]}``. The NAMS clients (Python and TypeScript) put ``error`` into the exception they
raise, so an agent sees the sentence ("Conversation not found in this workspace."); code
is the stable machine word to match on, and message repeats the sentence for readers that
took it from there.
"""

from __future__ import annotations

import errno
import logging
import re
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, connections
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.template import loader
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.request_ids import request_id_of

logger = logging.getLogger(__name__)


class MemdeskError(Exception):
    """A request a service refuses, with a code, a sentence and an HTTP status.

    ``field`` is the service's own name for what is wrong (a model field name, a path
    such as ``messages[1].content``); the API answers with the wire name
    (``wire_field``), the dashboard puts the message next to its form field."""

    def __init__(
        self, code: str, message: str, *, field: str | None = None, status_code: int = 400
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.field = field
        self.status_code = status_code


_SNAKE_CASE_WORD = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")
# Query parameters that the API spells in snake_case, as NAMS does.
SNAKE_CASE_ON_THE_WIRE = frozenset({"max_tokens"})


def wire_field(field: str, renames: Mapping[str, str] | None = None) -> str:
    """A field path as the services name it (``messages[1].created_at``, model field
    names) as the API spells it (``messages[1].createdAt``): ``renames`` first, for the
    names that differ in more than case (``end_user_id`` is ``userId``), then camelCase.
    Upper-case segments such as an entity type (``operators.EMAIL_ADDRESS``) stay."""
    root, separator, rest = field.partition(".")
    if renames and root in renames:
        return renames[root] + separator + wire_field(rest) if rest else renames[root]

    def camel(match: re.Match[str]) -> str:
        word = match.group()
        if word in SNAKE_CASE_ON_THE_WIRE:
            return word
        head, *tail = word.split("_")
        return head + "".join(part[:1].upper() + part[1:] for part in tail)

    return _SNAKE_CASE_WORD.sub(camel, field)


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"error": message, "code": code, "message": message}
    if field:
        body["field"] = field
    body.update(extra)
    return body


def _first_validation_error(detail: Any, path: str = "") -> tuple[str, str]:
    """Walk DRF's nested error detail to the first message and the dotted field path."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):
                # DRF keys the errors of list items by index: name them as the services
                # do ("messages[1].role"), not "messages.1.role".
                joined = f"{path}[{key}]"
            else:
                child = key if key != "non_field_errors" else ""
                joined = f"{path}.{child}" if path and child else (path or child)
            return _first_validation_error(value, joined)
    if isinstance(detail, list):
        for index, value in enumerate(detail):
            if isinstance(value, dict | list):
                return _first_validation_error(value, f"{path}[{index}]")
            return path, str(value)
    return path, str(detail)


_CODES = {
    exceptions.NotAuthenticated: "unauthorized",
    exceptions.AuthenticationFailed: "unauthorized",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.ParseError: "malformed_json",
    exceptions.Throttled: "rate_limited",
}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, MemdeskError):
        renames = getattr(context.get("view"), "wire_fields", None)
        field = wire_field(exc.field, renames) if exc.field else None
        return Response(error_body(exc.code, exc.message, field), status=exc.status_code)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found in this workspace."), status=404)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            error_body("request_too_large", "The request body is larger than this server accepts."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, exceptions.ValidationError):
        field, message = _first_validation_error(exc.detail)
        body = error_body("invalid_request", f"{field}: {message}" if field else message, field)
        body["details"] = exc.detail
        return Response(body, status=400)
    response = exception_handler(exc, context)
    if response is None:
        return None
    code = next((c for cls, c in _CODES.items() if isinstance(exc, cls)), "error")
    detail = getattr(exc, "detail", str(exc))
    message = str(detail) if not isinstance(detail, dict | list) else str(detail)
    if code == "malformed_json":
        message = f"The request body is not valid JSON ({message})."
    response.data = error_body(code, message)
    return response


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404 for unknown URLs: JSON under /v1/, so API clients never parse an HTML page."""
    if request.path.startswith("/v1/"):
        message = f"Not found: no API route {request.method} {request.path}."
        return JsonResponse(error_body("not_found", message), status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception or Http404())


def json_bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400 for requests Django refuses before a view runs (a host not allowed, a
    malformed cookie): JSON under /v1/, the product's page elsewhere."""
    if request.path.startswith("/v1/"):
        return JsonResponse(error_body("bad_request", "The request could not be read."), status=400)
    from django.views.defaults import bad_request

    return bad_request(request, exception or Exception())


def json_server_error(request: HttpRequest) -> HttpResponse:
    """500: the request's id, which every log line of the failure carries, in the JSON
    body under /v1/ and on the product's page elsewhere."""
    request_id = request_id_of(request)
    if request.path.startswith("/v1/"):
        message = f"The server failed; the logs have the details under request id {request_id}."
        return JsonResponse(error_body("server_error", message, requestId=request_id), status=500)
    # Rendered without the request's context processors: nothing here may need the
    # database or the session, which may be what failed.
    html = loader.get_template("500.html").render({"request_id": request_id})
    return HttpResponseServerError(html)


@dataclass(frozen=True)
class _Outage:
    """What a 503 for a storage outage says: its code and sentence under /v1/, its
    page elsewhere, and how many seconds a client is asked to wait (Retry-After)."""

    code: str
    message: str
    template: str
    retry_after: int


DATABASE_UNAVAILABLE = _Outage(
    "database_unavailable",
    "The database is unavailable; try again in a few seconds.",
    "503.html",
    5,
)
# Space comes back when an administrator frees it: a client is asked to wait longer.
DISK_FULL = _Outage(
    "disk_full",
    "The server's disk is full, so nothing can be saved; try again once an administrator "
    "has freed space.",
    "503_disk_full.html",
    60,
)
# PostgreSQL's SQLSTATE for "could not extend file: No space left on device".
_POSTGRES_DISK_FULL = "53100"


def _is_disk_full(error: BaseException) -> bool:
    """SQLite's "database or disk is full" (SQLITE_FULL), PostgreSQL's disk_full, or a
    file write that found no space (ENOSPC, or the quota's EDQUOT). Django raises the
    driver's error as the cause of its own."""
    for raised in (error, error.__cause__):
        if isinstance(raised, OSError) and raised.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(raised, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        if getattr(raised, "sqlstate", None) == _POSTGRES_DISK_FULL:
            return True
    return False


class DatabaseUnavailableMiddleware:
    """A lost or refused database connection, or a write with no disk space left, is an
    outage, not a bug: 503 with ``{"code": "database_unavailable"}`` or ``{"code":
    "disk_full"}`` under /v1/ and the product's page saying which elsewhere, with
    Retry-After. A broken connection is closed here, so the next request opens a fresh
    one (Django closes it at the end of a request too, but not under the test client,
    and a request that never reaches the end must not leave it behind)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        database_error = isinstance(exception, OperationalError | InterfaceError)
        if _is_disk_full(exception):
            outage = DISK_FULL
        elif database_error:
            outage = DATABASE_UNAVAILABLE
        else:
            return None
        if database_error:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close_if_unusable_or_obsolete()
        # The exception's text can quote the statement and its parameters: only its type.
        logger.warning("%s: %s", outage.code.replace("_", " "), type(exception).__name__)
        request_id = request_id_of(request)
        response: HttpResponse
        if request.path.startswith("/v1/"):
            response = JsonResponse(
                error_body(outage.code, outage.message, requestId=request_id), status=503
            )
        else:
            html = loader.get_template(outage.template).render({"request_id": request_id})
            response = HttpResponse(html, status=503)
        response["Retry-After"] = str(outage.retry_after)
        return response
