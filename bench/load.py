"""Mixed load: agents writing messages in bulk while others read the served context of the
same 16 conversations, against gunicorn from the Procfile (2 sync workers) and a Celery
worker (concurrency 2) on PostgreSQL with Redis as broker and cache; beside it, /healthz
and a quiet cached context read at the same concurrency as the baselines.

    .venv/bin/python bench/load.py                         # 60 s, observer on, then off
    .venv/bin/python bench/load.py --seconds 600           # the issue's 10-minute run
    .venv/bin/python bench/load.py --observer on --seconds 30

Targets (production issue), on a 2-core machine: >= 1,000 context reads/s and >= 2,000
messages/s together, read p99 < 100 ms; a cached context read within 2x of /healthz
throughput; no growth in worker memory.

Method. A fresh database (migrated) gets one workspace and 16 conversations of 200
messages each. 32 client processes, each on one keep-alive connection: ``--writers``
post ``--bulk`` messages per request to a random conversation, together offering
``--offered`` messages/s (paced; a writer that falls behind just sends back to back),
and the rest GET ``/v1/conversations/{id}/context`` of a random one, back to back. The
observer runs in the Celery worker (on) or not at all (``MEMDESK_PIPELINE_ENABLED=0``,
off). RSS of the gunicorn and Celery processes is sampled every second.

Creates a database named bench_load_<timestamp> and drops it at the end; uses Redis
database ``--redis-db`` (flushed before each phase). Prints counts and timings only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import random
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import harness

CONVERSATIONS = 16
SEED_MESSAGES = 200
CLIENTS = 32
TARGET_READS = 1000.0
TARGET_MESSAGES = 2000.0
TARGET_READ_P99_MS = 100.0
WORDS = [
    "order",
    "refund",
    "parcel",
    "invoice",
    "Tuesday",
    "Berlin",
    "office",
    "delivery",
    "account",
    "password",
    "email",
    "subscription",
    "upgrade",
    "cancel",
    "address",
    "phone",
    "warranty",
    "damaged",
    "replacement",
    "tracking",
]


# --- clients (separate processes) ----------------------------------------------------------------


def _text(rng: random.Random) -> str:
    return "Customer says: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24)))


def client(
    kind: str,
    port: int,
    headers: dict[str, str],
    conversations: list[str],
    seconds: float,
    bulk: int,
    pace: float,
    ready: Any,
    out: Any,
) -> None:
    """Requests of one kind until ``seconds`` pass; reports (route, latencies, errors,
    messages written)."""
    harness.client_process_signals()
    rng = random.Random(os.getpid())
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    latencies: list[float] = []
    errors = written = 0
    ready.wait()
    started = time.perf_counter()
    next_at = started
    while (now := time.perf_counter()) - started < seconds:
        conversation = rng.choice(conversations)
        try:
            if kind == "write":
                if pace and now < next_at:
                    time.sleep(next_at - now)
                next_at += pace
                body = json.dumps(
                    {"messages": [{"role": "user", "content": _text(rng)} for _ in range(bulk)]}
                )
                sent = time.perf_counter()
                connection.request(
                    "POST",
                    f"/v1/conversations/{conversation}/messages/bulk",
                    body=body,
                    headers={**headers, "Content-Type": "application/json"},
                )
                expect = 201
            else:
                path = (
                    "/healthz" if kind == "healthz" else f"/v1/conversations/{conversation}/context"
                )
                sent = time.perf_counter()
                connection.request("GET", path, headers=headers)
                expect = 200
            response = connection.getresponse()
            response.read()
            latencies.append(time.perf_counter() - sent)
            if response.status != expect:
                errors += 1
            elif kind == "write":
                written += bulk
        except (OSError, http.client.HTTPException):
            errors += 1
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out.put((kind, latencies, errors, written, time.perf_counter() - started))


def run_clients(
    server: harness.Server,
    headers: dict[str, str],
    conversations: list[str],
    kinds: list[str],
    seconds: float,
    bulk: int = 10,
    offered: float = 0.0,
) -> dict[str, dict[str, Any]]:
    ctx = mp.get_context("fork")
    ready, out = ctx.Event(), ctx.Queue()
    writers = kinds.count("write")
    # Seconds between one writer's requests so that all of them offer ``offered`` msg/s.
    pace = (writers * bulk / offered) if offered and writers else 0.0
    processes = [
        ctx.Process(
            target=client,
            args=(kind, server.port, headers, conversations, seconds, bulk, pace, ready, out),
        )
        for kind in kinds
    ]
    for process in processes:
        process.start()
    time.sleep(0.5)
    ready.set()
    results = [out.get(timeout=seconds + 120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    summary: dict[str, dict[str, Any]] = {}
    for kind, latencies, errors, written, elapsed in results:
        entry = summary.setdefault(
            kind, {"latencies": [], "errors": 0, "written": 0, "elapsed": 0.0}
        )
        entry["latencies"] += latencies
        entry["errors"] += errors
        entry["written"] += written
        entry["elapsed"] = max(entry["elapsed"], elapsed)
    for entry in summary.values():
        entry["latencies"].sort()
    return summary


# --- memory of the server processes --------------------------------------------------------------


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class RssSampler:
    """Total RSS of the gunicorn workers and of the Celery worker's processes, each second."""

    def __init__(self, gunicorn_pid: int, celery_pid: int) -> None:
        self.roots = {"web": gunicorn_pid, "worker": celery_pid}
        self.samples: dict[str, list[float]] = {"web": [], "worker": []}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for name, root in self.roots.items():
                pids = harness.child_pids(root) if name == "web" else [root, *_tree(root)]
                self.samples[name].append(sum(rss_mb(pid) for pid in pids))

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def line(self, name: str) -> str:
        values = self.samples[name]
        if not values:
            return "-"
        return f"{values[0]:.0f} -> {values[-1]:.0f} MB (max {max(values):.0f})"


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in harness.child_pids(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


@contextmanager
def celery_worker(env: dict[str, str], concurrency: int) -> Any:
    """The Procfile's worker line."""
    log_path = Path(env["MEMDESK_VAR_DIR"]) / "celery.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                str(harness.ROOT / ".venv" / "bin" / "celery"),
                "-A",
                "config",
                "worker",
                "--loglevel",
                "WARNING",
                "--concurrency",
                str(concurrency),
            ],
            cwd=harness.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        time.sleep(3)
        harness.say(f"celery     pid {process.pid}, concurrency {concurrency}")
        yield process
    finally:
        harness._stop(process)  # type: ignore[arg-type]
        harness.say(f"celery     pid {process.pid} stopped")


# --- the bench -----------------------------------------------------------------------------------


def seed(server: harness.Server, headers: dict[str, str]) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    json_headers = {**headers, "Content-Type": "application/json"}
    rng = random.Random(1)
    conversations = []
    for n in range(CONVERSATIONS):
        connection.request(
            "POST", "/v1/conversations", json.dumps({"userId": f"user-{n}"}), json_headers
        )
        conversation = json.loads(connection.getresponse().read())["id"]
        for _ in range(SEED_MESSAGES // 100):
            body = {"messages": [{"role": "user", "content": _text(rng)} for _ in range(100)]}
            connection.request(
                "POST",
                f"/v1/conversations/{conversation}/messages/bulk",
                json.dumps(body),
                json_headers,
            )
            connection.getresponse().read()
        conversations.append(conversation)
    return conversations


def wait_for_empty_queue(broker_db: int, limit: float = 120.0) -> float:
    """Seconds until the broker's queue is empty (the seed's scans done), at most ``limit``."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        result = subprocess.run(
            ["redis-cli", "-n", str(broker_db), "LLEN", "celery"], capture_output=True, text=True
        )
        if result.stdout.strip() in ("0", ""):
            break
        time.sleep(1.0)
    time.sleep(2.0)  # the task taken last
    return time.monotonic() - started


def _ms(values: list[float], fraction: float) -> str:
    return f"{1000 * harness.percentile(values, fraction):.1f}" if values else "-"


def phase(
    args: argparse.Namespace, url: str, var_dir: Path, raw_key: str, observer: bool
) -> list[list[str]]:
    env = harness.django_env(
        url,
        var_dir,
        CACHE_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
        CELERY_BROKER_URL=f"redis://127.0.0.1:6379/{args.redis_db + 1}",
        MEMDESK_PIPELINE_ENABLED="1" if observer else "0",
    )
    subprocess.run(
        ["redis-cli", "-n", str(args.redis_db), "FLUSHDB"], check=False, capture_output=True
    )
    subprocess.run(
        ["redis-cli", "-n", str(args.redis_db + 1), "FLUSHDB"], check=False, capture_output=True
    )
    headers = {"Authorization": f"Bearer {raw_key}"}
    label = "on" if observer else "off"
    rows: list[list[str]] = []
    with (
        harness.gunicorn(env, workers=args.web_workers) as server,
        celery_worker(env, args.worker_concurrency) as worker,
    ):
        conversations = seed(server, headers)
        harness.say(f"seeded     {CONVERSATIONS} conversations x {SEED_MESSAGES} messages")
        drained = wait_for_empty_queue(args.redis_db + 1)
        harness.say(f"drained    the worker's queue in {drained:.0f} s (scans of the seed)")
        # Baselines: /healthz, and the context of conversations no one writes to.
        harness.wait_for_quiet_machine()
        base = run_clients(server, headers, conversations, ["healthz"] * CLIENTS, args.baseline)
        quiet = run_clients(server, headers, conversations, ["read"] * CLIENTS, args.baseline)
        healthz_rate = len(base["healthz"]["latencies"]) / base["healthz"]["elapsed"]
        quiet_rate = len(quiet["read"]["latencies"]) / quiet["read"]["elapsed"]
        for name, result, kind in (
            ("/healthz", base, "healthz"),
            ("context, quiet", quiet, "read"),
        ):
            entry = result[kind]
            rate = len(entry["latencies"]) / entry["elapsed"]
            rows.append(
                [
                    label,
                    name,
                    f"{rate:,.0f} req/s",
                    _ms(entry["latencies"], 0.5),
                    _ms(entry["latencies"], 0.99),
                    str(entry["errors"]),
                ]
            )
        harness.say(
            f"baseline   /healthz {healthz_rate:,.0f}/s, quiet cached context {quiet_rate:,.0f}/s "
            f"({healthz_rate / max(quiet_rate, 1e-9):.2f}x slower than /healthz)"
        )
        kinds = ["write"] * args.writers + ["read"] * (CLIENTS - args.writers)
        with RssSampler(server.process.pid, worker.pid) as rss:
            mixed = run_clients(
                server, headers, conversations, kinds, args.seconds, args.bulk, args.offered
            )
        reads, writes = mixed["read"], mixed["write"]
        read_rate = len(reads["latencies"]) / reads["elapsed"]
        message_rate = writes["written"] / writes["elapsed"]
        rows.append(
            [
                label,
                f"mixed: context GET ({CLIENTS - args.writers} clients)",
                f"{read_rate:,.0f} reads/s",
                _ms(reads["latencies"], 0.5),
                _ms(reads["latencies"], 0.99),
                str(reads["errors"]),
            ]
        )
        rows.append(
            [
                label,
                f"mixed: bulk POST x{args.bulk} ({args.writers} clients)",
                f"{message_rate:,.0f} msg/s",
                _ms(writes["latencies"], 0.5),
                _ms(writes["latencies"], 0.99),
                str(writes["errors"]),
            ]
        )
        harness.say(
            f"mixed      observer {label}: {read_rate:,.0f} reads/s (p99 "
            f"{_ms(reads['latencies'], 0.99)} ms), {message_rate:,.0f} msg/s; "
            f"RSS web {rss.line('web')}, worker {rss.line('worker')}"
        )
        rows.append([label, "RSS gunicorn workers", rss.line("web"), "", "", ""])
        rows.append([label, "RSS celery worker", rss.line("worker"), "", "", ""])
        # How big the context got, and what the pipeline did meanwhile.
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request("GET", f"/v1/conversations/{conversations[0]}/context", headers=headers)
        size = len(connection.getresponse().read())
        rows.append([label, "context body after the run", f"{size / 1024:,.0f} KB", "", "", ""])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the mixed run")
    parser.add_argument("--baseline", type=float, default=10.0, help="each baseline run")
    parser.add_argument("--observer", choices=["on", "off", "both"], default="both")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--bulk", type=int, default=10, help="messages per write")
    parser.add_argument("--offered", type=float, default=2000.0, help="messages/s offered")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument(
        "--context-max-tokens",
        type=int,
        default=0,
        help="the workspace's default context budget (0: none)",
    )
    args = parser.parse_args()
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    harness.say(
        f"load       {CLIENTS} clients: {args.writers} writers (x{args.bulk}, offering "
        f"{args.offered:,.0f} msg/s), {CLIENTS - args.writers} context readers, "
        f"{args.seconds:.0f} s"
    )
    rows: list[list[str]] = []
    for observer in {"on": [True], "off": [False], "both": [True, False]}[args.observer]:
        with harness.fresh_database("bench_load") as url, harness.scratch_dir() as var_dir:
            env = harness.django_env(url, var_dir)
            raw_key = harness.prepare_database(env)
            if args.context_max_tokens:
                harness.manage(
                    env,
                    "shell",
                    "-c",
                    "from memory.models import Workspace; "
                    f"Workspace.objects.filter(name='bench').update("
                    f"context_max_tokens={args.context_max_tokens})",
                )
            rows += phase(args, url, var_dir, raw_key, observer)
    harness.say()
    harness.say(
        harness.table(["observer", "route", "throughput", "p50 ms", "p99 ms", "errors"], rows)
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    harness.run_main(main)
