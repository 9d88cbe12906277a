"""Context reads: GET /v1/conversations/{id}/context for a long conversation (10,000
messages, 500 observations covering most of them, 20 reflections) with 16 concurrent
clients on gunicorn + PostgreSQL, beside GET /healthz at the same concurrency.

    .venv/bin/python bench/context.py                     # the recorded configuration
    .venv/bin/python bench/context.py --workers 2,3,4     # compare worker counts
    .venv/bin/python bench/context.py --ledger-rounds 0   # without the ledger's cost

Targets (foundation issue): p50 <= 15 ms and p99 <= 60 ms for the context. Issue 27: a
cached read with the read ledger on within 1.15x of the same read with it off, measured as
throughput in one run: the context phase on the serving configuration and on one whose
recorder is a no-op (bench/gunicorn_no_ledger.py), alternated ``--ledger-rounds`` times;
and every read the ledger-on servers served is a row once they have stopped.
Creates a database named bench_context_<timestamp> and drops it at the end.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any

import harness
import psycopg
from seed import seed_long_conversation

TARGET_P50_MS = 15.0
TARGET_P99_MS = 60.0


# --- seeding (runs inside Django, in a subprocess of its own) --------------------------------


def seed(messages: int, observations: int, reflections: int, recent: int) -> None:
    """Write one conversation as the pipeline would leave it, every observation still
    active (so all of them are in the context). Prints the conversation id."""
    sys.path.insert(0, str(harness.ROOT))
    import django

    django.setup()
    from tenancy.models import Workspace

    conversation = seed_long_conversation(
        Workspace.objects.get(name="bench"),
        title="context bench",
        user_id="user-1",
        messages=messages,
        observations=observations,
        reflections=reflections,
        recent=recent,
        rng_seed=7,
    )
    print(conversation.id)


# --- load --------------------------------------------------------------------------------------


@dataclass
class ClientResult:
    latencies: list[float]
    errors: list[str]
    started: float
    finished: float
    cpu_seconds: float
    body_bytes: int


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def client(
    port: int, headers: dict[str, str], path: str, expect: int, count: int, ready: Any, out: Any
) -> None:
    """``count`` GETs, one after another, over one keep-alive connection (http.client
    reconnects by itself when a sync worker answers 'Connection: close')."""
    harness.client_process_signals()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    latencies: list[float] = []
    errors: list[str] = []
    body_bytes = 0
    ready.wait()
    cpu_before = _cpu_seconds()
    started = time.monotonic()
    for _ in range(count):
        sent = time.monotonic()
        try:
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            body_bytes = len(response.read())
            if response.status != expect:
                errors.append(f"HTTP {response.status}")
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            connection.close()
        latencies.append(time.monotonic() - sent)
    finished = time.monotonic()
    connection.close()
    out.put(
        ClientResult(latencies, errors, started, finished, _cpu_seconds() - cpu_before, body_bytes)
    )


@dataclass
class Phase:
    name: str
    requests: int
    seconds: float
    latencies_ms: list[float]
    body_bytes: int
    client_cpu: float
    cpu: harness.CpuUse

    def p(self, fraction: float) -> float:
        return harness.percentile(self.latencies_ms, fraction)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def load(
    server: harness.Server,
    name: str,
    path: str,
    headers: dict[str, str],
    args: argparse.Namespace,
    expect: int = 200,
) -> Phase:
    per_client = args.requests // args.clients
    ready = mp.Barrier(args.clients + 1)
    out: Any = mp.Queue()
    processes = [
        mp.Process(target=client, args=(server.port, headers, path, expect, per_client, ready, out))
        for _ in range(args.clients)
    ]
    try:
        for process in processes:
            process.start()
        harness.wait_for_quiet_machine()
        with harness.CpuMonitor(server) as monitor:
            ready.wait(timeout=60)
            results = [out.get(timeout=150) for _ in processes]
        cpu = monitor.use()
        for process in processes:
            process.join(timeout=10)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
    errors = [error for result in results for error in result.errors]
    if errors:
        raise RuntimeError(f"{name}: {len(errors)} requests failed, first: {errors[0]}")
    return Phase(
        name=name,
        requests=per_client * args.clients,
        seconds=max(r.finished for r in results) - min(r.started for r in results),
        latencies_ms=sorted(1000 * latency for r in results for latency in r.latencies),
        body_bytes=results[0].body_bytes,
        client_cpu=sum(r.cpu_seconds for r in results),
        cpu=cpu,
    )


def timed_get(port: int, path: str, headers: dict[str, str]) -> tuple[float, int, str]:
    """(seconds, body bytes, ETag) of one GET on a fresh connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    started = time.monotonic()
    connection.request("GET", path, headers=headers)
    response = connection.getresponse()
    body = response.read()
    elapsed = time.monotonic() - started
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"GET {path.split('?')[0]} answered HTTP {response.status}")
    return elapsed, len(body), response.getheader("ETag") or ""


def uncached_renders(
    server: harness.Server, path: str, headers: dict[str, str], database_url: str, count: int
) -> list[float]:
    """Each request after a write to the conversation's memory: the cache key changes
    (memory_version), so the worker renders again, as after an Observer run."""
    seconds = []
    with psycopg.connect(database_url, autocommit=True) as connection:
        for _ in range(count):
            connection.execute(
                "UPDATE memory_conversation SET memory_version = memory_version + 1 "
                "WHERE title = 'context bench'"
            )
            seconds.append(timed_get(server.port, path, headers)[0])
    return seconds


@dataclass
class RunResult:
    label: str
    first_ms: float
    uncached_ms: list[float]
    context: Phase
    revalidate: Phase
    healthz: Phase


def run(
    env: dict[str, str],
    args: argparse.Namespace,
    raw_key: str,
    conversation_id: str,
    database_url: str,
    workers: int,
) -> RunResult:
    headers = {"Authorization": f"Bearer {raw_key}"}
    path = f"/v1/conversations/{conversation_id}/context"
    with harness.gunicorn(
        env, workers=workers, worker_class=args.worker_class, threads=args.threads
    ) as server:
        first, size, _ = timed_get(server.port, path, headers)
        uncached = uncached_renders(server, path, headers, database_url, args.uncached)
        for _ in range(4 * workers):  # every worker renders and caches the current context
            _, _, etag = timed_get(server.port, path, headers)
        context = load(server, "context", path, headers, args)
        # An agent that keeps the last context and sends its ETag gets 304 and no body.
        revalidate = load(
            server, "context 304", path, {**headers, "If-None-Match": etag}, args, expect=304
        )
        healthz = load(server, "healthz", "/healthz", {}, args)
    harness.say(f"context body {size:,} bytes")
    return RunResult(
        server.label, 1000 * first, [1000 * s for s in uncached], context, revalidate, healthz
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--observations", type=int, default=500)
    parser.add_argument("--reflections", type=int, default=20)
    parser.add_argument("--recent", type=int, default=200, help="unobserved messages at the end")
    parser.add_argument("--requests", type=int, default=4_000, help="per phase")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--uncached", type=int, default=10, help="uncached renders to time")
    parser.add_argument("--workers", default="3", help="gunicorn workers; a list compares them")
    parser.add_argument("--worker-class", default="sync", choices=("sync", "gthread"))
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument(
        "--ledger-rounds",
        type=int,
        default=2,
        help="context phases with the ledger on and off, alternated (0: none)",
    )
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed:
        seed(args.messages, args.observations, args.reflections, args.recent)
        return 0
    harness.say(harness.machine_line())

    results = []
    with harness.scratch_dir() as var_dir, harness.fresh_database("bench_context") as database_url:
        env = harness.django_env(database_url, var_dir)
        raw_key = harness.prepare_database(env)
        started = time.monotonic()
        conversation_id = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--seed", *_shape(args)],
            env=env,
            cwd=harness.ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        harness.say(
            f"seeded     {args.messages:,} messages, {args.observations} observations, "
            f"{args.reflections} reflections in {time.monotonic() - started:.1f} s"
        )
        for workers in [int(w) for w in args.workers.split(",")]:
            results.append(run(env, args, raw_key, conversation_id, database_url, workers))
        if args.ledger_rounds:
            ledger = ledger_cost(env, args, raw_key, conversation_id, database_url)

    report(args, results)
    if args.ledger_rounds:
        ledger.report()
    best = results[0]
    met = best.context.p(0.50) <= TARGET_P50_MS and best.context.p(0.99) <= TARGET_P99_MS
    return 0 if met else 1


@dataclass
class LedgerCost:
    on: list[Phase]
    off: list[Phase]
    served: int  # context reads answered by the ledger-on servers, 200 and 304
    rows: int  # ledger rows once they stopped

    def report(self) -> None:
        on = sum(p.requests for p in self.on) / sum(p.seconds for p in self.on)
        off = sum(p.requests for p in self.off) / sum(p.seconds for p in self.off)
        harness.say()
        harness.say(
            "ledger     cached context with the read ledger on: "
            + ", ".join(f"{p.rate:,.0f}/s" for p in self.on)
            + "; off: "
            + ", ".join(f"{p.rate:,.0f}/s" for p in self.off)
        )
        verdict = "met" if off / on <= 1.15 else "NOT met"
        lost = self.served - self.rows
        harness.say(
            f"ledger     off/on throughput {off / on:.3f}x (target <= 1.15x: {verdict}); "
            f"rows {self.rows:,} for {self.served:,} reads served (lost {lost:,})"
        )


def _ledger_rows(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM governance_contextread").fetchone()
    return int(row[0]) if row else 0


def ledger_cost(
    env: dict[str, str],
    args: argparse.Namespace,
    raw_key: str,
    conversation_id: str,
    database_url: str,
) -> LedgerCost:
    """The context phase with the ledger on (the serving configuration) and off (its
    recorder a no-op), alternated; and the rows the ledger-on servers left once stopped."""
    headers = {"Authorization": f"Bearer {raw_key}"}
    path = f"/v1/conversations/{conversation_id}/context"
    workers = int(args.workers.split(",")[0])
    no_ledger = harness.ROOT / "bench" / "gunicorn_no_ledger.py"
    cost = LedgerCost(on=[], off=[], served=0, rows=0)
    rows_before = _ledger_rows(database_url)
    for _ in range(args.ledger_rounds):
        for config in (harness.SERVING_CONFIG, no_ledger):
            with harness.gunicorn(
                env,
                workers=workers,
                worker_class=args.worker_class,
                threads=args.threads,
                config=config,
            ) as server:
                warm = 4 * workers
                for _ in range(warm):
                    timed_get(server.port, path, headers)
                phase = load(server, "context", path, headers, args)
            if config == no_ledger:
                cost.off.append(phase)
            else:
                cost.on.append(phase)
                cost.served += warm + phase.requests
    cost.rows = _ledger_rows(database_url) - rows_before
    return cost


def _shape(args: argparse.Namespace) -> list[str]:
    return [
        f"--messages={args.messages}",
        f"--observations={args.observations}",
        f"--reflections={args.reflections}",
        f"--recent={args.recent}",
    ]


def report(args: argparse.Namespace, results: list[RunResult]) -> None:
    harness.say()
    harness.say(
        f"context: {args.messages:,} messages ({args.recent} unobserved), "
        f"{args.observations} observations, {args.reflections} reflections; "
        f"{args.clients} concurrent clients, {args.requests:,} requests per phase"
    )
    rows = []
    for result in results:
        for phase in (result.context, result.revalidate, result.healthz):
            rows.append(
                [
                    result.label,
                    phase.name,
                    f"{phase.requests:,}",
                    f"{phase.rate:,.0f}",
                    f"{phase.p(0.50):.1f}",
                    f"{phase.p(0.90):.1f}",
                    f"{phase.p(0.99):.1f}",
                    f"{phase.latencies_ms[-1]:.1f}",
                    f"{phase.body_bytes:,}",
                ]
            )
        rows.append(
            [
                result.label,
                "context/healthz",
                "",
                f"{result.context.rate / result.healthz.rate:.2f}",
                f"{result.context.p(0.50) / result.healthz.p(0.50):.2f}",
                f"{result.context.p(0.90) / result.healthz.p(0.90):.2f}",
                f"{result.context.p(0.99) / result.healthz.p(0.99):.2f}",
                "",
                "",
            ]
        )
    harness.say(
        harness.table(
            ["server", "route", "requests", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms"]
            + ["bytes"],
            rows,
        )
    )
    for result in results:
        uncached = result.uncached_ms
        harness.say(
            f"{result.label}: first request after start {result.first_ms:.0f} ms; uncached "
            f"render (after a memory write) median {statistics.median(uncached):.0f} ms, "
            f"max {max(uncached):.0f} ms over {len(uncached)}"
        )
        for phase in (result.context, result.revalidate, result.healthz):
            harness.say(f"  {phase.name}: {phase.cpu.line(phase.seconds, phase.client_cpu)}")
            harness.say(
                f"    per request: gunicorn {1000 * phase.cpu.server / phase.requests:.2f} ms "
                f"CPU, postgres {1000 * phase.cpu.postgres / phase.requests:.2f} ms, "
                f"load generator {1000 * phase.client_cpu / phase.requests:.2f} ms"
            )
    best = results[0]
    p50, p99 = best.context.p(0.50), best.context.p(0.99)
    harness.say(
        f"target p50 <= {TARGET_P50_MS:.0f} ms: {'met' if p50 <= TARGET_P50_MS else 'NOT met'} "
        f"({p50:.1f}); target p99 <= {TARGET_P99_MS:.0f} ms: "
        f"{'met' if p99 <= TARGET_P99_MS else 'NOT met'} ({p99:.1f}) [{best.label}]"
    )


if __name__ == "__main__":
    harness.run_main(main)
