"""``/healthz`` (liveness) and ``/readyz`` (readiness).

Core checks what every app shares (core/readiness.py: the database, the broker, a
worker's heartbeat, free disk for the data directory); a check that belongs to an app
is registered by that app with ``readiness_check_register``, so that core imports no
app.

Written here rather than on django-health-check, whose view answers 500 (not 503) with
``{"<check's repr>": "OK" or the error's text}``, or HTML unless the client asks for
JSON: a check can say only "ok" or raise, so the details an operator reads here
(``lastSeenSecondsAgo``, the database vendor, the PII model's state) and the
``status``/``checks`` body the probes read would need its view and every check
overridden. Its view is async too, running the database checks on executor threads.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from core import readiness

ReadinessCheck = Callable[[], dict[str, object]]

_app_checks: dict[str, ReadinessCheck] = {}


def readiness_check_register(name: str, check: ReadinessCheck) -> None:
    """Have ``/readyz`` run ``check`` and report it under ``name``. A check answers a
    dict with a ``status`` ("ok" or another word, which makes the process not ready) and
    whatever else tells an operator why; it never raises."""
    _app_checks[name] = check


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
    connections, a worker and a scanner were alive lately, the data directory's disk has
    MEMDESK_MIN_FREE_DISK_MB free, and every check an app registered passes: the PII
    engine is loaded or installed), 503 otherwise. Each check says its status;
    ``/healthz`` stays the liveness check."""
    checks: dict[str, dict[str, object]] = {
        "database": readiness.database_check(),
        "broker": readiness.broker_check(),
        "worker": readiness.worker_check(),
        "scanner": readiness.scanner_check(),
        "disk": readiness.disk_check(),
    }
    checks.update((name, check()) for name, check in _app_checks.items())
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
