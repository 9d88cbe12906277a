"""The request path in process: server time of ``/healthz``, ``/readyz``, a cached context
read, the same read while the cache is down, a 1-message write (and its ratio to the cached
read: issue 26 wants at most 1.5x), a 10-message bulk write and the cache calls,
through django.test.Client (middleware, authentication, view, rendering; no network),
plus the cost of one JSON log line and of the transaction-retry wrapper. What a change to
the plumbing under every request (cache backend, request ids, log formatting,
transaction retry, health checks) can move, in about a minute, without a server or
PostgreSQL.

    /work/main/.venv/bin/python bench/request_path.py                 # Redis cache if installed
    /work/main/.venv/bin/python bench/request_path.py --cache locmem --rounds 500
    /work/main/.venv/bin/python bench/request_path.py --profile "write, 1 message"
    /work/main/.venv/bin/python bench/request_path.py --queries "write, 1 message"

A throwaway SQLite database and var directory in a temporary folder; with ``--cache redis``
a private redis-server on a free loopback port (none shared with anything else). Requests
of the cases alternate round by round, so that whatever else the machine does falls on
all of them alike. Prints timings only.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import harness
from content import message_batch

DEAD_CACHE = "redis://127.0.0.1:1/0"  # nothing listens on port 1
LONG_TAIL_MESSAGES = 600  # about the tails of bench/load.py's mixed run by its end


class Case:
    """A case with a step run before each measured call and not measured itself."""

    def __init__(self, run: Callable[[], None], *, before: Callable[[], None]) -> None:
        self.run = run
        self.before = before

    def __call__(self) -> None:
        self.before()
        self.run()


@contextmanager
def private_redis() -> Iterator[str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait(timeout=10)


@contextmanager
def _cache_url(kind: str) -> Iterator[str]:
    if kind == "locmem":
        yield ""
    else:
        with private_redis() as url:
            yield url


def _profile(case: Callable[[], None], rounds: int) -> None:
    """Where one case's time goes: cProfile over ``rounds`` runs, by cumulative time."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    for _ in range(rounds):
        if isinstance(case, Case):
            case.before()
        profiler.runcall(case.run if isinstance(case, Case) else case)
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)


def _queries(case: Callable[[], None]) -> None:
    """The SQL one run of a case sends, in order (statements only: the bench's own
    messages, no one's data)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if isinstance(case, Case):
        case.before()
    with CaptureQueriesContext(connection) as captured:
        (case.run if isinstance(case, Case) else case)()
    for number, query in enumerate(captured.captured_queries, 1):
        harness.say(f"{number:>3}. {query['sql'][:160]}")


def measure(
    rounds: int,
    profile: str | None = None,
    queries: str | None = None,
    background_sends: bool = True,
) -> dict[str, list[float]]:
    from django.conf import settings
    from django.test import Client, override_settings

    from core.actors import SYSTEM_ACTOR
    from core.tasks import worker_heartbeat
    from governance.ledger.buffer import ledger_buffer_start
    from memory.services.conversations import conversation_create
    from tenancy.services import api_key_create, workspace_get_or_create

    # As each gunicorn worker does (config/gunicorn.py): the read ledger written in batches
    # by a thread (never in the request), and, unless asked otherwise, tasks sent after it.
    ledger_buffer_start()
    if background_sends:
        from core.queue import send_in_background

        send_in_background()
    workspace = workspace_get_or_create(name="bench")
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope="agent")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}
    client = Client()
    read = conversation_create(workspace=workspace)
    write = conversation_create(workspace=workspace)
    for seed in (7, 8):  # 200 messages, in the API's batches of at most 100
        body = json.dumps({"messages": message_batch(seed, 100)})
        response = client.post(
            f"/v1/conversations/{read.pk}/messages/bulk", body, "application/json", **auth
        )
        assert response.status_code == 201, response.content[:200]
    worker_heartbeat.apply()
    bodies = [json.dumps({"messages": message_batch(seed, 10)}) for seed in range(rounds + 5)]
    singles = iter(
        [json.dumps(message_batch(seed, 1)[0]) for seed in range(1000, 1000 + rounds + 5)]
    )
    context = f"/v1/conversations/{read.pk}/context"
    writes = iter(bodies)
    # A conversation whose unobserved tail is long (no Observer runs here), read right
    # after each 10-message write to it: what a read costs under a busy writer.
    long_tail = conversation_create(workspace=workspace)
    for seed in range(20, 20 + LONG_TAIL_MESSAGES // 100):
        body = json.dumps({"messages": message_batch(seed, 100)})
        response = client.post(
            f"/v1/conversations/{long_tail.pk}/messages/bulk", body, "application/json", **auth
        )
        assert response.status_code == 201, response.content[:200]
    long_tail_writes = iter(
        [json.dumps({"messages": message_batch(seed, 10)}) for seed in range(rounds + 10)]
    )
    long_tail_context = f"/v1/conversations/{long_tail.pk}/context"

    def bulk_writer(conversation: Any, bodies: Iterator[str]) -> Callable[[], None]:
        def run() -> None:
            response = client.post(
                f"/v1/conversations/{conversation.pk}/messages/bulk",
                next(bodies),
                "application/json",
                **auth,
            )
            assert response.status_code == 201, response.status_code

        return run

    write_to_long_tail = bulk_writer(long_tail, long_tail_writes)

    def get(path: str, **headers: str) -> Callable[[], None]:
        def run() -> None:
            response = client.get(path, **headers)
            assert response.status_code == 200, (path, response.status_code)

        return run

    bulk_write = bulk_writer(write, writes)

    def single_write() -> None:
        response = client.post(
            f"/v1/conversations/{write.pk}/messages", next(singles), "application/json", **auth
        )
        assert response.status_code == 201, response.status_code

    from django.core.cache import cache

    from core.queue import queued_mark_clear
    from governance.redaction.scan import scan_queued_mark

    def scanner_idle() -> None:
        """As an idle scanner does when it takes the task a write sent: the write after
        it sends one of its own (no worker runs here to take it)."""
        queued_mark_clear(scan_queued_mark(workspace.pk))

    keys = [f"bench:{n}" for n in range(16)]
    for key in keys:
        cache.set(key, {"tokens": 1234, "digest": key * 4}, 600)

    def cache_one() -> None:
        cache.get(keys[0])

    def cache_many() -> None:
        assert len(cache.get_many(keys)) in (0, 16)

    cases: dict[str, Callable[[], None]] = {
        "/healthz": get("/healthz"),
        "/readyz": get("/readyz"),
        "context, cached": get(context, **auth),
        "write, 1 message": Case(single_write, before=scanner_idle),
        "bulk write, 10 messages": Case(bulk_write, before=scanner_idle),
        f"context of a {LONG_TAIL_MESSAGES}-message tail, after a write": Case(
            get(long_tail_context, **auth), before=write_to_long_tail
        ),
        "cache get, 1 key": cache_one,
        "cache get_many, 16 keys": cache_many,
    }
    for case in cases.values():  # warm: tokenizer, PII model, connections, caches
        for _ in range(3):
            case()
    if profile:
        _profile(cases[profile], rounds)
        return {}
    if queries:
        _queries(cases[queries])
        return {}
    timings: dict[str, list[float]] = {name: [] for name in cases}
    busy = harness.wait_for_quiet_machine()
    busy_before = harness.machine_busy_seconds()
    _alternate(cases, rounds, timings)
    dead = {**settings.CACHES["default"], "LOCATION": DEAD_CACHE}
    if "redis" in dead["BACKEND"].lower():  # an in-process cache cannot be down
        logging.getLogger("core.cache").disabled = True  # its warning is not measured
        down = {
            "context, cache down": get(context, **auth),
            "cache get, 1 key, cache down": cache_one,
            "cache get_many, 16 keys, cache down": cache_many,
        }
        with override_settings(CACHES={"default": dead}):
            _alternate(down, rounds, timings)
    timings["JSON log line (µs)"] = log_line_us(rounds * 20)
    timings["retried_on_conflict, no conflict (µs)"] = retry_wrapper_us(rounds * 20)
    busy_after = harness.machine_busy_seconds()
    share = (busy_after[0] - busy_before[0]) / max(busy_after[1] - busy_before[1], 1e-9)
    harness.say(
        f"machine    {busy:.0%} busy before measuring, {share:.0%} of all cores busy while "
        f"measuring (one core of {os.cpu_count()} is the bench itself)"
    )
    return timings


def _alternate(
    cases: dict[str, Callable[[], None]], rounds: int, timings: dict[str, list[float]]
) -> None:
    for _ in range(rounds):
        for name, case in cases.items():
            if isinstance(case, Case):
                case.before()
                case = case.run
            began = time.perf_counter()
            case()
            timings.setdefault(name, []).append((time.perf_counter() - began) * 1000)


def log_line_us(count: int) -> list[float]:
    """Microseconds to format one record with the ``json`` formatter of LOGGING, with the
    request-id filter applied, as the console handler does."""
    import logging.config

    from django.conf import settings

    config: dict[str, Any] = {**settings.LOGGING, "root": {"handlers": [], "level": "INFO"}}
    config["handlers"] = {}
    config["loggers"] = {
        name: {**spec, "handlers": []} for name, spec in settings.LOGGING["loggers"].items()
    }
    logging.config.dictConfig(config)
    formatter_spec = dict(settings.LOGGING["formatters"]["json"])
    filter_spec = dict(settings.LOGGING["filters"]["request_id"])
    formatter = _built(formatter_spec)
    request_filter = _built(filter_spec)
    record = logging.LogRecord(
        "memory.pipeline",
        logging.INFO,
        __file__,
        1,
        "observer run %s stored %s notes",
        ("8f14e45f", 12),
        None,
    )
    took = []
    for _ in range(count):
        began = time.perf_counter()
        request_filter.filter(record)
        formatter.format(record)
        took.append((time.perf_counter() - began) * 1e6)
    return took


def retry_wrapper_us(count: int) -> list[float]:
    """Microseconds that ``retried_on_conflict`` adds around work that does not conflict
    (conversation deletes and retention batches run through it)."""
    from core.transactions import retried_on_conflict

    took = []
    for _ in range(count):
        began = time.perf_counter()
        retried_on_conflict(int)
        took.append((time.perf_counter() - began) * 1e6)
    return took


def _built(spec: dict[str, Any]) -> Any:
    from django.utils.module_loading import import_string

    factory = spec.pop("()")
    return (import_string(factory) if isinstance(factory, str) else factory)(**spec)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", choices=("redis", "locmem"), default="redis")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--profile", metavar="CASE", help="cProfile one case instead")
    parser.add_argument("--queries", metavar="CASE", help="print the SQL of one case instead")
    parser.add_argument(
        "--inline-sends",
        action="store_true",
        help="send Celery tasks in the request, as before the web workers sent them after it",
    )
    args = parser.parse_args()
    if args.cache == "redis" and not shutil.which("redis-server"):
        harness.say("no redis-server on the PATH: measuring with the in-process cache")
        args.cache = "locmem"
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    with harness.scratch_dir() as var_dir, _cache_url(args.cache) as cache_url:
        url = f"sqlite:///{var_dir / 'bench.sqlite3'}"
        os.environ.update(
            harness.django_env(url, var_dir, ALLOWED_HOSTS="testserver", CACHE_URL=cache_url)
        )
        os.environ["CELERY_BROKER_URL"] = "memory://"
        sys.path.insert(0, str(harness.ROOT))
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        harness.say(f"database   sqlite, cache {args.cache}, {args.rounds} rounds")
        timings = measure(args.rounds, args.profile, args.queries, not args.inline_sends)
    if args.profile or args.queries:
        return

    rows = []
    for name, values in timings.items():
        ordered = sorted(values)
        rows.append(
            [
                name,
                f"{statistics.median(ordered):.3f}",
                f"{harness.percentile(ordered, 0.95):.3f}",
                f"{statistics.fmean(ordered):.3f}",
            ]
        )
    harness.say()
    harness.say(harness.table(["case (ms unless said)", "p50", "p95", "mean"], rows))
    single = statistics.median(timings["write, 1 message"])
    read = statistics.median(timings["context, cached"])
    harness.say(f"1-message write / cached context read, p50: {single / read:.2f}x (target 1.5x)")


if __name__ == "__main__":
    main()
