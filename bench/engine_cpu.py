"""The extractive engine's CPU on the same inputs as a baseline engine's (issue 22: "engine
CPU within 1.5x of today's ms per 1,000 input tokens").

What the Observer and the Reflector read is captured once per dataset, from the quality
bench's pipeline (``bench/quality``, the private default, a scratch database): every
window observed and every memory condensed. The captured calls are then replayed through
this tree's engine and, with ``--baseline PATH`` (a checkout of the baseline commit, such
as a git worktree), through that tree's engine, each in a process of its own, the best
of ``--passes`` passes; the two trees take turns for ``--rounds`` rounds, so that a
shared machine's slow spell weighs on both. Prints the seconds, ms per 1,000 raw tokens
and the ratio.

    git worktree add /tmp/eb7ee61 eb7ee61
    .venv/bin/python bench/engine_cpu.py --datasets friendsqa,qmsum --baseline /tmp/eb7ee61

Replaying the same inputs leaves out what differs between the pipelines around the
engines (windows, redaction); it is the engine's own cost. A busy machine still shows:
run it alone.
"""

from __future__ import annotations

import argparse
import json
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("friendsqa", "qmsum", "lme_oracle", "abcd")

# Run with the tree to time as the working directory: its engine is the one imported. A
# first pass is not timed (the word lists and caches both engines load once a process).
REPLAY = """
import json, os, pickle, sys, time
sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from memory.engines.extractive import ExtractiveEngine
calls = pickle.load(open(sys.argv[1], "rb"))
engine = ExtractiveEngine()
for name, args, kwargs in calls:  # a pass untimed: word lists and caches loaded once
    getattr(engine, name)(*args, **kwargs)
best = {}
for _ in range(int(sys.argv[2])):
    spent = {"observe": 0.0, "reflect": 0.0}
    for name, args, kwargs in calls:
        started = time.process_time()
        getattr(engine, name)(*args, **kwargs)
        spent[name] += time.process_time() - started
    best = {n: min(best.get(n, s), s) for n, s in spent.items()}
print(json.dumps(best))
"""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--datasets", default="friendsqa,qmsum", help=f"from {DATASETS}")
    parser.add_argument("--qmsum-limit", type=int, default=8)
    parser.add_argument("--oracle-sample", type=int, default=60)
    parser.add_argument("--passes", type=int, default=5, help="timed passes per replay")
    parser.add_argument("--rounds", type=int, default=3, help="replays per tree, in turns")
    parser.add_argument("--baseline", type=Path, help="a checkout of the baseline engine")
    args = parser.parse_args()
    args.datasets = [d.strip() for d in args.datasets.split(",") if d.strip()]
    if unknown := [d for d in args.datasets if d not in DATASETS]:
        parser.error(f"--datasets takes names from {', '.join(DATASETS)}; got {unknown}")
    if args.baseline and not (args.baseline / "memory" / "engines").is_dir():
        parser.error(f"--baseline {args.baseline} holds no memory/engines: not a checkout")
    return args


def capture(key: str, args: argparse.Namespace, into: Path) -> int:
    """Run one dataset through the pipeline, pickling the engine's calls into ``into``;
    returns the raw tokens of its turns."""
    from bench.memory_quality import load_dataset
    from bench.quality.pipeline import Pipeline
    from memory.engines.extractive import ExtractiveEngine
    from memory.tokens import token_count

    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
    originals = {name: getattr(ExtractiveEngine, name) for name in ("observe", "reflect")}

    def recorder(name: str) -> Any:
        def recorded(engine: Any, *call_args: Any, **kwargs: Any) -> Any:
            calls.append((name, call_args, kwargs))
            return originals[name](engine, *call_args, **kwargs)

        return recorded

    quality_args = argparse.Namespace(
        qmsum_limit=args.qmsum_limit,
        oracle_sample=args.oracle_sample,
        friendsqa_limit=None,
        seed=20250101,
    )
    dataset = load_dataset(key, quality_args)
    pipeline = Pipeline()
    workspace = pipeline.workspace(f"cpu-{key}")
    for name in originals:
        setattr(ExtractiveEngine, name, recorder(name))
    try:
        for history in dataset.histories:
            pipeline.ingest(workspace, history, sweep=True)
    finally:
        for name, method in originals.items():
            setattr(ExtractiveEngine, name, method)
    into.write_bytes(pickle.dumps(calls))
    return sum(token_count(turn.content) for h in dataset.histories for turn in h.turns)


def replay(tree: Path, calls: Path, passes: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", REPLAY, str(calls), str(passes)],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    args = parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    import harness

    harness.stop_on_sigterm()
    print(f"Extractive engine CPU on replayed inputs, best of {args.passes} passes")
    print(harness.machine_line())
    with tempfile.TemporaryDirectory() as scratch:
        captured: dict[str, tuple[Path, int]] = {}
        with harness.scratch_django():
            for key in args.datasets:
                path = Path(scratch) / f"{key}.pickle"
                captured[key] = (path, capture(key, args, path))
        rows = []
        for key, (path, raw_tokens) in captured.items():
            # The trees take turns, round after round, the best of each kept: a machine
            # that slows for a while slows both, not whichever ran then.
            now = before = float("inf")
            for _ in range(args.rounds):
                now = min(now, sum(replay(ROOT, path, args.passes).values()))
                if args.baseline:
                    before = min(before, sum(replay(args.baseline, path, args.passes).values()))
            row = [key, f"{raw_tokens:,}", f"{now:.3f}", f"{1000 * now / raw_tokens * 1000:.1f}"]
            if args.baseline:
                row += [f"{before:.3f}", f"{1000 * before / raw_tokens * 1000:.1f}"]
                row.append(f"{now / before:.2f}x")
            rows.append(row)
    headers = ["dataset", "raw tokens", "this tree s", "ms / 1k tokens"]
    if args.baseline:
        headers += ["baseline s", "baseline ms / 1k", "ratio"]
    print(harness.table(headers, rows))


if __name__ == "__main__":
    main()
