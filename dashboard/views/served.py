"""What the agent saw: a conversation's read ledger, and one read's body rendered again
and checked against the digest recorded when it was served."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from django.contrib.auth.decorators import login_required
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from core.errors import MemdeskError
from dashboard.access import get_conversation_for_user
from dashboard.rendering import INVALID, render_page
from dashboard.selectors.served import seen_again
from governance.selectors import context_read_at, context_read_get, context_reads_list

READS_LISTED = 50


def _instant(raw: str) -> datetime:
    """A time as the page's field sends it (``2026-12-06T14:02``, UTC) or in ISO 8601
    with its offset."""
    try:
        when = datetime.fromisoformat(raw)
    except ValueError:
        raise MemdeskError(
            "invalid_time", f"Give the time as 2026-12-06T14:02 (UTC); got {raw!r}.", field="at"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


@require_GET
@login_required
def conversation_served(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """The reads of a conversation, latest first; with ``read`` (a row) or ``at`` (a
    time: the latest read at or before it), that read's body rendered again, whether it
    is byte for byte what was served, and what memory serves differently since."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    raw_at = request.GET.get("at", "").strip()
    raw_read = request.GET.get("read", "").strip()
    error, read = "", None
    if raw_read:
        try:
            read = context_read_get(conversation=conversation, read_id=raw_read)
        except MemdeskError:
            raise Http404("No such read of this conversation.") from None
    elif raw_at:
        try:
            read = context_read_at(conversation=conversation, when=_instant(raw_at))
        except MemdeskError as failure:
            error = failure.message
        else:
            if read is None:
                error = "No context of this conversation was served at or before that time."
    try:
        reads, next_cursor = context_reads_list(
            conversation=conversation, cursor=request.GET.get("cursor") or None, limit=READS_LISTED
        )
    except MemdeskError:
        raise Http404("No such page of reads.") from None
    prefetch_related_objects(reads, "api_key")  # one query for the page's keys
    context = {
        "conversation": conversation,
        "reads": reads,
        "next_cursor": next_cursor,
        "seen": seen_again(conversation=conversation, read=read) if read is not None else None,
        "raw_at": raw_at,
        "at_error": error,
    }
    response = render_page(
        request,
        "dashboard/conversation_served.html",
        access,
        context,
        status=INVALID if error else 200,
    )
    response["Cache-Control"] = "private, no-store"
    return response
