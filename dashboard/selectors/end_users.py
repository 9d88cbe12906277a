"""One end user's conversations and the memory served from them, a window of each."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import F, QuerySet

from dashboard.selectors.conversations import ConversationFilters, add_figures, conversation_search
from governance.redaction.masking import mask_pins
from memory.models import Observation, Pin, Reflection
from tenancy.models import Workspace

# Each list shows a window this long; the next comes with its "more" link.
END_USER_CONVERSATIONS = 25
END_USER_MEMORY_WINDOW = 20


def _window(rows: QuerySet[Any], per_page: int, number: str | None) -> tuple[Page, list[Any]]:
    """Page ``number`` of ``rows`` (the first for a missing or bad number, the last past
    the end) and its rows, read: a count and one window, whatever the user holds."""
    page = Paginator(rows, per_page).get_page(number)
    page.object_list = shown = list(page.object_list)
    return page, shown


def end_user_conversations(*, workspace: Workspace, end_user: str, page: str | None) -> Page:
    """The end user's conversations in a workspace with their figures, the most
    recently active first."""
    rows = conversation_search(workspace=workspace, filters=ConversationFilters(end_user=end_user))
    window, shown = _window(rows, END_USER_CONVERSATIONS, page)
    add_figures(shown)
    return window


def _scope(workspace: Workspace, end_user: str) -> dict[str, Any]:
    return {"conversation__workspace": workspace, "conversation__user_id": end_user}


def end_user_observations(*, workspace: Workspace, end_user: str, page: str | None) -> Page:
    """Their active observations, newest first."""
    rows = (
        Observation.objects.filter(status=Observation.Status.ACTIVE, **_scope(workspace, end_user))
        .select_related("conversation")
        .order_by("-observed_at", "-created_at", "-id")
    )
    return _window(rows, END_USER_MEMORY_WINDOW, page)[0]


def end_user_reflections(*, workspace: Workspace, end_user: str, page: str | None) -> Page:
    """Their active reflections, newest first."""
    rows = (
        Reflection.objects.filter(status=Reflection.Status.ACTIVE, **_scope(workspace, end_user))
        .select_related("conversation")
        .order_by("-observed_at", "-created_at", "-id")
    )
    return _window(rows, END_USER_MEMORY_WINDOW, page)[0]


def end_user_pins(*, workspace: Workspace, end_user: str, page: str | None) -> Page:
    """Their pins, newest first, masked as ``mask_pins`` masks."""
    rows = (
        Pin.objects.filter(**_scope(workspace, end_user))
        .annotate(message_seq=F("message__seq"))
        .select_related("conversation")
        .order_by("-created_at", "-id")
    )
    window, shown = _window(rows, END_USER_MEMORY_WINDOW, page)
    mask_pins(pins=shown)
    return window
