"""Span-level recall, precision and F2 of PII detection per family, for Memdesk's engine
and for stock Presidio on the same spaCy pipeline in the same run, on two datasets in
``../shared/data/pii/`` (read its README):

- ``presidio_generated_small.json``: 100 short support-style sentences, 173 spans.
  Measured untuned first; two address layouts it showed were added as general rules.
- ``contextual_anonymizer/spans_clean.json``: 3,684 multi-sentence texts (chats, e-mail
  threads, medical, banking, legal, insurance), 29,896 spans. Split in two halves by a
  seeded shuffle of the record ids (``SPLIT_SEED``): the engine's rules were tuned looking
  at the ``tune`` half only; ``held-out`` is reported beside it.

Run: ``.venv/bin/python bench/redaction_quality.py`` (both datasets, every text; about
two minutes on two cores). ``--dataset`` picks one, ``--sample N`` a seeded sample of N
texts. Prints figures only, never text. ``tests/governance/test_redaction_quality.py``
holds recall floors with the same code.

Detectors
- ``memdesk``: ``RedactionEngine.detect`` with a workspace's default policy, counting
  both kinds of finding: applied (replaced in the stored text) and pending review (score
  in the review band: masked in what an engine reads until a person decides). ``auto``
  counts applied findings only.
- ``stock``: Presidio's ``AnalyzerEngine`` with Presidio's own predefined recognizers and
  nothing of Memdesk's, on an NlpEngine built from the same provider configuration (the
  same installed pipeline, the same NER label mapping; never a download), asked for the
  entity types of Memdesk's default policy that it supports, at the same score floor.
  Its results go through the same overlap merge, so both columns count spans alike.

Families. Dataset labels map to families (``LABEL_FAMILY``); the rest are *neutral*:
- PII to catch: person (NAME, PERSON, DOCTOR), username (USERNAME: in this corpus mostly
  the display name of a chat participant), email, phone, address (ADDRESS, STREET, ZIP:
  a street address, or in the corpus sometimes a town), place (LOCATION, CITY, STATE,
  PLACE, LANDMARK), card (CREDIT_CARD), iban (IBAN_CODE), account (ACCOUNT: bank
  account, card and student numbers), national id (PESEL, NIP, US_SSN,
  US_DRIVER_LICENSE, US_PASSPORT), network (IP_ADDRESS).
- Neutral, non-PII ids: ticket, case, claim, policy, order, transaction and reference
  numbers (``NON_PII_IDS``). A detection over one is neither a true nor a false
  positive, and none is required; ``ids flagged`` counts how many the detector flags.
- Neutral, outside the default policy: dates, times, organisations, positions, amounts,
  diagnoses and the like. A detection over one counts neither way either.

Matching rule
- A gold span is *recalled* (typed) when a detection whose entity type may stand for the
  span's family (``TYPE_FAMILIES``) overlaps it by at least one character; *recalled
  (any type)* when any detection overlaps it. ``chars`` is the share of gold characters
  covered by some detection: a town found inside a street address recalls the address
  by the overlap rule but leaves the street in the text.
- A detection is a true positive when it overlaps a gold span of one of its families
  (typed) or of any PII family (any type); a detection that overlaps only neutral spans
  is left out of precision; every other detection is a false positive. Per-family
  precision is by the detection's first family.
- Distinct values: the gold spans of a family grouped by their casefolded text; each
  distinct value weighs one, shared among its occurrences (``distinct`` recall).
- F2 weighs recall four times as much as precision: a missed value reaches memory, a
  false alarm only hides a word.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "pii"
DATASETS = {
    "presidio_generated_small": DATA / "presidio_generated_small.json",
    "contextual_anonymizer": DATA / "contextual_anonymizer" / "spans_clean.json",
}
SPLIT_SEED = 10
SAMPLE_SEED = 20251130
SCORE_FLOOR = 0.4  # the default policy's detection floor (the review band's lower end)

LABEL_FAMILY: dict[str, str] = {
    **dict.fromkeys(("NAME", "PERSON", "DOCTOR"), "person"),
    "USERNAME": "username",
    **dict.fromkeys(("EMAIL", "EMAIL_ADDRESS"), "email"),
    **dict.fromkeys(("PHONE", "PHONE_NUMBER"), "phone"),
    **dict.fromkeys(("ADDRESS", "STREET", "ZIP"), "address"),
    **dict.fromkeys(("LOCATION", "CITY", "STATE", "PLACE", "LANDMARK"), "place"),
    "CREDIT_CARD": "card",
    "IBAN_CODE": "iban",
    "ACCOUNT": "account",
    **dict.fromkeys(("PESEL", "NIP", "US_SSN", "US_DRIVER_LICENSE", "US_PASSPORT"), "national id"),
    "IP_ADDRESS": "network",
}
FAMILIES = (
    "person",
    "username",
    "email",
    "phone",
    "address",
    "place",
    "card",
    "iban",
    "account",
    "national id",
    "network",
)
NON_PII_IDS = frozenset(
    {
        "TICKET_ID",
        "POLICY_NUMBER",
        "CLAIM_ID",
        "CASE_NUMBER",
        "ORDER_NUMBER",
        "TRANSACTION_ID",
        "REFERENCE",
        "CHAT_ID",
        "FLIGHT_NUMBER",
    }
)
# Entity type -> the families its detections may stand for (the first for precision).
TYPE_FAMILIES: dict[str, tuple[str, ...]] = {
    "PERSON": ("person", "username"),
    "USERNAME": ("username", "person"),
    "EMAIL_ADDRESS": ("email",),
    "PHONE_NUMBER": ("phone",),
    "ADDRESS": ("address", "place"),
    "LOCATION": ("place", "address"),
    "CREDIT_CARD": ("card", "account"),
    "IBAN_CODE": ("iban", "account"),
    "ACCOUNT_NUMBER": ("account", "card", "iban"),
    "US_BANK_NUMBER": ("account",),
    "PERSONAL_ID": ("national id", "account"),
    "US_SSN": ("national id",),
    "US_DRIVER_LICENSE": ("national id",),
    "US_PASSPORT": ("national id",),
    "US_ITIN": ("national id",),
    "UK_NHS": ("national id",),
    "IP_ADDRESS": ("network",),
}


@dataclass(frozen=True)
class Gold:
    start: int
    end: int
    label: str
    value: str

    @property
    def family(self) -> str | None:
        return LABEL_FAMILY.get(self.label)


@dataclass(frozen=True)
class Item:
    id: int
    text: str
    spans: tuple[Gold, ...]


@dataclass(frozen=True)
class Found:
    start: int
    end: int
    entity_type: str
    applied: bool = True
    recognizer: str = ""

    @property
    def families(self) -> tuple[str, ...]:
        return TYPE_FAMILIES.get(self.entity_type, (self.entity_type.lower(),))


def load(dataset: str) -> list[Item]:
    raw = json.loads(DATASETS[dataset].read_text())
    if dataset == "presidio_generated_small":
        return [
            Item(
                index,
                row["full_text"],
                tuple(
                    Gold(s["start_position"], s["end_position"], s["entity_type"], value)
                    for s in row["spans"]
                    for value in [s["entity_value"]]
                ),
            )
            for index, row in enumerate(raw)
        ]
    return [
        Item(
            row["id"],
            row["text"],
            tuple(Gold(s["start"], s["end"], s["label"], s["text"]) for s in row["spans"]),
        )
        for row in raw
    ]


def halves(items: Sequence[Item]) -> dict[str, list[Item]]:
    """The seeded tune / held-out split of a dataset, by record id."""
    ids = sorted(item.id for item in items)
    random.Random(SPLIT_SEED).shuffle(ids)
    tune = set(ids[: len(ids) // 2])
    return {
        "tune": [item for item in items if item.id in tune],
        "held-out": [item for item in items if item.id not in tune],
    }


def sample(items: Sequence[Item], count: int | None) -> list[Item]:
    if count is None or count >= len(items):
        return list(items)
    chosen = sorted(random.Random(SAMPLE_SEED).sample(range(len(items)), count))
    return [items[index] for index in chosen]


# --- detectors -------------------------------------------------------------------------------

Detector = Callable[[Sequence[str]], list[list[Found]]]


def memdesk_detector() -> Detector:
    from governance.redaction.presidio import APPLIED, PolicySpec, engine

    spec = PolicySpec(workspace_id="quality", version=1)

    def detect(texts: Sequence[str]) -> list[list[Found]]:
        return [
            [Found(d.start, d.end, d.entity_type, d.status == APPLIED, d.recognizer) for d in found]
            for found in engine().detect(list(texts), spec=spec)
        ]

    return detect


def stock_analyzer() -> tuple[Any, Any]:
    """Presidio's AnalyzerEngine as shipped, on the same pipeline: (analyzer, nlp engine)."""
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    from governance.redaction import presidio
    from governance.redaction.presidio import (
        LANGUAGE,
        NER_IGNORED,
        NER_MAPPING,
        _offline_tldextract,
    )

    _offline_tldextract()  # Presidio's e-mail and URL recognizers: no fetch
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    model = {"lang_code": LANGUAGE, "model_name": presidio.spacy_model_name()}
    nlp_engine = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [model],
            "ner_model_configuration": {
                "model_to_presidio_entity_mapping": NER_MAPPING,
                "labels_to_ignore": NER_IGNORED,
                "low_score_entity_names": [],
            },
        }
    ).create_engine()
    registry = RecognizerRegistry(supported_languages=[LANGUAGE])
    registry.load_predefined_recognizers(languages=[LANGUAGE], nlp_engine=nlp_engine)
    analyzer = AnalyzerEngine(
        registry=registry, nlp_engine=nlp_engine, supported_languages=[LANGUAGE]
    )
    return analyzer, nlp_engine


def stock_detector() -> Detector:
    from governance.redaction import presidio
    from governance.redaction.overlaps import merged
    from governance.redaction.presidio import LANGUAGE

    analyzer, nlp_engine = stock_analyzer()
    spec = presidio.PolicySpec(workspace_id="quality", version=1)
    supported = set(analyzer.get_supported_entities(LANGUAGE))
    entities = [name for name in spec.analysed_entities if name in supported]

    def detect(texts: Sequence[str]) -> list[list[Found]]:
        found: list[list[Found]] = []
        for text, artifacts in nlp_engine.process_batch(
            list(texts), language=LANGUAGE, batch_size=64
        ):
            results = analyzer.analyze(
                text=text,
                language=LANGUAGE,
                entities=entities,
                nlp_artifacts=artifacts,
                score_threshold=SCORE_FLOOR,
            )
            found.append(
                [
                    Found(d.start, d.end, d.entity_type, d.status == presidio.APPLIED)
                    for d in merged(results, spec)
                ]
            )
        return found

    return detect


# --- scoring ---------------------------------------------------------------------------------


@dataclass
class FamilyScore:
    family: str
    gold: int = 0
    recalled: int = 0
    recalled_any: int = 0
    auto_recalled: int = 0
    predicted: int = 0
    true_positive: int = 0
    gold_chars: int = 0
    covered_chars: int = 0
    distinct: dict[str, list[bool]] = field(default_factory=lambda: defaultdict(list))

    @property
    def recall(self) -> float | None:
        return self.recalled / self.gold if self.gold else None

    @property
    def recall_any(self) -> float | None:
        return self.recalled_any / self.gold if self.gold else None

    @property
    def auto_recall(self) -> float | None:
        return self.auto_recalled / self.gold if self.gold else None

    @property
    def precision(self) -> float | None:
        return self.true_positive / self.predicted if self.predicted else None

    @property
    def f2(self) -> float | None:
        return f2(self.precision, self.recall)

    @property
    def char_recall(self) -> float | None:
        return self.covered_chars / self.gold_chars if self.gold_chars else None

    @property
    def distinct_recall(self) -> float | None:
        if not self.distinct:
            return None
        return sum(sum(hits) / len(hits) for hits in self.distinct.values()) / len(self.distinct)


@dataclass
class Report:
    families: dict[str, FamilyScore]
    texts: int = 0
    predicted: int = 0
    true_positive: int = 0
    true_positive_any: int = 0
    ids: int = 0
    ids_flagged: int = 0

    @property
    def scored(self) -> list[FamilyScore]:
        return [s for s in self.families.values() if s.gold]

    @property
    def gold(self) -> int:
        return sum(s.gold for s in self.scored)

    @property
    def recall(self) -> float | None:
        return sum(s.recalled for s in self.scored) / self.gold if self.gold else None

    @property
    def recall_any(self) -> float | None:
        return sum(s.recalled_any for s in self.scored) / self.gold if self.gold else None

    @property
    def auto_recall(self) -> float | None:
        return sum(s.auto_recalled for s in self.scored) / self.gold if self.gold else None

    @property
    def precision(self) -> float | None:
        return self.true_positive / self.predicted if self.predicted else None

    @property
    def precision_any(self) -> float | None:
        return self.true_positive_any / self.predicted if self.predicted else None

    @property
    def f2(self) -> float | None:
        return f2(self.precision, self.recall)

    @property
    def f2_any(self) -> float | None:
        return f2(self.precision_any, self.recall_any)

    @property
    def char_recall(self) -> float | None:
        gold = sum(s.gold_chars for s in self.scored)
        return sum(s.covered_chars for s in self.scored) / gold if gold else None

    @property
    def distinct_recall(self) -> float | None:
        values = [hits for s in self.scored for hits in s.distinct.values()]
        return sum(sum(h) / len(h) for h in values) / len(values) if values else None


def f2(precision: float | None, recall: float | None) -> float | None:
    if precision is None or recall is None or precision + recall == 0:
        return None
    return 5 * precision * recall / (4 * precision + recall)


def _overlaps(a: Gold | Found, b: Gold | Found) -> bool:
    return a.start < b.end and b.start < a.end


def score(items: Iterable[Item], detections: Iterable[Sequence[Found]]) -> Report:
    report = Report({family: FamilyScore(family) for family in FAMILIES})
    for item, found in zip(items, detections, strict=True):
        report.texts += 1
        covered = bytearray(len(item.text))
        for d in found:
            covered[d.start : d.end] = b"\x01" * (d.end - d.start)
        for gold in item.spans:
            if gold.label in NON_PII_IDS:
                report.ids += 1
                report.ids_flagged += any(_overlaps(gold, d) for d in found)
            family = gold.family
            if family is None:
                continue
            s = report.families[family]
            hits = [d for d in found if _overlaps(gold, d)]
            typed = [d for d in hits if family in d.families]
            s.gold += 1
            s.recalled += bool(typed)
            s.recalled_any += bool(hits)
            s.auto_recalled += any(d.applied for d in typed)
            s.gold_chars += gold.end - gold.start
            s.covered_chars += sum(covered[gold.start : gold.end])
            s.distinct[gold.value.strip().casefold()].append(bool(typed))
        for d in found:
            touched = [g for g in item.spans if _overlaps(g, d)]
            pii = [g for g in touched if g.family is not None]
            if touched and not pii:
                continue  # only neutral spans: neither true nor false
            primary = d.families[0]
            s = report.families.setdefault(primary, FamilyScore(primary))
            s.predicted += 1
            report.predicted += 1
            typed = any(g.family in d.families for g in pii)
            s.true_positive += typed
            report.true_positive += typed
            report.true_positive_any += bool(pii)
    return report


def evaluate(dataset: str, detector: str = "memdesk", *, count: int | None = None) -> Report:
    """One detector's report on a dataset. Needs Django set up (the engine reads settings)."""
    items = sample(load(dataset), count)
    detect = memdesk_detector() if detector == "memdesk" else stock_detector()
    return score(items, detect([item.text for item in items]))


# --- printing --------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


COLUMNS = "  R typed  R any  chars  dist.  prec    F2"


def _cells(s: FamilyScore | Report) -> str:
    return (
        f"  {_fmt(s.recall):>7s}  {_fmt(s.recall_any)}  {_fmt(s.char_recall)}  "
        f"{_fmt(s.distinct_recall)}  {_fmt(s.precision)}  {_fmt(s.f2)}"
    )


def print_report(title: str, ours: Report, stock: Report) -> None:
    print(f"\n{title}: {ours.texts} texts, {ours.gold} PII spans, {ours.ids} non-PII id spans")
    print(f"{'':12s} {'gold':>6s} |{'memdesk':^44s}| {'auto':>5s} |{'stock Presidio':^44s}|")
    print(f"{'family':12s} {'':6s} |{COLUMNS}|{'':6s} |{COLUMNS}|")
    for family, s in ours.families.items():
        other = stock.families.get(family, FamilyScore(family))
        if not (s.gold or s.predicted or other.predicted):
            continue
        print(f"{family:12s} {s.gold:6d} |{_cells(s)}| {_fmt(s.auto_recall)} |{_cells(other)}|")
    print(
        f"{'all (typed)':12s} {ours.gold:6d} |{_cells(ours)}| {_fmt(ours.auto_recall)} "
        f"|{_cells(stock)}|"
    )
    for name, report in (("memdesk", ours), ("stock", stock)):
        print(
            f"  {name:8s} any type: recall {_fmt(report.recall_any)} precision "
            f"{_fmt(report.precision_any)} F2 {_fmt(report.f2_any)}; detections "
            f"{report.predicted}; non-PII ids flagged {report.ids_flagged}/{report.ids}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(DATASETS), action="append")
    parser.add_argument("--sample", type=int, default=None, help="a seeded sample of N texts")
    args = parser.parse_args()
    for path in DATASETS.values():
        if not path.exists():
            sys.exit(f"the evaluation data is not at {path}")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from governance.redaction.presidio import spacy_model_name

    print(f"pipeline {spacy_model_name()}, score floor {SCORE_FLOOR}")
    ours_detect, stock_detect = memdesk_detector(), stock_detector()
    for dataset in args.dataset or list(DATASETS):
        items = sample(load(dataset), args.sample)
        texts = [item.text for item in items]
        ours = dict(zip((item.id for item in items), ours_detect(texts), strict=True))
        stock = dict(zip((item.id for item in items), stock_detect(texts), strict=True))
        print_report(
            dataset,
            score(items, (ours[i.id] for i in items)),
            score(items, (stock[i.id] for i in items)),
        )
        if dataset == "contextual_anonymizer":
            for half, members in halves(items).items():
                mine = score(members, (ours[i.id] for i in members))
                theirs = score(members, (stock[i.id] for i in members))
                print(
                    f"  {half:9s} half: memdesk recall {_fmt(mine.recall)} precision "
                    f"{_fmt(mine.precision)} F2 {_fmt(mine.f2)} | stock recall "
                    f"{_fmt(theirs.recall)} precision {_fmt(theirs.precision)} F2 "
                    f"{_fmt(theirs.f2)}"
                )


if __name__ == "__main__":
    main()
