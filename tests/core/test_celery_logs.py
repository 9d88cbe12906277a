"""Under LOG_FORMAT=json every line a Celery worker or beat writes is a JSON object: the
Procfile's commands, from start to a SIGTERM, Celery's own lines included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from celery import current_app

from core.models import WorkerHeartbeat
from tests.memory.celery_workers import ROOT, Broker, wait_until, worker_command

pytestmark = pytest.mark.django_db(transaction=True)


def _json_object(line: str) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


class _Process:
    """``celery -A config ARGS`` with LOG_FORMAT=json, in a test worker's environment
    (the test's broker and database), its output in ``var_dir / log_name``; stopped with
    SIGTERM to its main process only, as systemd's ``KillMode=mixed`` and ``docker stop``
    do."""

    def __init__(self, broker: Broker, log_name: str, *args: str) -> None:
        self.log_path = broker.var_dir / log_name
        _, env = worker_command(log_name, broker, {"LOG_FORMAT": "json"})
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", *args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def lines(self) -> list[str]:
        return [line for line in self.log().split("\n") if line.strip()]


def test_every_line_of_a_worker_is_json_under_log_format_json(tmp_path: Path, broker: Broker):
    worker = _Process(
        broker,
        "worker.log",
        *("worker", "--loglevel", "INFO", "--concurrency", "1", "--queues", broker.queue),
        *("--hostname", "json@test", "--without-mingle", "--without-gossip"),
    )
    try:
        started = wait_until(
            lambda: WorkerHeartbeat.objects.filter(hostname="json@test").first(),
            timeout=60,
            what="the worker's heartbeat at start",
            logs=[worker],
        )
        current_app.send_task("core.tasks.worker_heartbeat", queue=broker.queue)
        wait_until(
            lambda: WorkerHeartbeat.objects.filter(seen_at__gt=started.seen_at).exists(),
            timeout=60,
            what="the heartbeat task",
            logs=[worker],
        )
        wait_until(lambda: "succeeded" in worker.log(), timeout=30, what="its log line")
    finally:
        worker.stop()
    lines = worker.lines()

    assert [line for line in lines if _json_object(line) is None] == []
    entries = [json.loads(line) for line in lines]
    messages = [entry["message"] for entry in entries]
    assert "json@test ready." in messages
    assert any("core.tasks.worker_heartbeat" in m and "succeeded" in m for m in messages)
    assert all(
        {"time", "level", "logger", "request_id", "message"} == set(entry) for entry in entries
    )


def test_every_line_of_beat_is_json_under_log_format_json(tmp_path: Path, broker: Broker):
    beat = _Process(
        broker,
        "beat.log",
        *("beat", "--loglevel", "INFO", "--schedule", str(tmp_path / "celerybeat-schedule")),
    )
    try:
        wait_until(lambda: "Starting" in beat.log(), timeout=60, what="beat", logs=[beat])
    finally:
        beat.stop()
    lines = beat.lines()

    assert [line for line in lines if _json_object(line) is None] == []
    assert any(json.loads(line)["logger"].startswith("celery.beat") for line in lines)
