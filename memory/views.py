"""The landing page that visitors who are not signed in see (the dashboard's home view
answers with it). It stays here rather than in the dashboard because it counts memory's
own rows; /healthz and /readyz are core's (core/health.py)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memory.models import Conversation, Message
from tenancy.models import Workspace


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "memory/home.html",
        {
            "workspaces": Workspace.objects.count(),
            "conversations": Conversation.objects.count(),
            "messages": Message.objects.count(),
        },
    )
