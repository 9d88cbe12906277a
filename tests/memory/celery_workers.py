"""Real Celery workers for tests: separate processes on a real broker (Redis when it
answers, as in CI; the filesystem transport otherwise), sharing the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import kombu.pools
import redis
from django.conf import settings
from django.db import connection

from config.celery import app as celery_app

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/13"


def redis_available() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


def test_database_url() -> str:
    """The URL of the database this test runs on (pytest-django's test database)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or "postgres"
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


class Broker:
    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir
        # A queue of its own, so that test runs sharing one Redis never take each
        # other's messages.
        self.queue = f"memdesk-test-{uuid.uuid4().hex[:12]}"
        # The scan's and governance's queues of config/settings/base.py, this run's own.
        self.scan_queue = f"{self.queue}-scan"
        self.governance_queue = f"{self.queue}-governance"
        if redis_available():
            self.url = REDIS_URL
            self.transport_options: dict[str, Any] = {}
        else:
            self.url = "filesystem://"
            folders = {
                name: var_dir / "broker" / name for name in ("queue", "processed", "control")
            }
            for folder in folders.values():
                folder.mkdir(parents=True, exist_ok=True)
            self.transport_options = {
                "data_folder_in": str(folders["queue"]),
                "data_folder_out": str(folders["queue"]),
                "processed_folder": str(folders["processed"]),
                "control_folder": str(folders["control"]),
                "store_processed": False,
            }

    @property
    def queues(self) -> tuple[str, str, str]:
        return (self.queue, self.scan_queue, self.governance_queue)

    @property
    def routes(self) -> dict[str, dict[str, str]]:
        """The settings' task routes, to this run's queues."""
        return {
            **{name: {"queue": self.scan_queue} for name in settings.SCAN_TASKS},
            **{name: {"queue": self.governance_queue} for name in settings.GOVERNANCE_TASKS},
        }

    def pending_messages(self) -> int:
        if self.url.startswith("redis"):
            client = redis.Redis.from_url(REDIS_URL)
            return sum(int(client.llen(queue)) for queue in self.queues)
        return len(list((self.var_dir / "broker" / "queue").iterdir()))


@contextmanager
def publishing_to(
    url: str,
    transport_options: dict[str, Any] | None = None,
    queue: str = "celery",
    routes: dict[str, dict[str, str]] | None = None,
) -> Iterator[None]:
    """Point this (the test) process's Celery app at a broker, its default queue and
    the routes of the other queues (none: every task to ``queue``), and back."""
    saved = (
        celery_app.conf.broker_url,
        celery_app.conf.broker_transport_options,
        celery_app.conf.task_default_queue,
        celery_app.conf.task_routes,
    )

    def switch(
        new_url: str, options: dict[str, Any], new_queue: str, new_routes: dict | None
    ) -> None:
        # Connection and producer pools are built from the URL once, and kombu keeps
        # producer pools in a process-wide registry: drop all of them.
        if celery_app._pool is not None:
            celery_app._pool.force_close_all()
        celery_app._pool = None
        celery_app.amqp._producer_pool = None
        kombu.pools.reset()
        celery_app.conf.broker_url = new_url
        celery_app.conf.broker_transport_options = options
        celery_app.conf.task_default_queue = new_queue
        celery_app.conf.task_routes = new_routes or {}
        celery_app.amqp.__dict__.pop("queues", None)  # cached from the old default queue
        celery_app.amqp.__dict__.pop("router", None)
        celery_app.amqp.flush_routes()  # the route table is kept from its first use

    switch(url, transport_options or {}, queue, routes)
    try:
        yield
    finally:
        switch(*saved)


def worker_command(
    name: str, broker: Broker, env: dict[str, str], queues: tuple[str, ...] = ()
) -> tuple[list[str], dict]:
    """The command line and environment of a test worker on ``queues`` (all the
    broker's queues unless told), routing what it sends to the broker's queues."""
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "DATABASE_URL": test_database_url(),
        "CELERY_BROKER_URL": broker.url,
        "MEMDESK_VAR_DIR": str(broker.var_dir),
        "MEMDESK_SCAN_QUEUE": broker.scan_queue,
        "MEMDESK_GOVERNANCE_QUEUE": broker.governance_queue,
        "SECRET_KEY": "test-worker",
        **env,
    }
    command = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "config",
        "worker",
        "--pool",
        "solo",
        "--loglevel",
        "INFO",
        "--hostname",
        f"{name}@test",
        "--queues",
        ",".join(queues or broker.queues),
        "--without-heartbeat",
        "--without-mingle",
        "--without-gossip",
    ]
    return command, full_env


class Worker:
    def __init__(
        self, name: str, broker: Broker, env: dict[str, str], queues: tuple[str, ...] = ()
    ) -> None:
        self.log_path = broker.var_dir / f"worker-{name}.log"
        command, full_env = worker_command(name, broker, env, queues)
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command,
                cwd=ROOT,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a kill takes all of it
            )

    def kill(self) -> None:
        """SIGKILL, as when a machine dies: no cleanup, no ack, no goodbye."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def wait_until(
    condition: Callable[[], Any], *, timeout: float, what: str, logs: list[Worker] = ()
) -> Any:
    """Poll until ``condition`` is true; on time-out, fail with the workers' logs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    details = "".join(f"\n--- {w.log_path.name} ---\n{w.log()[-3000:]}" for w in logs)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{details}")
