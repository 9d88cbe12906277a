"""What the agent is served for a conversation, as its context page shows it."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from core.errors import MemdeskError
from dashboard.access import get_conversation_for_user
from dashboard.rendering import INVALID, render_page
from dashboard.selectors.context import conversation_recall, served_context
from dashboard.selectors.pins import masked_pins
from memory import selectors as memory_selectors
from memory.context.budget import parse_max_tokens
from memory.models import Message

UNOBSERVED_LISTED = 300  # links on the context page; the count says how many in all


@require_GET
@login_required
def conversation_context(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """What the agent is served: the context ``GET /v1/conversations/{id}/context``
    returns (the same selector and choices), masked as the conversation page masks."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    raw_budget = request.GET.get("max_tokens", "").strip()
    error = ""
    try:
        max_tokens = parse_max_tokens(raw_budget)
    except MemdeskError as failure:
        error, max_tokens = failure.message, None
    served = served_context(conversation=conversation, max_tokens=max_tokens)
    unobserved = list(
        memory_selectors.unobserved_messages(conversation=conversation).values_list(
            "seq", "token_count"
        )
    )
    context = {
        "conversation": conversation,
        "served": served,
        "unobserved_shown": unobserved[:UNOBSERVED_LISTED],
        "max_tokens": max_tokens,
        "raw_budget": raw_budget,
        "budget_error": error,
        "pins": masked_pins(conversation=conversation),
        "unobserved": unobserved,
        "unobserved_tokens": sum(tokens for _, tokens in unobserved),
        "recall": conversation_recall(conversation=conversation),
        "served_seqs": set(
            Message.objects.filter(pk__in=served.budget.recent_message_ids).values_list(
                "seq", flat=True
            )
        ),
    }
    response = render_page(
        request,
        "dashboard/conversation_context.html",
        access,
        context,
        status=INVALID if error else 200,
    )
    response["Cache-Control"] = "private, no-store"
    return response
