"""Span-level precision, recall and F2 of PII detection, per entity type, on
``presidio_generated_small.json`` (100 sentences, 173 labelled spans).

Run: ``.venv/bin/python bench/redaction_quality.py [--all-entities]`` (a few seconds).
Prints figures only. ``tests/governance/test_redaction_quality.py`` holds the recall of
e-mail addresses, phone numbers and credit cards to at least 0.9 with the same code.

What is measured: the detections of a workspace's default policy (``--all-entities``:
every type the engine supports), counting both kinds of finding: applied (replaced in
the stored text) and pending review (the review band: masked in what the Reflector
reads until a person decides). ``auto recall`` counts applied findings only.

Matching rule
- Presidio's entity types are mapped to the dataset's labels (``LABELS``). A LOCATION
  detection may match a LOCATION or an ADDRESS span (Presidio has no street-address
  type; a detected town inside an address does remove part of it).
- A labelled span is *recalled* when a detection whose labels include its label overlaps
  it by at least one character. A detection is a *true positive* when it overlaps a
  labelled span with one of its labels; otherwise it is a false positive. Precision is
  per the detection's first label; a type with no detection has no precision.
- F2 weighs recall four times as much as precision: a missed value reaches memory, a
  false alarm only hides a word.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT.parent / "shared" / "data" / "pii" / "presidio_generated_small.json"

# Presidio entity type -> dataset labels it may match (the first one for precision).
LABELS: dict[str, tuple[str, ...]] = {
    "PERSON": ("PERSON",),
    "LOCATION": ("LOCATION", "ADDRESS"),
    "PHONE_NUMBER": ("PHONE_NUMBER",),
    "CREDIT_CARD": ("CREDIT_CARD",),
    "EMAIL_ADDRESS": ("EMAIL_ADDRESS",),
    "ORGANIZATION": ("ORGANIZATION",),
    "DATE_TIME": ("DATE_TIME",),
    "URL": ("DOMAIN_NAME",),
    "US_SSN": ("US_SSN",),
    "IP_ADDRESS": ("IP_ADDRESS",),
    "US_DRIVER_LICENSE": ("US_DRIVER_LICENSE",),
}


@dataclass(frozen=True)
class Score:
    label: str
    gold: int
    recalled: int
    auto_recalled: int
    predicted: int
    true_positive: int

    @property
    def recall(self) -> float | None:
        return self.recalled / self.gold if self.gold else None

    @property
    def auto_recall(self) -> float | None:
        return self.auto_recalled / self.gold if self.gold else None

    @property
    def precision(self) -> float | None:
        return self.true_positive / self.predicted if self.predicted else None

    @property
    def f2(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None or p + r == 0:
            return None
        return 5 * p * r / (4 * p + r)


def evaluate(*, all_entities: bool = False) -> dict[str, Score]:
    """Scores per dataset label. Needs Django set up (the engine reads the settings)."""
    from governance.redaction import APPLIED, SUPPORTED_ENTITIES, PolicySpec, engine

    items = json.loads(DATASET.read_text())
    spec = PolicySpec(
        workspace_id="quality",
        version=1,
        entities=tuple(sorted(SUPPORTED_ENTITIES)) if all_entities else (),
    )
    detections = engine().detect([item["full_text"] for item in items], spec=spec)
    gold = Counter()
    recalled = Counter()
    auto_recalled = Counter()
    predicted = Counter()
    true_positive = Counter()
    for item, found in zip(items, detections, strict=True):
        spans = [(s["start_position"], s["end_position"], s["entity_type"]) for s in item["spans"]]
        for start, end, label in spans:
            gold[label] += 1
            hits = [
                d
                for d in found
                if d.start < end and start < d.end and label in LABELS.get(d.entity_type, ())
            ]
            recalled[label] += bool(hits)
            auto_recalled[label] += any(d.status == APPLIED for d in hits)
        for d in found:
            labels = LABELS.get(d.entity_type, (d.entity_type,))
            predicted[labels[0]] += 1
            true_positive[labels[0]] += any(
                d.start < end and start < d.end and label in labels for start, end, label in spans
            )
    return {
        label: Score(
            label,
            gold[label],
            recalled[label],
            auto_recalled[label],
            predicted[label],
            true_positive[label],
        )
        for label in sorted(set(gold) | set(predicted))
    }


def _fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all-entities", action="store_true")
    args = parser.parse_args()
    if not DATASET.exists():
        sys.exit(f"the evaluation data is not at {DATASET}")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    scores = evaluate(all_entities=args.all_entities)
    print(
        f"{'label':18s} {'gold':>5s} {'found':>6s} {'prec':>5s} {'recall':>6s} "
        f"{'F2':>5s} {'auto recall':>11s}"
    )
    for score in scores.values():
        print(
            f"{score.label:18s} {score.gold:5d} {score.predicted:6d} {_fmt(score.precision)} "
            f"{_fmt(score.recall):>6s} {_fmt(score.f2)} {_fmt(score.auto_recall):>11s}"
        )
    gold = sum(s.gold for s in scores.values())
    recalled = sum(s.recalled for s in scores.values())
    predicted = sum(s.predicted for s in scores.values())
    true_positive = sum(s.true_positive for s in scores.values())
    print(
        f"{'all':18s} {gold:5d} {predicted:6d} {true_positive / max(predicted, 1):5.2f} "
        f"{recalled / max(gold, 1):6.2f}"
    )


if __name__ == "__main__":
    main()
