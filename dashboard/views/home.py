"""The landing page: the conversation list once signed in; for visitors, what this
Memdesk holds (counts only)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from memory.models import Conversation, Message
from tenancy.models import Workspace


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("dashboard:conversation_list")
    return render(
        request,
        "memory/home.html",
        {
            "workspaces": Workspace.objects.count(),
            "conversations": Conversation.objects.count(),
            "messages": Message.objects.count(),
        },
    )
