"""Mixed load: agents writing messages in bulk while others read the served context of the
same 16 conversations, against gunicorn from the Procfile (2 sync workers) and a Celery
worker (concurrency 2) on PostgreSQL with Redis as broker and cache; beside it, /healthz
and a quiet cached context read at the same concurrency as the baselines.

    .venv/bin/python bench/load.py                         # 60 s, observer on, then off
    .venv/bin/python bench/load.py --seconds 600           # the issue's 10-minute run
    .venv/bin/python bench/load.py --observer on --seconds 30 --context-max-tokens 8000

Targets (production issue), on a 2-core machine: >= 1,000 context reads/s and >= 2,000
messages/s together, read p99 < 100 ms; a cached context read within 2x of /healthz
throughput; no growth in worker memory (nor in the cache: its keys and MB are printed).

Method. A fresh database (migrated) gets one workspace and 16 conversations as the
pipeline leaves them (``--seed-messages`` messages each, observed by 60 observations and
5 reflections, the last 50 messages not observed yet), so the context has a memory block
and a tail. The clients are wrk (``apt-get install wrk``; a C load generator, so that the
clients' own CPU does not decide the figures on two cores): 32 keep-alive connections,
``--writers`` of them posting ``--bulk`` messages per request to a random conversation
back to back, the rest GETting ``/v1/conversations/{id}/context`` of a random one. The
observer runs in the Celery worker (on) or not at all (``MEMDESK_PIPELINE_ENABLED=0``,
off). RSS of the gunicorn and Celery processes is sampled every second.

Creates a database named bench_load_<timestamp> and drops it at the end; uses Redis
database ``--redis-db`` (flushed before each phase). Prints counts and timings only.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import psycopg

CONVERSATIONS = 16
CLIENTS = 32
TARGET_READS = 1000.0
TARGET_MESSAGES = 2000.0
TARGET_READ_P99_MS = 100.0
# Issue 26: under the mixed load, context reads keep at least half their quiet rate with a
# p99 within 3x of the quiet one, while writes keep half the rate of the writers alone.
TARGET_READ_RATIO = 0.5
TARGET_P99_RATIO = 3.0
TARGET_WRITE_RATIO = 0.5
# How long a baseline waits for the machine to go quiet after writes (the scan's backlog).
DRAIN_SECONDS = 180.0
WARM_UP_SECONDS = 3.0
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


# --- seeding (runs inside Django, in a subprocess of its own) ----------------------------------


def seed_memory(messages: int) -> None:
    """16 conversations as the pipeline leaves them; prints their ids."""
    sys.path.insert(0, str(harness.ROOT))
    import django

    django.setup()
    from seed import seed_long_conversation

    from tenancy.models import Workspace

    workspace = Workspace.objects.get(name="bench")
    for n in range(CONVERSATIONS):
        conversation = seed_long_conversation(
            workspace,
            title=f"load {n}",
            user_id=f"user-{n}",
            messages=messages,
            observations=60,
            reflections=5,
            recent=50,
            rng_seed=n,
        )
        print(conversation.id)


# --- clients: wrk ---------------------------------------------------------------------------------

READ_LUA = """
local ids = {IDS}
wrk.headers["Authorization"] = "Bearer KEY"
request = function()
  return wrk.format("GET", "/v1/conversations/" .. ids[math.random(#ids)] .. PATH)
end
"""

WRITE_LUA = """
local ids = {IDS}
local words = {WORDS}
wrk.headers["Authorization"] = "Bearer KEY"
wrk.headers["Content-Type"] = "application/json"
local function text()
  local parts = {"Customer says:"}
  for i = 1, math.random(8, 24) do parts[#parts + 1] = words[math.random(#words)] end
  return table.concat(parts, " ")
end
request = function()
  local messages = {}
  for i = 1, BULK do
    messages[i] = '{"role":"user","content":"' .. text() .. '"}'
  end
  local body = '{"messages":[' .. table.concat(messages, ",") .. ']}'
  local path = "/v1/conversations/" .. ids[math.random(#ids)] .. "/messages/bulk"
  return wrk.format("POST", path, nil, body)
end
"""


def _lua_list(values: list[str]) -> str:
    return "{" + ",".join(json.dumps(v) for v in values) + "}"


@dataclass
class WrkResult:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int  # non-2xx/3xx answers and socket errors

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _duration_ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS_MS[unit]


def parse_wrk(output: str) -> WrkResult:
    done = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", output)
    if done is None:
        raise RuntimeError("wrk printed no summary:\n" + output)
    seconds = _duration_ms(done.group(2) + done.group(3)) / 1000
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+([\d.]+(?:us|ms|s|m))", output, re.M))
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", output))
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    if socket:
        errors += sum(int(n) for n in socket.groups())
    return WrkResult(
        requests=int(done.group(1)),
        seconds=seconds,
        p50_ms=_duration_ms(percentiles["50"]) if "50" in percentiles else 0.0,
        p99_ms=_duration_ms(percentiles["99"]) if "99" in percentiles else 0.0,
        errors=errors,
    )


def wrk(
    port: int, script: Path | None, connections: int, seconds: float, path: str = "/"
) -> subprocess.Popen[str]:
    command = [
        "wrk",
        "--threads",
        "1",
        "--connections",
        str(connections),
        "--duration",
        f"{seconds:.0f}s",
        "--timeout",
        "30s",
        "--latency",
    ]
    if script is not None:
        command += ["--script", str(script)]
    command.append(f"http://127.0.0.1:{port}{path}")
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def run_wrk(*processes: subprocess.Popen[str]) -> list[WrkResult]:
    return [parse_wrk(process.communicate()[0]) for process in processes]


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

    def warm_index(self) -> int:
        """The sample after warm-up: a minute in, or a fifth of the run if shorter (each
        Celery child loads the PII model on its first scan, a web worker fills its
        bounded caches); growth after it is what the target "no growth" is about."""
        count = len(self.samples["web"])
        return min(60, count // 5)

    def line(self, name: str) -> str:
        values = self.samples[name]
        if not values:
            return "-"
        warm = values[min(self.warm_index(), len(values) - 1)]
        line = (
            f"{values[0]:.0f} -> {warm:.0f} (warm) -> {values[-1]:.0f} MB, "
            f"{values[-1] - warm:+.0f} MB after warm-up (max {max(values):.0f})"
        )
        if len(values) >= 240:
            # The worker swings by tens of MB as Observer runs come and go: the slope is
            # read from means of a minute, the middle one against the last one.
            middle = len(values) // 2
            mean_middle = sum(values[middle - 30 : middle + 30]) / 60
            mean_last = sum(values[-60:]) / 60
            line += f", second half {mean_last - mean_middle:+.0f} MB (means of a minute)"
        return line

    def timeline(self, name: str, every: int = 60) -> str:
        """RSS each ``every`` seconds, for long runs."""
        return " ".join(f"{v:.0f}" for v in self.samples[name][::every])


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in harness.child_pids(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


# The Procfile runs the worker and the scanner at this niceness: the web first.
PROCFILE_NICENESS = 10


@contextmanager
def celery_worker(env: dict[str, str], concurrency: int, nice: int = 0) -> Any:
    """The Procfile's worker line (at niceness ``nice``: the web first on a shared host),
    reading the scan's queue as well: one pool of ``concurrency`` doing all the work, as
    the figures before the scanner had its own process were measured."""
    log_path = Path(env["MEMDESK_VAR_DIR"]) / "celery.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                *(["nice", "-n", str(nice)] if nice else []),
                str(harness.ROOT / ".venv" / "bin" / "celery"),
                "-A",
                "config",
                "worker",
                "--loglevel",
                "WARNING",
                "--concurrency",
                str(concurrency),
                "--queues",
                "celery,governance,scan",
            ],
            cwd=harness.ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if nice:
        # As core.supervise --niceness does for the Procfile: the worker is in a session
        # of its own, and where the kernel shares the CPU between sessions first
        # (sched_autogroup) only the session's group's niceness counts against the web.
        with contextlib.suppress(OSError):
            Path(f"/proc/{process.pid}/autogroup").write_text(str(nice))
    try:
        time.sleep(3)
        harness.say(
            f"celery     pid {process.pid}, concurrency {concurrency}"
            + (f", niceness {nice}" if nice else "")
        )
        yield process
    finally:
        harness._stop(process)  # type: ignore[arg-type]
        harness.say(f"celery     pid {process.pid} stopped")


# --- the bench -----------------------------------------------------------------------------------


def seed(env: dict[str, str], messages: int) -> list[str]:
    result = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--seed", "--seed-messages", str(messages)],
        env=env,
        cwd=harness.ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.split()


def wait_for_empty_queue(broker_db: int, limit: float = 120.0) -> float:
    """Seconds until the broker's queue is empty, at most ``limit``."""
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


def cache_footprint(db: int) -> tuple[int, float]:
    """Keys in the cache's Redis database and the MB they hold (``MEMORY USAGE`` of each)."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=6379, db=db)
    keys = list(client.scan_iter(count=1000))
    pipeline = client.pipeline(transaction=False)
    for key in keys:
        pipeline.memory_usage(key)
    used = sum(size or 0 for size in pipeline.execute())
    return len(keys), used / 1024 / 1024


def _row(label: str, route: str, result: WrkResult, unit: str, per_request: int = 1) -> list[str]:
    return [
        label,
        route,
        f"{result.rate * per_request:,.0f} {unit}",
        f"{result.p50_ms:.1f}",
        f"{result.p99_ms:.1f}",
        str(result.errors),
    ]


def _against_targets(
    quiet: WrkResult, ingest: WrkResult, reads: WrkResult, writes: WrkResult
) -> list[str]:
    """Issue 26's ratios, each measured in this run: mixed against quiet."""

    def ratio(mixed: float, alone: float) -> float:
        return mixed / max(alone, 1e-9)

    read_rate = ratio(reads.rate, quiet.rate)
    read_p99 = ratio(reads.p99_ms, quiet.p99_ms)
    write_rate = ratio(writes.rate, ingest.rate)
    return [
        f"reads/s {read_rate:.2f}x quiet (>= {TARGET_READ_RATIO}x: "
        f"{'met' if read_rate >= TARGET_READ_RATIO else 'NOT met'})",
        f"read p99 {read_p99:.2f}x quiet (<= {TARGET_P99_RATIO:.0f}x: "
        f"{'met' if read_p99 <= TARGET_P99_RATIO else 'NOT met'})",
        f"msg/s {write_rate:.2f}x writers alone (>= {TARGET_WRITE_RATIO}x: "
        f"{'met' if write_rate >= TARGET_WRITE_RATIO else 'NOT met'})",
    ]


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
    for db in (args.redis_db, args.redis_db + 1):
        subprocess.run(["redis-cli", "-n", str(db), "FLUSHDB"], check=False, capture_output=True)
    label = "on" if observer else "off"
    conversations = seed(env, args.seed_messages)
    harness.say(f"seeded     {len(conversations)} conversations x {args.seed_messages} messages")
    ids = _lua_list(conversations)
    scripts = {}
    for name, template, extra in (
        ("read", READ_LUA, {"PATH": json.dumps("/context")}),
        ("write", WRITE_LUA, {"BULK": str(args.bulk), "{WORDS}": _lua_list(WORDS)}),
    ):
        text = template.replace("{IDS}", ids).replace("KEY", raw_key)
        for placeholder, value in extra.items():
            text = text.replace(placeholder, value)
        scripts[name] = var_dir / f"{name}.lua"
        scripts[name].write_text(text)
    rows: list[list[str]] = []
    ledger_before = _ledger_rows(env["DATABASE_URL"])
    with (
        harness.gunicorn(
            env, workers=args.web_workers, worker_class=args.worker_class, threads=args.threads
        ) as server,
        celery_worker(env, args.worker_concurrency, args.worker_nice) as worker,
    ):
        # Baselines: /healthz, the writers alone, and the context of conversations no one
        # writes to. Between runs the machine is let go quiet: the scanner (and the
        # Observer) finish what the writes left them, so no run pays for another's.
        # Warm-up: each web worker imports what a write needs, and each Celery child
        # loads the PII model on its first scan (seconds of a core) before anything is
        # measured.
        run_wrk(wrk(server.port, scripts["write"], args.writers, WARM_UP_SECONDS))
        harness.wait_for_quiet_machine(max_wait=DRAIN_SECONDS)
        [healthz] = run_wrk(wrk(server.port, None, CLIENTS, args.baseline, "/healthz"))
        [ingest] = run_wrk(wrk(server.port, scripts["write"], args.writers, args.baseline))
        harness.wait_for_quiet_machine(max_wait=DRAIN_SECONDS)
        [quiet] = run_wrk(wrk(server.port, scripts["read"], CLIENTS - args.writers, args.baseline))
        harness.wait_for_quiet_machine(max_wait=DRAIN_SECONDS)
        rows.append(_row(label, "/healthz", healthz, "req/s"))
        rows.append(
            _row(label, f"writes, quiet: bulk POST x{args.bulk}", ingest, "msg/s", args.bulk)
        )
        rows.append(_row(label, "context, quiet (cached)", quiet, "req/s"))
        harness.say(
            f"baseline   /healthz {healthz.rate:,.0f}/s, quiet cached context {quiet.rate:,.0f}/s"
            f" ({healthz.rate / max(quiet.rate, 1e-9):.2f}x slower than /healthz), writers "
            f"alone {ingest.rate * args.bulk:,.0f} msg/s"
        )
        with RssSampler(server.process.pid, worker.pid) as rss:
            reads, writes = run_wrk(
                wrk(server.port, scripts["read"], CLIENTS - args.writers, args.seconds),
                wrk(server.port, scripts["write"], args.writers, args.seconds),
            )
        rows.append(
            _row(label, f"mixed: context GET ({CLIENTS - args.writers} conns)", reads, "reads/s")
        )
        rows.append(
            _row(
                label,
                f"mixed: bulk POST x{args.bulk} ({args.writers} conns)",
                writes,
                "msg/s",
                args.bulk,
            )
        )
        harness.say(
            f"mixed      observer {label}: {reads.rate:,.0f} reads/s (p99 {reads.p99_ms:.1f} ms), "
            f"{writes.rate * args.bulk:,.0f} msg/s (p99 {writes.p99_ms:.1f} ms); "
            f"RSS web {rss.line('web')}, worker {rss.line('worker')}"
        )
        for line in _against_targets(quiet, ingest, reads, writes):
            harness.say(f"target     observer {label}: {line}")
            rows.append([label, "target", line, "", "", ""])
        if args.seconds >= 120:
            for name in ("web", "worker"):
                harness.say(f"rss/min    {name}: {rss.timeline(name)} MB")
        rows.append([label, "RSS gunicorn workers", rss.line("web"), "", "", ""])
        rows.append([label, "RSS celery worker", rss.line("worker"), "", "", ""])
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        connection.request(
            "GET",
            f"/v1/conversations/{conversations[0]}/context",
            headers={"Authorization": f"Bearer {raw_key}"},
        )
        size = len(connection.getresponse().read())
        rows.append([label, "context body after the run", f"{size / 1024:,.0f} KB", "", "", ""])
        keys, megabytes = cache_footprint(args.redis_db)
        rows.append(
            [label, "cache after the run", f"{keys:,} keys, {megabytes:,.0f} MB", "", "", ""]
        )
        harness.say(f"cache      {keys:,} keys, {megabytes:,.0f} MB in Redis after the run")
        drained = wait_for_empty_queue(args.redis_db + 1, limit=5.0)
        harness.say(f"queue      {drained:.0f} s to drain after the run (at most 5 s waited)")
    # The servers have stopped (a clean stop writes each worker's last batch): every
    # context read they answered is a row of the read ledger. Counted from the access log:
    # wrk does not count the requests in flight when a run ends, which are answered too.
    served = _context_reads_answered(var_dir / f"gunicorn-{server.port}.log")
    ledger = _ledger_rows(env["DATABASE_URL"]) - ledger_before
    line = (
        f"{ledger:,} rows for {served:,} context reads answered (lost {served - ledger:,}); "
        f"{reads.rate:,.0f} rows/s during the mixed run"
    )
    harness.say(f"ledger     observer {label}: {line}")
    rows.append([label, "read ledger", line, "", "", ""])
    return rows


_CONTEXT_READ_LINE = re.compile(r'"GET /v1/conversations/[0-9a-f-]+/context HTTP/1\.1" (200|304) ')


def _context_reads_answered(log_path: Path) -> int:
    """The context reads the server's access log says it answered (200 or 304)."""
    with log_path.open(errors="replace") as log:
        return sum(1 for line in log if _CONTEXT_READ_LINE.search(line))


def _ledger_rows(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as connection:
        row = connection.execute("SELECT count(*) FROM governance_contextread").fetchone()
    return int(row[0]) if row else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="the mixed run")
    parser.add_argument("--baseline", type=float, default=10.0, help="each baseline run")
    parser.add_argument("--observer", choices=["on", "off", "both"], default="both")
    parser.add_argument("--writers", type=int, default=8, help="of the 32 connections")
    parser.add_argument("--bulk", type=int, default=10, help="messages per write")
    parser.add_argument("--seed-messages", type=int, default=2000, help="per conversation")
    parser.add_argument("--web-workers", type=int, default=2)
    parser.add_argument("--worker-class", choices=["sync", "gthread"], default="sync")
    parser.add_argument("--threads", type=int, default=1, help="per gthread web worker")
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=PROCFILE_NICENESS,
        help=f"run the Celery worker at this niceness (the Procfile's: {PROCFILE_NICENESS})",
    )
    parser.add_argument("--worker-concurrency", type=int, default=2)
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument(
        "--context-max-tokens",
        type=int,
        default=None,
        help="the workspace's context budget (0: none; default: a new workspace's, 32,000)",
    )
    parser.add_argument("--seed", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed:
        seed_memory(args.seed_messages)
        return 0
    if harness.wrk_missing():
        return 2
    harness.stop_on_sigterm()
    harness.say(harness.machine_line())
    harness.say(
        f"load       {CLIENTS} connections: {args.writers} writers (x{args.bulk}), "
        f"{CLIENTS - args.writers} context readers, {args.seconds:.0f} s"
        + {None: ", a new workspace's context budget", 0: ", no context budget"}.get(
            args.context_max_tokens, f", context budget {args.context_max_tokens} tokens"
        )
    )
    rows: list[list[str]] = []
    for observer in {"on": [True], "off": [False], "both": [True, False]}[args.observer]:
        with harness.fresh_database("bench_load") as url, harness.scratch_dir() as var_dir:
            env = harness.django_env(url, var_dir)
            raw_key = harness.prepare_database(env)
            if args.context_max_tokens is not None:
                harness.manage(
                    env,
                    "shell",
                    "-c",
                    "from tenancy.models import Workspace; "
                    f"Workspace.objects.filter(name='bench').update("
                    f"context_max_tokens={args.context_max_tokens or None})",
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
