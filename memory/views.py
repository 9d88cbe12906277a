"""The health checks, and the landing page that visitors who are not signed in see."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from core import readiness
from governance.gates import redaction_engine_status
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
def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness, for a load balancer or an orchestrator: 200 when this process can serve
    and the pipeline behind it runs (the database answers, the broker takes
    connections, a worker was alive lately, the PII engine is loaded or installed),
    503 otherwise. Each check says its status; ``/healthz`` stays the liveness check."""
    pii = redaction_engine_status()
    checks: dict[str, dict[str, object]] = {
        "database": readiness.database_check(),
        "broker": readiness.broker_check(),
        "worker": readiness.worker_check(),
        "piiModel": {"status": "ok" if pii != "missing" else "unavailable", "model": pii},
    }
    unready = frozenset(name for name, check in checks.items() if check["status"] != "ok")
    readiness.readiness_log(unready)
    response = JsonResponse(
        {"status": "not_ready" if unready else "ready", "checks": checks},
        status=503 if unready else 200,
    )
    # An expected answer, logged above when it changes: not an ERROR line per probe from
    # django.request.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


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
