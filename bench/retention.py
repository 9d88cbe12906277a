"""Retention sweep: delete 1,000,000 expired messages on PostgreSQL, run the way the
worker runs it, beside a raw batched ``DELETE ... WHERE created_at < cutoff``.

    .venv/bin/python bench/retention.py                          # the recorded configuration
    .venv/bin/python bench/retention.py --batch-sizes 1000,2000,5000,10000,20000
    .venv/bin/python bench/retention.py --messages 100000        # a quick look
    .venv/bin/python bench/retention.py --messages 200000 --bare # against one bare DELETE
    .venv/bin/python bench/retention.py --messages 200000 --batch-sizes 20000 --profile /tmp/p
                                                                 # cProfile of the worker

Targets (retention issue): the sweep deletes 1,000,000 expired messages in at most 60 s,
with the worker's peak memory at most 300 MB.

Method. A fresh database (migrated) gets a workspace, 1,000 conversations and, with
``INSERT ... SELECT generate_series``, 1,000 expired messages (400 days old) plus 100
recent ones per conversation (1.1 M rows; the recent ones must survive), then ANALYZE.
It becomes a template: each run gets its own copy (``CREATE DATABASE ... TEMPLATE``), so
every run starts from the same rows. A default policy keeps messages 30 days.

- sweep: a separate Python process (as a Celery worker would be) sets up Django with
  the production settings module and DEBUG off, and calls
  ``governance.retention.sweep.retention_sweep`` on a queued sweep, with every receipt,
  hold check and progress update it does in production. Seconds are its wall time for
  the call; peak memory is the process's peak RSS (``ru_maxrss``, Django and all).
- raw: psycopg in autocommit, ``DELETE FROM memory_message WHERE id IN (SELECT id FROM
  memory_message WHERE created_at < cutoff LIMIT n)`` until nothing is left: the floor
  for batched deletion without receipts, hold checks or per-conversation policies.
- bare (``--bare``): one ``DELETE FROM memory_message WHERE created_at < cutoff`` in one
  statement, the floor the production issue measures the sweep against (the ratio
  printed is sweep seconds / bare seconds).

Creates databases named bench_retention_<timestamp>[...] and drops them at the end.
Prints ids and counts only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import harness
import psycopg
from psycopg import sql

TARGET_SECONDS = 60.0
TARGET_PEAK_MB = 300.0
CONVERSATIONS = 1_000
RECENT_PER_CONVERSATION = 100


# --- the worker side (a child process) ----------------------------------------------------------


def worker(sweep_id: int, batch_size: int, profile_to: str = "") -> None:
    """Run one sweep as the Celery task does, and report time and peak memory as JSON;
    with ``profile_to``, under cProfile, its stats written there (``python -m pstats``)."""
    sys.path.insert(0, str(harness.ROOT))
    import django

    django.setup()
    from governance.retention.sweep import retention_sweep

    profiler = None
    if profile_to:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.perf_counter()
    sweep = retention_sweep(sweep_id=sweep_id, batch_size=batch_size)
    seconds = time.perf_counter() - started
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_to)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    print(
        json.dumps(
            {
                "status": sweep.status,
                "counts": sweep.counts,
                "done": sweep.done,
                "total": sweep.total,
                "seconds": seconds,
                "peak_mb": peak_kb / 1024,
            }
        )
    )


def queue_sweep(env: dict[str, str]) -> int:
    """Create the policy (if missing) and queue a sweep, through the services."""
    code = (
        "import django; django.setup()\n"
        "from governance.models import RetentionPolicy\n"
        "from governance.retention.plan import retention_sweep_request\n"
        "from governance.retention.policies import retention_policy_create\n"
        "from core.actors import SYSTEM_ACTOR\n"
        "from tenancy.models import Workspace\n"
        "ws = Workspace.objects.get(name='bench')\n"
        "if not RetentionPolicy.objects.filter(workspace=ws).exists():\n"
        "    retention_policy_create(workspace=ws, actor=SYSTEM_ACTOR, name='default',"
        " message_days=30)\n"
        "print(retention_sweep_request(workspace=ws, actor=SYSTEM_ACTOR).pk)\n"
    )
    result = subprocess.run(
        [str(harness.PYTHON), "-c", code],
        cwd=harness.ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return int(result.stdout.strip().splitlines()[-1])


# --- the bench side -------------------------------------------------------------------------------


def populate(url: str, expired_per_conversation: int) -> None:
    started = time.monotonic()
    old = datetime.now(UTC) - timedelta(days=400)
    with psycopg.connect(url, autocommit=True) as db:
        (workspace_id,) = db.execute(
            "SELECT id FROM memory_workspace WHERE name = 'bench'"
        ).fetchone()
        per = expired_per_conversation + RECENT_PER_CONVERSATION
        db.execute(
            """
            INSERT INTO memory_conversation (id, workspace_id, user_id, title, metadata, tags,
                created_at, updated_at, last_seq, memory_version)
            SELECT gen_random_uuid(), %s, 'user-' || n, '', '{}', '[]', %s, now(), %s, 0
            FROM generate_series(1, %s) AS n
            """,
            [workspace_id, old, per, CONVERSATIONS],
        )
        # Expired rows first (seq 1..expired), then recent ones, as a real history grows.
        # The recall index (memory/search/) is filled by its triggers as the rows go in,
        # as for any write: the sweep deletes from it too.
        db.execute(
            """
            INSERT INTO memory_message (id, conversation_id, seq, role, content, tool_name,
                tool_call_id, token_count, created_at, metadata, name)
            SELECT gen_random_uuid(), c.id, s.seq,
                CASE WHEN s.seq %% 2 = 0 THEN 'assistant' ELSE 'user' END,
                'Message ' || s.seq || ': the order 4711 ships on Tuesday to the Berlin office.',
                '', '', 16,
                CASE WHEN s.seq <= %(expired)s
                    THEN %(old)s + make_interval(secs => s.seq)
                    ELSE now() - make_interval(secs => %(per)s - s.seq) END,
                '{}', ''
            FROM memory_conversation AS c CROSS JOIN generate_series(1, %(per)s) AS s(seq)
            """,
            {"expired": expired_per_conversation, "old": old, "per": per},
        )
        db.execute("VACUUM ANALYZE")
        (rows,) = db.execute("SELECT count(*) FROM memory_message").fetchone()
    harness.say(f"populated  {rows:,} messages in {time.monotonic() - started:.1f} s")


def copy_of(template: str, name: str) -> str:
    with psycopg.connect(harness.PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    return harness._database_url(name)


def drop(name: str) -> None:
    with psycopg.connect(harness.PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def settle() -> None:
    """A checkpoint, then a quiet machine: each timed run starts with nothing of the
    population or of an earlier run left to write, and pays for the first change of each
    page since the checkpoint (a full page image in the WAL) like every other run.
    Without it the sweep, run first, paid for the population's checkpoint."""
    with psycopg.connect(harness.PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute("CHECKPOINT")
    harness.wait_for_quiet_machine()


def run_sweep(
    template: str, var_dir: Path, batch_size: int, profile_to: str = ""
) -> dict[str, object]:
    name = f"{template}_s{batch_size}"
    url = copy_of(template, name)
    try:
        env = harness.django_env(url, var_dir)
        sweep_id = queue_sweep(env)
        settle()
        result = subprocess.run(
            [str(harness.PYTHON), __file__, "worker", str(sweep_id), str(batch_size), profile_to],
            cwd=harness.ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        outcome = json.loads(result.stdout.strip().splitlines()[-1])
        with psycopg.connect(url) as db:
            (left,) = db.execute(
                "SELECT count(*) FROM memory_message WHERE created_at < now() - interval '30 days'"
            ).fetchone()
            (kept,) = db.execute("SELECT count(*) FROM memory_message").fetchone()
            (receipts,) = db.execute(
                "SELECT count(*) FROM governance_auditevent WHERE action LIKE 'retention.%%'"
            ).fetchone()
        outcome.update({"expired_left": left, "rows_left": kept, "receipts": receipts})
        return outcome
    finally:
        drop(name)


def run_raw(template: str, batch_size: int) -> dict[str, object]:
    name = f"{template}_raw{batch_size}"
    url = copy_of(template, name)
    try:
        settle()
        deleted = 0
        with psycopg.connect(url, autocommit=True) as db:
            cutoff = datetime.now(UTC) - timedelta(days=30)
            started = time.perf_counter()
            while True:
                cursor = db.execute(
                    "DELETE FROM memory_message WHERE id IN (SELECT id FROM memory_message "
                    "WHERE created_at < %s LIMIT %s)",
                    [cutoff, batch_size],
                )
                if cursor.rowcount == 0:
                    break
                deleted += cursor.rowcount
            seconds = time.perf_counter() - started
        return {"deleted": deleted, "seconds": seconds}
    finally:
        drop(name)


def run_bare(template: str) -> dict[str, object]:
    name = f"{template}_bare"
    url = copy_of(template, name)
    try:
        settle()
        with psycopg.connect(url, autocommit=True) as db:
            cutoff = datetime.now(UTC) - timedelta(days=30)
            started = time.perf_counter()
            cursor = db.execute("DELETE FROM memory_message WHERE created_at < %s", [cutoff])
            seconds = time.perf_counter() - started
        return {"deleted": cursor.rowcount, "seconds": seconds}
    finally:
        drop(name)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000, help="expired messages")
    parser.add_argument("--batch-sizes", default="5000", help="sweep batch sizes, comma-separated")
    parser.add_argument("--raw-batch-size", type=int, default=5000)
    parser.add_argument(
        "--bare", action="store_true", help="also time one unbatched DELETE of the same rows"
    )
    parser.add_argument(
        "--profile",
        default="",
        metavar="FILE",
        help="run the sweep worker under cProfile and write its stats to FILE",
    )
    args = parser.parse_args()
    harness.stop_on_sigterm()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    per_conversation = max(1, args.messages // CONVERSATIONS)
    expired = per_conversation * CONVERSATIONS

    harness.say(harness.machine_line())
    with harness.fresh_database("bench_retention") as url, harness.scratch_dir() as var_dir:
        template = url.rpartition("/")[2]
        harness.prepare_database(harness.django_env(url, var_dir))
        populate(url, per_conversation)
        rows = []
        try:
            for batch_size in batch_sizes:
                outcome = run_sweep(template, var_dir, batch_size, args.profile)
                deleted = outcome["counts"]["messages"]  # type: ignore[index]
                assert deleted == expired, outcome
                assert outcome["expired_left"] == 0, outcome
                assert outcome["rows_left"] == CONVERSATIONS * RECENT_PER_CONVERSATION, outcome
                seconds = float(outcome["seconds"])  # type: ignore[arg-type]
                peak = float(outcome["peak_mb"])  # type: ignore[arg-type]
                rows.append(
                    [
                        f"sweep, batch {batch_size:,}",
                        f"{deleted:,}",
                        f"{seconds:.1f}",
                        f"{deleted / seconds:,.0f}",
                        f"{peak:.0f}",
                        f"{seconds / TARGET_SECONDS:.2f}",
                        f"{peak / TARGET_PEAK_MB:.2f}",
                        f"{outcome['receipts']}",
                    ]
                )
                harness.say(f"sweep      batch {batch_size}: {seconds:.1f} s, {peak:.0f} MB peak")
            raw = run_raw(template, args.raw_batch_size)
            assert raw["deleted"] == expired, raw
            raw_seconds = float(raw["seconds"])  # type: ignore[arg-type]
            rows.append(
                [
                    f"raw DELETE, batch {args.raw_batch_size:,}",
                    f"{expired:,}",
                    f"{raw_seconds:.1f}",
                    f"{expired / raw_seconds:,.0f}",
                    "-",
                    f"{raw_seconds / TARGET_SECONDS:.2f}",
                    "-",
                    "0",
                ]
            )
            if args.bare:
                bare = run_bare(template)
                assert bare["deleted"] == expired, bare
                bare_seconds = float(bare["seconds"])  # type: ignore[arg-type]
                rows.append(
                    [
                        "bare DELETE, one statement",
                        f"{expired:,}",
                        f"{bare_seconds:.2f}",
                        f"{expired / bare_seconds:,.0f}",
                        "-",
                        f"{bare_seconds / TARGET_SECONDS:.2f}",
                        "-",
                        "0",
                    ]
                )
                for row in rows[: len(batch_sizes)]:
                    harness.say(f"{row[0]}: {float(row[2]) / bare_seconds:.1f}x the bare DELETE")
        finally:
            with psycopg.connect(harness.PG_ADMIN_URL, autocommit=True) as admin:
                for (name,) in admin.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE %s",
                    [f"{template}\\_%"],
                ).fetchall():
                    drop(name)
    harness.say()
    harness.say(
        harness.table(
            [
                "run",
                "deleted",
                "seconds",
                "rows/s",
                "peak MB",
                "s / 60 s",
                "MB / 300 MB",
                "receipts",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
