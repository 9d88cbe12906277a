"""Bulk ingest: messages/s through the HTTP API (gunicorn + PostgreSQL, 100 messages per
request) beside raw psycopg ``executemany`` of the same rows into the same table.

    .venv/bin/python bench/ingest.py                       # the recorded configuration
    .venv/bin/python bench/ingest.py --pipeline both       # also with the pipeline off
    .venv/bin/python bench/ingest.py --workers 2,3,4       # compare worker counts

Targets (foundation issue): >= 5,000 messages/s through the API, API/raw >= 0.25.
Creates a database named bench_ingest_<timestamp> and drops it at the end.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import resource
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import harness
import psycopg
from content import message_batch
from psycopg import sql
from psycopg.types.json import Jsonb

BATCH = 100  # the API's limit per bulk request
TARGET_MESSAGES_PER_SECOND = 5_000
TARGET_RATIO = 0.25
WARMUP_REQUESTS_PER_CLIENT = 2


@dataclass
class ClientResult:
    requests: int
    errors: list[str]
    latencies: list[float]
    started: float
    finished: float
    cpu_seconds: float


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _body(seed: int) -> bytes:
    return json.dumps({"messages": message_batch(seed, BATCH)}).encode()


def client(
    port: int,
    raw_key: str,
    work: list[tuple[str, int]],
    warmup_conversation: str,
    ready: Any,
    results: Any,
) -> None:
    """Post pre-built bulk bodies over one keep-alive connection. A sync gunicorn worker
    answers 'Connection: close'; http.client then opens a new connection by itself."""
    harness.client_process_signals()
    bodies = [
        (f"/v1/conversations/{conversation_id}/messages/bulk", _body(seed))
        for conversation_id, seed in work
    ]
    headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    # Untimed: the first bulk request of a worker loads the tokenizer (reported apart).
    for seed in range(WARMUP_REQUESTS_PER_CLIENT):
        path = f"/v1/conversations/{warmup_conversation}/messages/bulk"
        connection.request("POST", path, body=_body(-1 - seed), headers=headers)
        connection.getresponse().read()
    errors: list[str] = []
    latencies: list[float] = []
    ready.wait()
    cpu_before = _cpu_seconds()
    started = time.monotonic()
    for path, body in bodies:
        sent = time.monotonic()
        try:
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 201:
                errors.append(f"HTTP {response.status}")
        except (OSError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)
            connection.close()
        latencies.append(time.monotonic() - sent)
    finished = time.monotonic()
    connection.close()
    results.put(
        ClientResult(len(bodies), errors, latencies, started, finished, _cpu_seconds() - cpu_before)
    )


def create_conversations(port: int, raw_key: str, count: int, title: str) -> list[str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}
    ids = []
    for index in range(count):
        body = json.dumps({"title": f"{title} {index}", "userId": f"user-{index % 7}"})
        connection.request("POST", "/v1/conversations", body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        if response.status != 201:
            raise RuntimeError(f"creating a conversation answered HTTP {response.status}")
        ids.append(json.loads(payload)["id"])
    connection.close()
    return ids


def first_request_seconds(port: int, raw_key: str, conversation_id: str) -> float:
    """One bulk request to a worker that has served nothing yet (the server has just
    started, and nothing else is in flight)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": f"Bearer {raw_key}", "Content-Type": "application/json"}
    body = _body(-100)
    started = time.monotonic()
    connection.request(
        "POST", f"/v1/conversations/{conversation_id}/messages/bulk", body=body, headers=headers
    )
    response = connection.getresponse()
    response.read()
    seconds = time.monotonic() - started
    connection.close()
    if response.status != 201:
        raise RuntimeError(f"the first bulk request answered HTTP {response.status}")
    return seconds


@dataclass
class ApiRun:
    label: str
    messages: int
    seconds: float
    p50_ms: float
    p99_ms: float
    first_request_ms: float
    client_cpu: float
    cpu: harness.CpuUse

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def api_run(
    env: dict[str, str],
    raw_key: str,
    args: argparse.Namespace,
    *,
    workers: int,
    pipeline: str,
    database_url: str,
) -> ApiRun:
    requests = args.messages // BATCH
    with harness.gunicorn(
        env, workers=workers, worker_class=args.worker_class, threads=args.threads
    ) as server:
        conversations = create_conversations(
            server.port, raw_key, args.conversations + 1, f"ingest w{workers} p{pipeline}"
        )
        warmup_conversation = conversations.pop()
        first_request = first_request_seconds(server.port, raw_key, warmup_conversation)
        # Each conversation belongs to one client, which appends to it in order, as an
        # agent would; clients never contend for a conversation's row lock.
        plans: list[list[tuple[str, int]]] = [[] for _ in range(args.clients)]
        for request_index in range(requests):
            conversation_index = request_index % len(conversations)
            plans[conversation_index % args.clients].append(
                (conversations[conversation_index], request_index)
            )
        ready = mp.Barrier(args.clients + 1)
        results: Any = mp.Queue()
        processes = [
            mp.Process(
                target=client,
                args=(server.port, raw_key, plan, warmup_conversation, ready, results),
            )
            for plan in plans
        ]
        try:
            for process in processes:
                process.start()
            checkpoint(database_url)
            harness.wait_for_quiet_machine()
            with harness.CpuMonitor(server) as monitor:
                ready.wait(timeout=120)  # every client has built its bodies and warmed up
                outcomes = [results.get(timeout=170) for _ in processes]
            cpu = monitor.use()
            for process in processes:
                process.join(timeout=10)
        finally:
            for process in processes:
                if process.is_alive():
                    process.terminate()
                    process.join(timeout=5)

    errors = [error for outcome in outcomes for error in outcome.errors]
    if errors:
        raise RuntimeError(f"{len(errors)} of {requests} requests failed, first: {errors[0]}")
    seconds = max(o.finished for o in outcomes) - min(o.started for o in outcomes)
    latencies = sorted(latency for outcome in outcomes for latency in outcome.latencies)
    return ApiRun(
        label=f"{server.label}, pipeline {pipeline}",
        messages=requests * BATCH,
        seconds=seconds,
        p50_ms=1000 * harness.percentile(latencies, 0.50),
        p99_ms=1000 * harness.percentile(latencies, 0.99),
        first_request_ms=1000 * first_request,
        client_cpu=sum(o.cpu_seconds for o in outcomes),
        cpu=cpu,
    )


def checkpoint(database_url: str) -> None:
    # Start each timed phase with no dirty buffers left over from the previous one.
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("CHECKPOINT")


def _adapt(value: Any) -> Any:
    return Jsonb(value) if isinstance(value, dict | list) else value


@dataclass
class RawRun:
    connections: int
    messages: int
    seconds: float
    client_cpu: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def raw_batches(database_url: str, messages: int) -> tuple[sql.Composed, list[list[list[Any]]]]:
    """Rows the API stored (every column: content, roles, token counts...) with fresh ids
    and seq numbers, 100 to a new conversation; returns the INSERT and the batches."""
    with psycopg.connect(database_url) as connection:
        cursor = connection.execute(
            "SELECT * FROM memory_message ORDER BY conversation_id, seq LIMIT %s", (messages,)
        )
        message_columns = [column.name for column in cursor.description or []]
        source = cursor.fetchall()
        # Copy a conversation row whole, so columns added later need no change here.
        cursor = connection.execute("SELECT * FROM memory_conversation LIMIT 1")
        conversation_columns = [column.name for column in cursor.description or []]
        template = dict(zip(conversation_columns, cursor.fetchone() or (), strict=True))
        insert_conversation = _insert_sql("memory_conversation", conversation_columns)
        now = datetime.now(UTC)
        batches = []
        for start in range(0, len(source), BATCH):
            conversation = template | {
                "id": uuid.uuid4(),
                "title": "raw",
                "last_seq": BATCH,
                "created_at": now,
                "updated_at": now,
            }
            connection.execute(
                insert_conversation, [_adapt(conversation[c]) for c in conversation_columns]
            )
            rows = []
            for seq, values in enumerate(source[start : start + BATCH], start=1):
                row = dict(zip(message_columns, values, strict=True))
                row |= {"id": uuid.uuid4(), "conversation_id": conversation["id"], "seq": seq}
                rows.append([_adapt(row[c]) for c in message_columns])
            batches.append(rows)
    return _insert_sql("memory_message", message_columns), batches


def raw_run(database_url: str, messages: int, connections: int) -> RawRun:
    """executemany, one transaction per 100 rows as the API commits, over ``connections``
    connections at once (threads: psycopg waits on the network without the GIL)."""
    insert, batches = raw_batches(database_url, messages)
    checkpoint(database_url)
    harness.wait_for_quiet_machine()

    def insert_share(share: list[list[list[Any]]]) -> None:
        with psycopg.connect(database_url) as connection, connection.cursor() as cursor:
            for rows in share:
                cursor.executemany(insert, rows)
                connection.commit()

    shares = [batches[index::connections] for index in range(connections)]
    cpu_before = _cpu_seconds()
    started = time.monotonic()
    with ThreadPoolExecutor(connections) as pool:
        list(pool.map(insert_share, shares))
    seconds = time.monotonic() - started
    return RawRun(
        connections, sum(len(rows) for rows in batches), seconds, _cpu_seconds() - cpu_before
    )


def _insert_sql(table: str, columns: list[str]) -> sql.Composed:
    return sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--workers", default="3", help="gunicorn workers; a list compares them")
    parser.add_argument("--worker-class", default="sync", choices=("sync", "gthread"))
    parser.add_argument("--threads", type=int, default=1, help="threads per gthread worker")
    parser.add_argument("--clients", type=int, default=8, help="concurrent client processes")
    parser.add_argument("--conversations", type=int, default=32)
    parser.add_argument(
        "--raw-connections",
        default="1,3",
        help="raw runs to time; the first (one connection) is the baseline of the ratio",
    )
    parser.add_argument(
        "--pipeline",
        default="on",
        choices=("on", "off", "both"),
        help="MEMDESK_PIPELINE_ENABLED for the server (on is the product default; no "
        "Celery worker runs, so due Observer runs are scheduled but never executed)",
    )
    args = parser.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]
    pipelines = ["on", "off"] if args.pipeline == "both" else [args.pipeline]
    harness.say(harness.machine_line())

    with harness.scratch_dir() as var_dir, harness.fresh_database("bench_ingest") as database_url:
        raw_key = harness.prepare_database(harness.django_env(database_url, var_dir))
        runs = []
        for pipeline in pipelines:
            env = harness.django_env(
                database_url, var_dir, MEMDESK_PIPELINE_ENABLED="1" if pipeline == "on" else "0"
            )
            for workers in worker_counts:
                runs.append(
                    api_run(
                        env,
                        raw_key,
                        args,
                        workers=workers,
                        pipeline=pipeline,
                        database_url=database_url,
                    )
                )
        raws = [
            raw_run(database_url, args.messages, int(count))
            for count in args.raw_connections.split(",")
        ]
    raw_rate = raws[0].rate  # the baseline of the ratio: one connection, as specified

    harness.say()
    harness.say(
        f"ingest: {args.messages:,} messages, {BATCH} per request, {args.clients} client "
        f"processes, {args.conversations} conversations"
    )
    rows = [
        [
            f"API, {run.label}",
            f"{run.messages:,}",
            f"{run.seconds:.2f}",
            f"{run.rate:,.0f}",
            f"{run.rate / raw_rate:.2f}",
            f"{run.p50_ms:.0f} / {run.p99_ms:.0f}",
            f"{run.first_request_ms:.0f}",
        ]
        for run in runs
    ]
    rows += [
        [
            f"raw psycopg executemany, {raw.connections} connection"
            + ("s" if raw.connections > 1 else ""),
            f"{raw.messages:,}",
            f"{raw.seconds:.2f}",
            f"{raw.rate:,.0f}",
            f"{raw.rate / raw_rate:.2f}",
            "",
            "",
        ]
        for raw in raws
    ]
    harness.say(
        harness.table(
            [
                "path",
                "messages",
                "seconds",
                "messages/s",
                "vs raw",
                "request p50 / p99 ms",
                "1st request ms",
            ],
            rows,
        )
    )
    for run in runs:
        requests = run.messages / BATCH
        harness.say(f"{run.label}: {run.cpu.line(run.seconds, run.client_cpu)}")
        own_cpu = run.cpu.server + run.cpu.postgres + run.client_cpu
        alone = (os.cpu_count() or 1) * run.messages / own_cpu
        harness.say(
            f"  per request of {BATCH}: gunicorn {1000 * run.cpu.server / requests:.1f} ms CPU, "
            f"postgres {1000 * run.cpu.postgres / requests:.1f} ms CPU, "
            f"load generator {1000 * run.client_cpu / requests:.1f} ms CPU; "
            f"with the cores to itself at most ~{alone:,.0f} messages/s (CPU-bound estimate)"
        )
    for raw in raws:
        harness.say(
            f"raw, {raw.connections} connection(s): psycopg client CPU {raw.client_cpu:.1f} s "
            f"over {raw.seconds:.1f} s"
        )

    headline = runs[0]  # the first configuration asked for; the product default comes first
    met_rate = headline.rate >= TARGET_MESSAGES_PER_SECOND
    met_ratio = headline.rate / raw_rate >= TARGET_RATIO
    harness.say(
        f"target >= {TARGET_MESSAGES_PER_SECOND:,} messages/s: "
        f"{'met' if met_rate else 'NOT met'} ({headline.rate:,.0f}, {headline.label}); "
        f"target API/raw >= {TARGET_RATIO}: {'met' if met_ratio else 'NOT met'} "
        f"({headline.rate / raw_rate:.2f})"
    )
    return 0 if met_rate and met_ratio else 1


if __name__ == "__main__":
    harness.run_main(main)
