"""The routes of the URL configuration and the methods their views answer, for the tests
that walk every route (audit coverage, workspace isolation, CSRF)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from django.urls import URLPattern, URLResolver

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def allowed_methods(view: Callable[..., Any]) -> set[str]:
    """The HTTP methods a view answers: a class-based view's handlers, or the list a
    ``require_http_methods`` decorator (``require_POST``...) closes over; a function
    view that declares neither answers every method."""
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        return {m.upper() for m in view_class.http_method_names if hasattr(view_class, m)}
    wrapped: Any = view
    while wrapped is not None:
        for cell in wrapped.__closure__ or ():
            value = cell.cell_contents
            if (
                isinstance(value, list | tuple)
                and value
                and all(isinstance(m, str) and m.isupper() for m in value)
            ):
                return set(value)
        wrapped = getattr(wrapped, "__wrapped__", None)
    return {"GET", "HEAD", "OPTIONS", *WRITE_METHODS}


def url_patterns(patterns: list[Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace == "admin":
                continue  # tests/governance/test_audit_coverage.py walks it, model by model
            yield from url_patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry.callback
