"""Does a slow model slow down the agent's writes? It must not: a write stores the
messages and returns; the Observer runs later, in a Celery worker.

Two runs on gunicorn + PostgreSQL, the same writes in the same order:
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
             "--without-gossip"],
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


def drive(port: int, key: str, writes: int) -> list[float]:
    """Create the conversations, then append one message at a time, round robin; return
    each append's latency in milliseconds."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conversations = [
        _request(conn, "POST", "/v1/conversations", key, {"userId": f"u{n}"})["id"]
        for n in range(CONVERSATIONS)
    ]
    messages = [m for seed in range(writes // 10 + 1) for m in message_batch(seed, 10)]
    latencies = []
    for n in range(writes):
        path = f"/v1/conversations/{conversations[n % CONVERSATIONS]}/messages"
        started = time.perf_counter()
        _request(conn, "POST", path, key, messages[n])
        latencies.append((time.perf_counter() - started) * 1000)
    conn.close()
    return latencies


def run_phase(label: str, writes: int, **env_extra: str) -> tuple[list[float], dict[str, int]]:
    with scratch_dir() as var_dir, fresh_database("memdesk_bench_write") as db_url:
        env = django_env(db_url, var_dir, **env_extra)
        key = prepare_database(env)
        pipeline_on = env_extra.get("MEMDESK_PIPELINE_ENABLED") != "0"
        with gunicorn(env, workers=2) as server:
            if pipeline_on:
                with celery_worker(env):
                    drive(server.port, key, 40)  # warm-up, and the first runs start
                    latencies = drive(server.port, key, writes)
                    time.sleep(1)
            else:
                drive(server.port, key, 40)
                latencies = drive(server.port, key, writes)
        with psycopg.connect(db_url) as conn:
            rows = conn.execute(
                "SELECT status, count(*) FROM memory_observerrun GROUP BY status"
            ).fetchall()
        say(f"{label}: {writes} writes done")
        return latencies, {status: count for status, count in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    stop_on_sigterm()
    say(machine_line())
    off, off_runs = run_phase("pipeline off", args.writes, MEMDESK_PIPELINE_ENABLED="0")
    with slow_model() as base_url:
        on, on_runs = run_phase(
            "pipeline on",
            args.writes,
            MEMDESK_ENGINE="openai",
            OPENAI_BASE_URL=base_url,
            MEMDESK_OPENAI_MAX_RETRIES="0",
            MEMDESK_OBSERVER_THRESHOLD="300",
            CELERY_BROKER_URL=REDIS_BROKER,
        )
    rows = []
    for label, values in (("off", sorted(off)), ("on, 5 s model", sorted(on))):
        rows.append(
            [label]
            + [f"{percentile(values, q):.2f}" for q in (0.5, 0.95, 0.99)]
            + [f"{sum(values) / len(values):.2f}"]
        )
    ratio = [percentile(sorted(on), q) / percentile(sorted(off), q) for q in (0.5, 0.95, 0.99)]
    rows.append(["ratio on/off"] + [f"{r:.2f}x" for r in ratio] + [""])
    say()
    say(table(["write latency (ms)", "p50", "p95", "p99", "mean"], rows))
    say()
    say(f"observer runs with the pipeline on: {on_runs or 'none'} (off: {off_runs or 'none'})")
    verdict = "met" if ratio[0] <= 1.2 else "NOT met"
    say(f"target p50 ratio <= 1.2x: {verdict} ({ratio[0]:.2f}x)")


if __name__ == "__main__":
    main()
