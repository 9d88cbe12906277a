"""What the PII scan costs per text, on the texts that cost the most (issue 25).

For each kind of hard text (long runs of "!", of emoji, of "!?", dense one-letter tokens
"-x-x", and prose) at 16,000 and 500,000 characters: the seconds the engine takes to
read it as the scan does (``RedactionEngine.detect_within``, in bounded pieces, with
``MEMDESK_SCAN_TEXT_SECONDS``), whether it was read or marked not read in time, and,
for the 16,000-character texts, the baseline: the same engine reading the whole text in
one pass, as it did before (no pieces, no runs read as spaces). The 500,000-character
baseline is not run: at the tokenizer's quadratic cost it would take hours.

    .venv/bin/python bench/scan_cost.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    "the",
    "order",
    "arrived",
    "late",
    "John",
    "Smith",
    "called",
    "from",
    "Paris",
    "about",
    "it",
    "ok",
]


def hard_texts(size: int) -> dict[str, str]:
    rnd = random.Random(size)
    prose = " ".join(rnd.choice(WORDS) for _ in range(size // 4))
    return {
        "'!' run": "!" * size,
        "emoji run": "\N{GRINNING FACE}" * size,
        "'!?' run": "!?" * (size // 2),
        "'-x' tokens": "-x" * (size // 2),
        "prose": prose[:size],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=None, help="the time limit per text")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from django.conf import settings

    from governance.redaction.presidio import PolicySpec, engine

    seconds = args.seconds or settings.MEMDESK_SCAN_TEXT_SECONDS
    spec = PolicySpec(workspace_id="bench", version=1)
    scanner = engine()
    scanner.detect(["warm up"], spec=spec)
    print(f"time limit per text {seconds} s, pipeline {scanner.model_name}")
    print(f"{'text':14s} {'chars':>8s} {'scan s':>8s} {'read':>5s} {'before s':>9s} {'ratio':>7s}")
    for size in (16_000, 500_000):
        for name, text in hard_texts(size).items():
            started = time.perf_counter()
            [found] = scanner.detect_within([text], spec=spec, seconds=seconds)
            took = time.perf_counter() - started
            before = ""
            ratio = ""
            if size <= 16_000:
                started = time.perf_counter()
                with scanner._scan():
                    scanner._read([text], spec=spec, batch_size=1, n_process=1, known=None)
                baseline = time.perf_counter() - started
                before = f"{baseline:9.2f}"
                ratio = f"{baseline / took:6.1f}x"
            read = "yes" if found is not None else "no"
            print(f"{name:14s} {len(text):8d} {took:8.2f} {read:>5s} {before:>9s} {ratio:>7s}")


if __name__ == "__main__":
    main()
