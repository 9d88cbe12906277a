"""The health check, and the landing page that visitors who are not signed in see."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memory.models import Conversation, Message, Workspace


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        database = "ok"
    except Exception:  # noqa: BLE001 - health must answer whatever the failure
        database = "unavailable"
    status = 200 if database == "ok" else 503
    return JsonResponse(
        {
            "status": "ok" if status == 200 else "degraded",
            "database": database,
            "databaseVendor": connection.vendor,
        },
        status=status,
    )


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
