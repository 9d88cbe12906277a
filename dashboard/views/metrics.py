"""The pipeline's metrics, for the workspace or one conversation."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from dashboard.access import access_for, get_conversation_for_user
from dashboard.rendering import is_partial, render_page
from dashboard.selectors.conversations import ConversationFilters, conversation_search
from dashboard.selectors.metrics import metrics_for_charts
from tenancy.models import Capability


@require_GET
@login_required
def metrics(request: HttpRequest) -> HttpResponse:
    conversation = None
    conversation_id = request.GET.get("conversation", "")
    if conversation_id:
        access, conversation = get_conversation_for_user(request, conversation_id)
    else:
        access = access_for(request, Capability.VIEW_MEMORY)
    context: dict[str, Any] = {
        "conversation": conversation,
        "metrics": metrics_for_charts(workspace=access.workspace, conversation=conversation),
    }
    template = "dashboard/metrics.html"
    if is_partial(request):
        return render_page(request, f"{template}#charts", access, context)
    context["recent"] = conversation_search(
        workspace=access.workspace, filters=ConversationFilters()
    ).only("pk", "title", "title_masked", "user_id")[:50]
    return render_page(request, template, access, context)
