"""Memory of a process that scans messages for PII for a long time: the engine's scan
(each in a spaCy memory zone) beside the same scan with the zone left out, which is how
the engine scanned before 1 December.

    .venv/bin/python bench/scan_memory.py [--rounds 60] [--batch 250]

Each round scans ``--batch`` new texts, each with a name, an e-mail address, an order
number and a code, so that most of their tokens are new to spaCy (as a stream of real
conversations' names, addresses and ids is). Each variant runs in a process of its own
with the default policy; the figures are the process's RSS and the number of strings in
spaCy's vocabulary after the first rounds (the model loaded and warm) and at the end.
Prints counts only, never text.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import string
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WARM_ROUNDS = 5
FIRST_NAMES = ["Anna", "Jonas", "Marta", "Pedro", "Li", "Fatima", "Olga", "Kwame", "Sven", "Aiko"]


def rss_mb() -> int:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return 0


def texts(rng: random.Random, count: int) -> list[str]:
    def word(length: int = 7) -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(length))

    return [
        f"Hi, I'm {rng.choice(FIRST_NAMES)} {word().capitalize()}, write to "
        f"{word()}.{word(4)}@{word(6)}.com about order {rng.randint(10**7, 10**8)} "
        f"code {word(5).upper()}{rng.randint(100, 999)}; the {word()} arrived {word()}."
        for _ in range(count)
    ]


def scan(zone: bool, rounds: int, batch: int) -> None:
    """One variant, in this process: prints 'warm RSS strings' and 'end RSS strings'."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from governance.redaction import presidio
    from governance.redaction.presidio import PolicySpec

    engine = presidio.engine()
    if not zone:
        engine._scan = contextlib.nullcontext  # type: ignore[method-assign]
    spec = PolicySpec(workspace_id="bench", version=1)
    rng = random.Random(1)
    started = time.process_time()
    for done in range(1, rounds + 1):
        engine.detect(texts(rng, batch), spec=spec)
        if done in (WARM_ROUNDS, rounds):
            label = "warm" if done == WARM_ROUNDS else "end"
            print(label, rss_mb(), len(engine.nlp.vocab.strings), flush=True)
    print("cpu", f"{time.process_time() - started:.1f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--variant", choices=["zone", "no-zone"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        scan(args.variant == "zone", args.rounds, args.batch)
        return 0
    after = (args.rounds - WARM_ROUNDS) * args.batch
    print(
        f"{args.rounds} rounds of {args.batch} new texts; growth over the {after:,} after warm-up"
    )
    print(
        f"{'scan':<30} {'RSS warm':>9} {'RSS end':>8} {'growth':>7} "
        f"{'new strings':>12} {'CPU s':>6}"
    )
    for variant, label in (
        ("no-zone", "without a memory zone (before)"),
        ("zone", "the engine's scan"),
    ):
        output = subprocess.run(
            [
                sys.executable,
                __file__,
                "--variant",
                variant,
                "--rounds",
                str(args.rounds),
                "--batch",
                str(args.batch),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        figures = {line.split()[0]: line.split()[1:] for line in output if line.strip()}
        warm_rss, warm_strings = map(int, figures["warm"])
        end_rss, end_strings = map(int, figures["end"])
        print(
            f"{label:<30} {warm_rss:>6} MB {end_rss:>5} MB {end_rss - warm_rss:>+4} MB "
            f"{end_strings - warm_strings:>+12,} {figures['cpu'][0]:>6}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
