"""Query strings no view has to defend against one by one."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request

from core.errors import error_body


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
