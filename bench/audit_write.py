"""What keyed audit chains and signed checkpoints cost a write: ``audit_record`` per event,
before (plain SHA-256, no checkpoint) and after (HMAC-SHA256, and a signed checkpoint
line appended to the sink once the transaction commits), and ``audit_chain_verify`` per
event.

    /work/main/.venv/bin/python bench/audit_write.py                 # SQLite and PostgreSQL
    /work/main/.venv/bin/python bench/audit_write.py --databases sqlite --events 200

Method. "before" is the source tree as it was just before keyed chains (``git archive``
of the parent of the commit that added governance/checkpoints.py, or ``--before REV``),
"after" is this checkout. Each runs in a child process of its own (Django set up with
the base settings, DEBUG off, a fresh database migrated by the tree's own migrations, a
temporary var directory and checkpoint file). The parent then asks them, in turn, for
rounds of ``--events`` calls of ``audit_record``, each call its own committed
transaction, with a realistic payload (an observation edit: ~300 characters before and
after, a reason); the after child runs three variants in turn:

  file    the default: HMAC, and a checkpoint line appended to the file after commit
  null    HMAC, the checkpoint line built and signed but not stored (a sink that drops it)
  fsync   as file, with MEMDESK_AUDIT_CHECKPOINT_FSYNC=1

Rounds alternate between the variants so that whatever else the machine does falls on
all alike; the figure is the wall time per event of the best round and the median round.
Then each child verifies its chain once (``audit_chain_verify``: all events, and in
the after tree every checkpoint line too). Prints timings and counts only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402
from harness import say, table  # noqa: E402

VARIANTS = {"before": ["before"], "after": ["file", "null", "fsync"]}
LABELS = {
    "before": "before: plain SHA-256, no checkpoint",
    "file": "after: HMAC + checkpoint line per commit (default)",
    "null": "after: HMAC, checkpoint signed, not stored",
    "fsync": "after: HMAC + checkpoint line, fsync",
}

# --- the child: one source tree, one database ---------------------------------------------------


class NullSink:
    """Signs like the real sink is fed, stores nothing: isolates the file write."""

    def append(self, line: str) -> None:
        pass

    def lines(self) -> Iterator[str]:
        return iter(())


def child(tree: str) -> None:
    sys.path.insert(0, tree)
    os.chdir(tree)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from core.actors import SYSTEM_ACTOR

    try:
        from governance.audit.verify import audit_chain_verify
        from governance.audit.writer import audit_record
        from tenancy.services import workspace_get_or_create
    except ImportError:  # the "before" tree, older than the audit and tenancy packages
        from governance.audit import audit_record  # type: ignore[no-redef]
        from governance.selectors import audit_chain_verify  # type: ignore[no-redef]
        from memory.services import workspace_get_or_create  # type: ignore[no-redef]

    call_command("migrate", verbosity=0, interactive=False)
    text = (
        "The customer said the replacement router arrived on Tuesday but the power adapter "
        "was missing; they were promised a courier pickup for the faulty unit on Friday "
        "between 9 and 12, and asked that the invoice be sent to the billing address on "
        "file rather than the shipping address. Ticket 48213 stays open until then."
    )
    before = {"text": text, "priority": "medium", "version": 3, "tags": ["hardware"]}
    after = {**before, "text": text.replace("Friday", "Monday"), "version": 4}

    def run(variant: str, events: int) -> dict[str, float]:
        if variant != "before":
            settings.MEMDESK_AUDIT_CHECKPOINT_SINK = (
                "__main__.NullSink"
                if variant == "null"
                else "governance.audit.checkpoints.FileCheckpointSink"
            )
            settings.MEMDESK_AUDIT_CHECKPOINT_FSYNC = variant == "fsync"
        workspace = workspace_get_or_create(name=f"bench-{variant}")
        started = time.perf_counter()
        for i in range(events):
            audit_record(
                workspace_id=workspace.pk,
                actor=SYSTEM_ACTOR,
                action="observation.update",
                target_type="observation",
                target_id=str(i),
                before=before,
                after=after,
                reason="the customer corrected the pickup day",
            )
        return {"per_event_us": (time.perf_counter() - started) / events * 1e6}

    def verify(variant: str) -> dict[str, float]:
        if variant != "before":
            settings.MEMDESK_AUDIT_CHECKPOINT_SINK = (
                "governance.audit.checkpoints.FileCheckpointSink"
            )
        workspace = workspace_get_or_create(name=f"bench-{variant}")
        started = time.perf_counter()
        report = audit_chain_verify(workspace_id=workspace.pk)
        seconds = time.perf_counter() - started
        assert report.ok, report.problem
        return {"per_event_us": seconds / report.events * 1e6, "events": report.events}

    def parts(variant: str, events: int) -> dict[str, float]:
        """The CPU parts, without the database: hashing one event, and (after) building,
        signing and appending its checkpoint line."""
        from django.utils import timezone

        from governance.models import AuditEvent

        workspace = workspace_get_or_create(name=f"bench-{variant}")
        event = AuditEvent(
            workspace_id=workspace.pk,
            sequence=1,
            actor_type="system",
            actor_id="system",
            action="observation.update",
            target_type="observation",
            target_id="1",
            before=before,
            after=after,
            reason="the customer corrected the pickup day",
            created_at=timezone.now(),
            prev_hash="0" * 64,
        )
        answer: dict[str, float] = {}
        if variant == "before":
            try:
                from governance.audit.writer import audit_event_hash as sha256_hash
            except ImportError:  # the "before" tree
                from governance.audit import audit_event_hash as sha256_hash  # type: ignore[no-redef]

            started = time.perf_counter()
            for _ in range(events):
                sha256_hash(event)
            answer["hash_us"] = (time.perf_counter() - started) / events * 1e6
            return answer
        from governance.audit.writer import (
            audit_checkpoint_write,
            audit_current_key,
            audit_event_hash,
        )

        event.chain_version, event.key_id = 2, audit_current_key().id
        started = time.perf_counter()
        for _ in range(events):
            audit_event_hash(event, secret=audit_current_key().secret)
        answer["hash_us"] = (time.perf_counter() - started) / events * 1e6
        for sink in ("null", "file"):
            settings.MEMDESK_AUDIT_CHECKPOINT_SINK = (
                "__main__.NullSink"
                if sink == "null"
                else "governance.audit.checkpoints.FileCheckpointSink"
            )
            settings.MEMDESK_AUDIT_CHECKPOINT_FSYNC = False
            started = time.perf_counter()
            for i in range(events):
                audit_checkpoint_write(
                    workspace_id=workspace.pk, sequence=i, event_id=i, event_hash="0" * 64
                )
            answer[f"checkpoint_{sink}_us"] = (time.perf_counter() - started) / events * 1e6
        return answer

    print("ready", flush=True)
    for command in sys.stdin:
        verb, variant, *rest = command.split()
        if verb == "run":
            answer = run(variant, int(rest[0]))
        elif verb == "verify":
            answer = verify(variant)
        elif verb == "parts":
            answer = parts(variant, int(rest[0]))
        else:
            return
        print(json.dumps(answer), flush=True)


# --- the parent ---------------------------------------------------------------------------------


def _before_revision() -> str:
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "governance/checkpoints.py"],
        cwd=harness.ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    if not added:
        raise SystemExit("governance/checkpoints.py is not in git history: pass --before REV")
    return f"{added[-1]}^"


@contextlib.contextmanager
def _exported(revision: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="memdesk-bench-before-") as folder:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision],
            cwd=harness.ROOT,
            capture_output=True,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(folder, filter="data")
        yield Path(folder)


class Child:
    def __init__(self, tree: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--child", str(tree)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._line() != "ready":
            raise RuntimeError("the bench child did not start")

    def _line(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"the bench child stopped (exit {self.process.poll()})")
        return line

    def ask(self, command: str) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: dict[str, float] = json.loads(self._line())
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure(database: str, before_tree: Path, rounds: int, events: int) -> None:
    with contextlib.ExitStack() as stack:
        children: dict[str, Child] = {}
        checkpoint_files: dict[str, Path] = {}
        for side, tree in (("before", before_tree), ("after", harness.ROOT)):
            var_dir = stack.enter_context(harness.scratch_dir())
            if database == "postgresql":
                url = stack.enter_context(harness.fresh_database(f"bench_audit_{side}"))
            else:
                url = f"sqlite:///{var_dir / 'bench.sqlite3'}"
            checkpoint_files[side] = var_dir / "audit-checkpoints.jsonl"
            env = harness.django_env(
                url, var_dir, MEMDESK_AUDIT_CHECKPOINT_PATH=str(checkpoint_files[side])
            )
            env.pop("MEMDESK_AUDIT_KEY", None)
            children[side] = Child(tree, env)
            stack.callback(children[side].close)

        for side, variants in VARIANTS.items():  # warm up: caches, first-use imports
            for variant in variants:
                children[side].ask(f"run {variant} 30")
        harness.wait_for_quiet_machine()
        timings: dict[str, list[float]] = {v: [] for vs in VARIANTS.values() for v in vs}
        for _ in range(rounds):
            for side, variants in VARIANTS.items():
                for variant in variants:
                    answer = children[side].ask(f"run {variant} {events}")
                    timings[variant].append(answer["per_event_us"])
        verified = {side: children[side].ask(f"verify {VARIANTS[side][0]}") for side in VARIANTS}
        lines = checkpoint_files["after"].read_text().splitlines()
        bytes_per_line = sum(len(line) + 1 for line in lines) / len(lines)
        split: dict[str, dict[str, float]] = {}
        for _ in range(5):  # best of five: the parts are CPU only, the least noisy figures
            for side in VARIANTS:
                answer = children[side].ask(f"parts {VARIANTS[side][0]} 2000")
                for name, value in answer.items():
                    split.setdefault(side, {})[name] = min(
                        value, split.get(side, {}).get(name, value)
                    )

    base = min(timings["before"])
    rows = [
        [
            LABELS[variant],
            f"{min(values):.0f}",
            f"{statistics.median(values):.0f}",
            f"{min(values) / base:.2f}x",
        ]
        for variant, values in timings.items()
    ]
    say()
    say(f"audit_record on {database}: {rounds} rounds of {events} events per variant")
    say(table(["variant", "us/event best", "us/event median", "best / before"], rows))
    say()
    rows = [
        [side, f"{answer['events']:.0f}", f"{answer['per_event_us']:.1f}"]
        for side, answer in verified.items()
    ]
    say(f"audit_chain_verify on {database}, one pass")
    say(table(["tree", "events", "us/event"], rows))
    say(f"checkpoint file: {len(lines)} lines, {bytes_per_line:.0f} bytes per line")
    say()
    say("the parts, without the database (best of 5 x 2,000, us per event)")
    say(
        table(
            ["part", "before", "after"],
            [
                [
                    "hash one event",
                    f"{split['before']['hash_us']:.1f}",
                    f"{split['after']['hash_us']:.1f}",
                ],
                [
                    "checkpoint line: build and sign",
                    "-",
                    f"{split['after']['checkpoint_null_us']:.1f}",
                ],
                [
                    "checkpoint line: build, sign, append to the file",
                    "-",
                    f"{split['after']['checkpoint_file_us']:.1f}",
                ],
            ],
        )
    )
    say()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--before", help="git revision of the tree before keyed chains")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child)
        return 0
    say(harness.machine_line())
    revision = options.before or _before_revision()
    say(f"before     {revision}; after: this checkout")
    with _exported(revision) as before_tree:
        for database in options.databases.split(","):
            measure(database, before_tree, options.rounds, options.events)
    return 0


if __name__ == "__main__":
    harness.run_main(main)
