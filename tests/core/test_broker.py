"""The embedded broker (``filesystem://``, what `make run` uses) with a full disk behind
it: a task file left empty or cut short is set aside and named in the worker's log, and
the worker goes on to the next task instead of dying on it."""

from __future__ import annotations

from pathlib import Path

import pytest
from celery import current_app

from core.models import WorkerHeartbeat
from tests.memory.celery_workers import Broker, Worker, publishing_to, wait_until

pytestmark = pytest.mark.django_db(transaction=True)

# What a task file holds is a task's arguments: never to be logged.
CONTENT = b'{"body": "eyJjb252ZXJzYXRpb25JZCI6ICJkYW5hQGV4YW1wbGUuY29tIn0=", "headers": {'


def _folders(var_dir: Path) -> dict[str, Path]:
    """The folders config/settings/base.py makes under MEMDESK_VAR_DIR/broker."""
    return {name: var_dir / "broker" / name for name in ("queue", "processed", "control")}


@pytest.fixture
def worker_on_files(tmp_path):
    """Start a worker on the filesystem broker under ``tmp_path`` (not Redis, even
    where a test Redis answers); stopped when the test ends."""
    started: list[Worker] = []

    def start(broker: Broker) -> Worker:
        started.append(Worker("w1", broker, {"CELERY_BROKER_URL": "filesystem://"}))
        return started[-1]

    yield start
    for worker in started:
        worker.stop()


def test_the_worker_sets_a_broken_task_file_aside_and_runs_the_next_task(tmp_path, worker_on_files):
    broker = Broker(tmp_path)
    folders = _folders(tmp_path)
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    # Older than any task sent below (kombu names files by a clock, and reads them in
    # order): what the publisher left when the disk filled up, and a file cut short.
    empty = f"0000000001_0a1b2c3d-empty.{broker.queue}.msg"
    cut_short = f"0000000002_4e5f6a7b-cut.{broker.queue}.msg"
    (folders["queue"] / empty).write_bytes(b"")
    (folders["queue"] / cut_short).write_bytes(CONTENT)

    worker = worker_on_files(broker)
    wait_until(
        lambda: WorkerHeartbeat.objects.exists(), timeout=60, what="the worker", logs=[worker]
    )
    # The worker has read both files by now or will read them before this task.
    WorkerHeartbeat.objects.all().delete()
    options = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
        "store_processed": False,
    }
    with publishing_to("filesystem://", options, broker.queue):
        current_app.send_task("core.tasks.worker_heartbeat")

    wait_until(
        lambda: WorkerHeartbeat.objects.exists(),
        timeout=60,
        what="the task sent after the broken files to run",
        logs=[worker],
    )
    assert worker.process.poll() is None  # still the same worker process
    broken = tmp_path / "broker" / "broken"
    assert sorted(path.name for path in broken.iterdir()) == [empty, cut_short]
    assert (broken / cut_short).read_bytes() == CONTENT  # kept as it was, to look at
    assert not list(folders["queue"].iterdir())
    log = worker.log()
    assert empty in log and cut_short in log
    assert "eyJjb252ZXJz" not in log and "JSONDecodeError" not in log
