"""Does a slow model slow down the agent's writes? It must not: a write stores the
messages and returns; the Observer runs later, in a Celery worker.

Two servers on gunicorn + PostgreSQL at the same time, the same writes alternating between
them (so that whatever else the machine does falls on both alike):
  off  MEMDESK_PIPELINE_ENABLED=0: messages are stored, nothing is ever scheduled;
  on   the `openai` engine against an OpenAI-compatible server (in this process) that
       takes 5 s per call, a low observer threshold so runs are scheduled all the time,
       Redis as the broker and a real Celery worker consuming the runs.
It prints write latency percentiles for both and the ratio on/off (target: at most 1.2x),
and how many runs the worker finished while the writes went on (proof it was busy).

Run: .venv/bin/python bench/write_latency.py [--writes 300]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from content import message_batch  # noqa: E402
from harness import (  # noqa: E402
    PYTHON,
    ROOT,
    django_env,
    fresh_database,
    gunicorn,
    machine_line,
    percentile,
    prepare_database,
    say,
    scratch_dir,
    stop_on_sigterm,
    table,
)

MODEL_SECONDS = 5.0
CONVERSATIONS = 20
REDIS_BROKER = "redis://127.0.0.1:6379/12"
NOTE = "- [medium] (unknown) User shared order details and asked about delivery {refs: 1}"


class SlowModel(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length", 0))
        self.rfile.read(length)
        time.sleep(MODEL_SECONDS)
        body = json.dumps(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "bench-model",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": NOTE},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # The worker may be stopped while it waits: then there is nobody to answer.
        with contextlib.suppress(BrokenPipeError):
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def slow_model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowModel)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def celery_worker(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    log = Path(env["MEMDESK_VAR_DIR"]) / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(PYTHON), "-m", "celery", "-A", "config", "worker", "--concurrency", "2",
             "--loglevel", "WARNING", "--without-heartbeat", "--without-mingle",
             "--without-gossip", "--queues", "celery,governance,scan"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        yield process
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)


def _request(conn: http.client.HTTPConnection, method: str, path: str, key: str, body=None):  # type: ignore[no-untyped-def]
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    conn.request(method, path, body=payload, headers=headers)
    response = conn.getresponse()
    data = response.read()
    if response.status >= 300:
        raise RuntimeError(f"{method} {path} -> {response.status}")
    return json.loads(data) if data else None


class Writer:
    """One server's conversations, written one message at a time, round robin."""

    def __init__(self, port: int, key: str) -> None:
        self.key = key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conversations = [
            _request(self.conn, "POST", "/v1/conversations", key, {"userId": f"u{n}"})["id"]
            for n in range(CONVERSATIONS)
        ]
        self.sent = 0
        self.latencies: list[float] = []

    def write(self, message: dict[str, str]) -> None:
        path = f"/v1/conversations/{self.conversations[self.sent % CONVERSATIONS]}/messages"
        started = time.perf_counter()
        _request(self.conn, "POST", path, self.key, message)
        self.latencies.append((time.perf_counter() - started) * 1000)
        self.sent += 1


def observer_runs(db_url: str) -> dict[str, int]:
    with psycopg.connect(db_url) as conn:
        rows = conn.execute("SELECT status, count(*) FROM memory_observerrun GROUP BY status")
        return {status: count for status, count in rows.fetchall()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=400)
    args = parser.parse_args()
    stop_on_sigterm()
    say(machine_line())
    messages = [m for seed in range(args.writes // 10 + 10) for m in message_batch(seed, 10)]
    with contextlib.ExitStack() as stack:
        base_url = stack.enter_context(slow_model())
        setups = {
            "off": {"MEMDESK_PIPELINE_ENABLED": "0"},
            "on": {
                "MEMDESK_ENGINE": "openai",
                "OPENAI_BASE_URL": base_url,
                "MEMDESK_OPENAI_MAX_RETRIES": "0",
                "MEMDESK_OBSERVER_THRESHOLD": "300",
                "CELERY_BROKER_URL": REDIS_BROKER,
            },
        }
        writers: dict[str, Writer] = {}
        databases: dict[str, str] = {}
        for label, extra in setups.items():
            var_dir = stack.enter_context(scratch_dir())
            databases[label] = stack.enter_context(fresh_database("memdesk_bench_write"))
            env = django_env(databases[label], var_dir, **extra)
            key = prepare_database(env)
            server = stack.enter_context(gunicorn(env, workers=2))
            if label == "on":
                stack.enter_context(celery_worker(env))
            writers[label] = Writer(server.port, key)
        # Warm-up, then the timed writes: alternating between the two servers (and which
        # goes first), so that whatever else the machine does falls on both alike.
        for n in range(40):
            for writer in writers.values():
                writer.write(messages[n])
        for writer in writers.values():
            writer.latencies.clear()
        for n in range(args.writes):
            order = ("off", "on") if n % 2 else ("on", "off")
            for label in order:
                writers[label].write(messages[40 + n])
        runs = {label: observer_runs(url) for label, url in databases.items()}
    off, on = sorted(writers["off"].latencies), sorted(writers["on"].latencies)
    rows = [
        [label]
        + [f"{percentile(v, q):.2f}" for q in (0.5, 0.95, 0.99)]
        + [f"{sum(v) / len(v):.2f}"]
        for label, v in (("off", off), ("on, 5 s model", on))
    ]
    ratio = [percentile(on, q) / percentile(off, q) for q in (0.5, 0.95, 0.99)]
    rows.append(["ratio on/off"] + [f"{r:.2f}x" for r in ratio] + [""])
    say()
    say(table(["write latency (ms)", "p50", "p95", "p99", "mean"], rows))
    say()
    say(
        f"observer runs with the pipeline on: {runs['on'] or 'none'} (off: {runs['off'] or 'none'})"
    )
    verdict = "met" if ratio[0] <= 1.2 else "NOT met"
    say(f"target p50 ratio <= 1.2x: {verdict} ({ratio[0]:.2f}x)")


if __name__ == "__main__":
    main()
