"""What every dashboard view does the same way: render a page or the partial htmx asked
for, re-render a refused form, link to a conversation, and read the small inputs that
are not worth a form (a reason, a number or an id in the query string)."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django_htmx.http import reswap, retarget

from core.paging import is_ascii_digits
from dashboard.access import Access
from memory.models import Conversation

INVALID = 422  # a form with errors or a refused action; htmx swaps it in (see base.html)


def is_partial(request: HttpRequest) -> bool:
    # A boosted request wants the whole page; a plain htmx request wants a fragment.
    htmx = getattr(request, "htmx", None)
    if not htmx:
        return False
    return not htmx.boosted


def render_page(
    request: HttpRequest,
    template: str,
    access: Access,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> HttpResponse:
    conversation = context.get("conversation")
    if conversation is not None:
        # Items build their links from this prefix: reversing eight URLs for each of a
        # hundred observations was a fifth of the conversation page's time.
        context["conversation_url"] = reverse(
            "dashboard:conversation_detail", args=[conversation.pk]
        )
    return render(request, template, {"access": access, **context}, status=status)


def invalid_form(
    request: HttpRequest,
    access: Access,
    template: str,
    context: dict[str, Any],
    *,
    panel: str | None,
    partial: str = "form",
) -> HttpResponse:
    """Re-render a form with its errors (422). An htmx form that targets the item is
    pointed back at the panel it came from, so the errors appear under its fields."""
    if not is_partial(request):
        return render_page(request, template, access, context, status=INVALID)
    response = render_page(request, f"{template}#{partial}", access, context, status=INVALID)
    if panel:
        retarget(response, panel)
        reswap(response, "innerHTML")
    return response


def conversation_url(conversation: Conversation, **params: object) -> str:
    """The conversation page, with ``params`` that are set in its query string."""
    url = reverse("dashboard:conversation_detail", args=[conversation.pk])
    query = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{url}?{urlencode(query)}" if query else url


def posted_reason(request: HttpRequest) -> str:
    """The reason a one-button form (release, approve, dismiss) posts, trimmed: whole,
    for the service to check (``require_reason`` refuses one too long, never cuts it)."""
    return request.POST.get("reason", "").strip()


# A sequence number or offset past what a 64-bit column holds is no row: SQLite and
# PostgreSQL refuse to compare with it rather than find nothing.
INT_PARAM_MAX = 2**63 - 1


def int_param(request: HttpRequest, name: str) -> int | None:
    """A whole number from the query string; None when it is missing or not one."""
    raw = request.GET.get(name, "")
    if not is_ascii_digits(raw) or len(raw) > 19:
        return None
    value = int(raw)
    return value if value <= INT_PARAM_MAX else None


def uuid_param(request: HttpRequest, name: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(request.GET.get(name, ""))
    except ValueError:
        return None
