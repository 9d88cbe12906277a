"""URLs and query strings no view has to defend against one by one."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request

from core.errors import error_body

# The longest path and query string a request may have, in bytes as sent: a context
# question of 1,000 characters percent-encoded is up to 12,000. gunicorn lets longer lines
# through (config/gunicorn.py) so that this answer, not its HTML page, is what a client
# reads.
MAX_URL_BYTES = 16 * 1024


class RejectLongUrlMiddleware:
    """A path and query string over ``MAX_URL_BYTES`` is refused with a 414 before any
    view runs: JSON under /v1/, as every API error."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = len(request.META.get("PATH_INFO", "")) + len(request.META.get("QUERY_STRING", ""))
        if length <= MAX_URL_BYTES:
            return self.get_response(request)
        message = f"The URL is {length} bytes long; the limit is {MAX_URL_BYTES}."
        if request.path.startswith("/v1/"):
            return JsonResponse(error_body("uri_too_long", message), status=414)
        return HttpResponse(message, status=414, content_type="text/plain; charset=utf-8")


class RejectNulQueryMiddleware:
    """A NUL character (``%00``) in a query parameter is refused with a 400 before any
    view runs: no stored text can contain one, SQLite would search for it and
    PostgreSQL fails the whole query on it (a 500). The answer names the parameter,
    never its value."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                return self._refuse(request, name)
        return self.get_response(request)

    @staticmethod
    def _refuse(request: HttpRequest, name: str) -> HttpResponse:
        field = name.replace("\x00", "")
        message = f"The query parameter {field!r} contains a NUL character (%00)."
        if request.path.startswith("/v1/"):
            return JsonResponse(error_body("invalid_query", message, field=field), status=400)
        return bad_request(request, Exception(message))
