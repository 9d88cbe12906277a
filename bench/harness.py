"""Plumbing shared by the benchmarks: a throwaway PostgreSQL database, a gunicorn server
on it, CPU accounting per process group, and latency percentiles.

Everything here cleans up after itself: the server is stopped and the database dropped
on normal exit, on an error and on Ctrl-C (SIGTERM is turned into the same path).
"""

from __future__ import annotations

import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv" / "bin" / "python"
GUNICORN = ROOT / ".venv" / "bin" / "gunicorn"
PG_ADMIN_URL = os.environ.get("BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def stop_on_sigterm() -> None:
    """Make SIGTERM unwind like Ctrl-C, so every ``finally`` below still runs."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def client_process_signals() -> None:
    """In a load-generator process: leave Ctrl-C to the bench, which stops the clients
    itself (by SIGTERM, which then just ends them) before it stops the server."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def wrk_missing() -> bool:
    """Whether wrk (the load generator of the benches that need one) is missing; says how
    to install it."""
    if shutil.which("wrk") is not None:
        return False
    say("wrk is not installed: apt-get install wrk")
    return True


def run_main(main: Callable[[], int]) -> None:
    """Run a bench's main; on Ctrl-C or SIGTERM everything has been cleaned up by the time
    KeyboardInterrupt gets here, so say so instead of printing a traceback."""
    stop_on_sigterm()
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        say("interrupted: server stopped, database dropped")
        sys.exit(130)


def say(text: str = "") -> None:
    print(text, flush=True)


# --- database ---------------------------------------------------------------------------


def _database_url(name: str) -> str:
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


@contextmanager
def fresh_database(prefix: str) -> Iterator[str]:
    """Create ``<prefix>_<timestamp>``, yield its URL, and drop it whatever happens."""
    name = f"{prefix}_{datetime.now():%Y%m%d_%H%M%S}_{secrets.token_hex(2)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    say(f"database   {name} (created)")
    try:
        yield _database_url(name)
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        say(f"database   {name} (dropped)")


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A var/ directory of the bench's own, so the server's broker files and secret key
    never land in the checkout's var/ (where a running worker would pick tasks up)."""
    with tempfile.TemporaryDirectory(prefix="memdesk-bench-") as path:
        yield Path(path)


@contextmanager
def scratch_django(db: str = "sqlite") -> Iterator[Path]:
    """Django set up in this process on a throwaway database (SQLite, or with
    ``db="postgresql"`` a fresh PostgreSQL database, dropped after), migrated, in a
    ``scratch_dir`` (yielded); the connection is closed before the folder and the database
    go. For the benches that call the services in-process rather than through a server."""
    with ExitStack() as stack:
        folder = stack.enter_context(scratch_dir())
        url = (
            stack.enter_context(fresh_database("bench_scratch"))
            if db == "postgresql"
            else f"sqlite:///{folder / 'bench.sqlite3'}"
        )
        os.environ.update(django_env(url, folder, CELERY_BROKER_URL="memory://", LOG_LEVEL="ERROR"))
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        try:
            yield folder
        finally:
            connection.close()


def django_env(database_url: str, var_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "MEMDESK_VAR_DIR": str(var_dir),
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "config.settings.base",
            "DJANGO_DEBUG": "0",
            "SECRET_KEY": "bench-" + secrets.token_urlsafe(40),
            "LOG_LEVEL": "WARNING",
            # The bench runs on its own; a leftover variable must not point it elsewhere.
            "CACHE_URL": os.environ.get("BENCH_CACHE_URL", ""),
            **extra,
        }
    )
    return env


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [str(PYTHON), "manage.py", *args],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout.strip()


def prepare_database(env: dict[str, str], workspace: str = "bench") -> str:
    """Migrate and create an API key; return the raw key."""
    started = time.monotonic()
    manage(env, "migrate", "--noinput", "-v", "0")
    raw_key = manage(env, "create_api_key", "--workspace", workspace, "--name", "bench")
    say(f"migrated   in {time.monotonic() - started:.1f} s, API key created")
    return raw_key


# --- server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Server:
    port: int
    process: subprocess.Popen[bytes]
    workers: int
    worker_class: str
    threads: int
    database_url: str

    def worker_pids(self) -> list[int]:
        return child_pids(self.process.pid)

    @property
    def label(self) -> str:
        if self.worker_class == "gthread":
            return f"{self.workers} gthread workers x {self.threads} threads"
        return f"{self.workers} {self.worker_class} workers"


SERVING_CONFIG = ROOT / "config" / "gunicorn.py"


def gunicorn_command(
    port: int, workers: int, worker_class: str, threads: int, config: Path = SERVING_CONFIG
) -> list[str]:
    # The Procfile's web line (its config file: access log, a worker's collector frozen
    # once Django is loaded, tasks sent and the read ledger written after the response),
    # with the bench's port and worker settings; the access log goes to the server's log
    # file. ``config``: another config file, for a bench's baseline.
    command = [
        str(GUNICORN),
        "config.wsgi",
        "-c",
        str(config),
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        worker_class,
        "--log-level",
        "warning",
    ]
    if worker_class == "gthread":
        command += ["--threads", str(threads)]
    return command


@contextmanager
def gunicorn(
    env: dict[str, str],
    *,
    workers: int,
    worker_class: str = "sync",
    threads: int = 1,
    config: Path = SERVING_CONFIG,
) -> Iterator[Server]:
    port = free_port()
    # The server's own output (the app's warnings) goes to a log beside the broker files,
    # so the bench's figures stay readable; its tail is shown if the server fails.
    log_path = Path(env["MEMDESK_VAR_DIR"]) / f"gunicorn-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            gunicorn_command(port, workers, worker_class, threads, config),
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            # Its own session, so a Ctrl-C in the terminal reaches the bench first and the
            # bench stops the server in order rather than both racing.
            start_new_session=True,
        )
    server = Server(port, process, workers, worker_class, threads, env["DATABASE_URL"])
    try:
        try:
            _wait_until_up(server)
        except RuntimeError:
            say(log_path.read_text(errors="replace")[-3000:])
            raise
        say(f"gunicorn   pid {process.pid}, {server.label}, port {port}")
        yield server
    finally:
        _stop(process)
        errors = log_path.read_text(errors="replace").count("Traceback")
        say(f"gunicorn   pid {process.pid} stopped" + (f", {errors} tracebacks" if errors else ""))


def _wait_until_up(server: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with code {server.process.returncode}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=2)
            connection.request("GET", "/healthz")
            if connection.getresponse().status == 200:
                connection.close()
                # Every worker must have booted, or the first timed requests pay for it.
                if len(server.worker_pids()) >= server.workers:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError("gunicorn did not answer /healthz within 30 s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)  # gunicorn's graceful shutdown of its workers
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        # The master is ours and leads its own process group: end the group it made.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


# --- CPU accounting -----------------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def all_process_cpu() -> dict[int, tuple[str, float]]:
    """pid -> (command name, CPU seconds) for every process on the machine."""
    processes = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rpartition(")")[2].split()
        processes[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return processes


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, summed over cores."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return (total - idle) / CLOCK_TICKS, total / CLOCK_TICKS


def wait_for_quiet_machine(*, busy_below: float = 0.15, max_wait: float = 15.0) -> float:
    """Other work on the machine (a test run, a build) steals the cores the bench measures.
    Wait up to ``max_wait`` seconds for a one-second window under ``busy_below``; return
    the last window's busy fraction so the report can say how quiet the machine was."""
    cores = os.cpu_count() or 1
    deadline = time.monotonic() + max_wait
    while True:
        busy_before, total_before = machine_busy_seconds()
        time.sleep(1.0)
        busy_after, total_after = machine_busy_seconds()
        fraction = (busy_after - busy_before) / max(total_after - total_before, 1e-9)
        if fraction < busy_below or time.monotonic() > deadline:
            break
    if fraction >= busy_below:
        say(f"WARNING    the machine is {100 * fraction:.0f}% busy before the run ({cores} cores)")
    return fraction


def _descendants(pid: int) -> set[int]:
    found, todo = set(), [pid]
    while todo:
        for child in child_pids(todo.pop()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@dataclass
class CpuUse:
    """CPU seconds spent during a timed window, by who spent them."""

    server: float
    postgres: float
    others: list[tuple[str, float]]  # processes that are not the bench's, busiest first
    machine: float

    def line(self, wall: float, client: float) -> str:
        cores = os.cpu_count() or 1
        others = ", ".join(f"{name} {seconds:.1f}" for name, seconds in self.others[:3])
        unattributed = self.machine - self.server - self.postgres - client
        unattributed -= sum(seconds for _, seconds in self.others)
        return (
            f"CPU over {wall:.1f} s on {cores} cores ({cores * wall:.1f} core-s): "
            f"gunicorn {self.server:.1f}, postgres {self.postgres:.1f}, "
            f"load generator {client:.1f}, other processes {others or 'none'}, "
            f"kernel/unattributed {max(unattributed, 0.0):.1f}; "
            f"machine busy {100 * self.machine / (cores * wall):.0f}%"
        )


class CpuMonitor:
    """Who used the CPU while the block ran: samples every process twice a second, so
    short-lived ones (another user's test run) are counted too, not only survivors."""

    def __init__(self, server: Server, interval: float = 0.5) -> None:
        self.server_pid = server.process.pid
        self.database = server.database_url.rpartition("/")[2]
        self.interval = interval
        self.postgres_titles: dict[int, str] = {}
        self.before: dict[int, tuple[str, float]] = {}
        self.seen: dict[int, tuple[str, float]] = {}
        self.bench_pids: set[int] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        self.bench_pids |= _descendants(os.getpid())
        processes = all_process_cpu()
        for pid, (name, _) in processes.items():
            if name == "postgres" and pid not in self.postgres_titles:
                try:
                    title = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    title = b""
                self.postgres_titles[pid] = title.decode(errors="replace")
        self.seen.update(processes)

    def _is_other_database(self, pid: int) -> bool:
        """A backend serving another database (someone else's work on this server);
        background processes (WAL writer, checkpointer) count as ours."""
        title = self.postgres_titles.get(pid, "")
        is_backend = "127.0.0.1(" in title or "[local]" in title
        return is_backend and f" {self.database} " not in title

    def _run(self) -> None:
        while not self.stopping.wait(self.interval):
            self._sample()

    def __enter__(self) -> CpuMonitor:
        self._sample()
        self.before = dict(self.seen)
        self.machine_before = machine_busy_seconds()[0]
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self.thread.join()
        self._sample()
        self.machine_after = machine_busy_seconds()[0]

    def use(self) -> CpuUse:
        server_pids = {self.server_pid, *_descendants(self.server_pid)}
        bench_pids = ({os.getpid()} | self.bench_pids) - server_pids
        server = postgres = 0.0
        others: dict[str, float] = {}
        for pid, (name, seconds) in self.seen.items():
            spent = seconds - self.before.get(pid, (name, 0.0))[1]
            if spent <= 0 or pid in bench_pids:
                continue
            if pid in server_pids:
                server += spent
            elif name == "postgres" and self._is_other_database(pid):
                others["postgres, other databases"] = (
                    others.get("postgres, other databases", 0.0) + spent
                )
            elif name == "postgres":
                postgres += spent
            else:
                others[name] = others.get(name, 0.0) + spent
        return CpuUse(
            server=server,
            postgres=postgres,
            others=sorted(others.items(), key=lambda item: -item[1]),
            machine=self.machine_after - self.machine_before,
        )


# --- figures ------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    if not sorted_values:
        return float("nan")
    rank = max(int(round(fraction * len(sorted_values) + 0.5)) - 1, 0)
    return sorted_values[min(rank, len(sorted_values) - 1)]


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in (headers, ["-" * w for w in widths], *rows)
    ]
    return "\n".join(line.rstrip() for line in lines)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return "unknown"


def machine_line() -> str:
    return f"machine    {os.cpu_count()} cores, {cpu_model()}, Python {sys.version.split()[0]}"
