"""``/readyz``: 200 only when the database answers, the broker takes connections, a
worker and a scanner were alive lately and the PII engine is loaded or installed; each
check says why."""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta

import pytest
from celery import Celery
from django.test import override_settings
from django.utils import timezone

from config.settings.base import broker_transport_options
from core import readiness
from core.models import WorkerHeartbeat
from core.tasks import worker_heartbeat
from governance.redaction import presidio

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def worker_alive(db):
    worker_heartbeat.apply()


def test_ready_when_everything_answers(client, worker_alive):
    response = client.get("/readyz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok",
        "broker": "ok",
        "worker": "ok",
        "scanner": "ok",
        "disk": "ok",
        "piiModel": "ok",
    }
    assert body["checks"]["piiModel"]["model"] in ("loaded", "loadable")
    assert client.get("/healthz").status_code == 200  # liveness is another question


def test_not_ready_before_any_worker_was_seen(client, db):
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["worker"] == {
        "status": "unavailable",
        "lastSeenSecondsAgo": None,
    }


def test_not_ready_when_the_last_heartbeat_is_old(client, worker_alive):
    WorkerHeartbeat.objects.update(seen_at=timezone.now() - timedelta(minutes=10))
    response = client.get("/readyz")
    assert response.status_code == 503
    worker = response.json()["checks"]["worker"]
    assert worker["status"] == "unavailable" and worker["lastSeenSecondsAgo"] >= 600


@override_settings(CELERY_BROKER_URL=DEAD_REDIS)
def test_not_ready_when_the_broker_is_down(client, worker_alive, monkeypatch):
    app = Celery("memdesk-readyz", broker=DEAD_REDIS, set_as_current=False)
    app.conf.broker_transport_options = broker_transport_options(DEAD_REDIS, 1)
    app.conf.broker_connection_timeout = 1
    monkeypatch.setattr(readiness, "current_app", app)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"] == {"status": "unavailable", "embedded": False}
    assert response.json()["checks"]["database"]["status"] == "ok"


def test_not_ready_when_the_database_is_down(client, worker_alive, monkeypatch):
    class Down:
        vendor = "postgresql"

        def cursor(self):
            raise ConnectionError("server closed the connection")

    monkeypatch.setattr(readiness, "connection", Down())
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == {
        "status": "unavailable",
        "vendor": "postgresql",
    }


def test_not_ready_when_free_disk_under_the_data_directory_is_below_the_minimum(
    client, worker_alive, settings, caplog, monkeypatch
):
    monkeypatch.setattr(readiness, "_last_unready", frozenset())
    free_mb = shutil.disk_usage(settings.VAR_DIR).free // 2**20
    settings.MEMDESK_MIN_FREE_DISK_MB = free_mb + 10_000

    with caplog.at_level(logging.WARNING):
        response = client.get("/readyz")

    assert response.status_code == 503
    disk = response.json()["checks"]["disk"]
    assert disk["status"] == "low"
    assert disk["minimumMb"] == free_mb + 10_000 and 0 <= disk["freeMb"] < disk["minimumMb"]
    assert response.json()["checks"]["database"]["status"] == "ok"
    assert [r.getMessage() for r in caplog.records if r.name == "core.readiness"] == [
        "readiness: not ready (disk)"
    ]

    settings.MEMDESK_MIN_FREE_DISK_MB = 0
    assert client.get("/readyz").status_code == 200


@override_settings(MEMDESK_REDACTION_SPACY_MODEL="no_such_spacy_pipeline")
def test_not_ready_when_the_pii_model_is_not_installed(client, worker_alive, monkeypatch):
    monkeypatch.setattr(presidio, "_engine", None)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["piiModel"] == {"status": "unavailable", "model": "missing"}


def test_a_heartbeat_replaces_the_workers_row_and_forgets_old_workers(db):
    WorkerHeartbeat.objects.create(hostname="gone@old", seen_at=timezone.now() - timedelta(days=2))
    readiness.worker_heartbeat_record(hostname="celery@a")
    readiness.worker_heartbeat_record(hostname="celery@a")
    assert list(WorkerHeartbeat.objects.values_list("hostname", flat=True)) == ["celery@a"]


def test_a_probe_while_not_ready_logs_a_change_once_and_no_error(client, db, caplog, monkeypatch):
    # No worker was ever seen: every probe answers 503, as a load balancer polls.
    monkeypatch.setattr(readiness, "_last_unready", frozenset())
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            assert client.get("/readyz").status_code == 503

    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == ["readiness: not ready (scanner, worker)"]
    assert not [r for r in caplog.records if r.name == "django.request"]

    readiness.worker_heartbeat_record(hostname="celery@web-1")
    with caplog.at_level(logging.INFO):
        assert client.get("/readyz").status_code == 200
    assert caplog.records[-1].getMessage() == "readiness: ready again"


def test_not_ready_while_no_worker_reads_the_scans_queue(client, db, settings):
    # The Procfile's worker reads the default and governance queues; the scanner died.
    readiness.worker_heartbeat_record(hostname="worker@a", queues=["celery", "governance"])
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["worker"]["status"] == "ok"
    assert checks["scanner"] == {"status": "unavailable", "lastSeenSecondsAgo": None}

    readiness.worker_heartbeat_record(hostname="scanner@a", queues=[settings.MEMDESK_SCAN_QUEUE])
    assert client.get("/readyz").status_code == 200

    # A scanner alone does not make the worker alive.
    WorkerHeartbeat.objects.filter(hostname="worker@a").update(
        seen_at=timezone.now() - timedelta(minutes=10)
    )
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["worker"]["status"] == "unavailable"
