"""One dataset through every variant, scored and printed (figures only; the sample notes
with ``--samples`` are the only content). What each figure means is in the docstring of
bench/memory_quality.py."""

from __future__ import annotations

import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.quality.baselines import Bm25Turns, first_k_text, salient_m_text
from bench.quality.datasets import Dataset, History
from bench.quality.pipeline import Pipeline, Served
from bench.quality.scoring import (
    RelativeCoverage,
    content_words,
    coverage,
    garbled_reason,
    interpolate_curve,
    label_cost,
    main_people,
    people_labels,
    read_back,
    relative_coverage,
)
from governance.redaction.labels import malformed_pseudonyms

BASELINE_SIZES = (5, 10, 20, 40)
SAMPLE_NOTES = 20
# issue 22's targets: relative coverage at >= 5x (QMSum's transcript covers only about
# 0.84 of its written answers, hence its lower bar).
TARGET_COMPRESSION = 5.0
TARGET_RELATIVE = {"qmsum": 0.70}
TARGET_RELATIVE_DEFAULT = 0.80
TARGET_BM25_SHARE = 0.9
TARGET_GARBLED = 0.01
TARGET_DATED = 0.95
TARGET_PER_PERSON = 1.2
TARGET_REFLECTOR_COMPRESSION = 3.0
TARGET_REFLECT_KEEPS = 0.95


@dataclass(frozen=True)
class Variant:
    label: str
    redact_before_observation: bool = True
    fidelity: str = ""
    reflect: bool = True  # also score the same conversations after one Reflector run


DEFAULT_VARIANTS = (
    Variant("default"),
    Variant("reflection-only redaction", redact_before_observation=False),
)


@dataclass
class Run:
    """A variant's conversations as served, and the workspace that holds them."""

    label: str
    workspace: Any
    served: list[Served] = field(default_factory=list)


@dataclass
class Scored:
    label: str
    tokens: int
    compression: float
    coverage: RelativeCoverage | None
    by_category: dict[str, RelativeCoverage] = field(default_factory=dict)


def _tokens(texts: Sequence[str]) -> list[int]:
    from memory.tokens import token_counts

    return token_counts(list(texts))


def _cut(text: str, tokens: int) -> str:
    from memory.tokens import _encoding

    encoding = _encoding()
    return str(encoding.decode(encoding.encode(text, disallowed_special=())[:tokens]))


def _count(text: str) -> int:
    from memory.tokens import token_count

    return token_count(text)


def score(
    label: str,
    histories: Sequence[History],
    texts: Sequence[Sequence[str]],  # per history, one text per question (or one for all)
    raw_words: Sequence[set[str]],
    raw_tokens: int,
    tokens: int,
) -> Scored:
    """Relative coverage of ``texts`` against the raw transcripts, overall and per category."""
    pairs: list[tuple[float, float]] = []
    by_category: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for history, history_texts, words in zip(histories, texts, raw_words, strict=True):
        if not history.questions:
            continue
        if len(history_texts) == 1:
            text_words = [content_words(history_texts[0])] * len(history.questions)
        else:
            text_words = [content_words(text) for text in history_texts]
        for question, found in zip(history.questions, text_words, strict=True):
            raw_score = coverage(question.answer, words)
            if raw_score is None:
                continue
            pair = (coverage(question.answer, found) or 0.0, raw_score)
            pairs.append(pair)
            by_category[question.category].append(pair)
    return Scored(
        label=label,
        tokens=tokens,
        compression=raw_tokens / tokens if tokens else float("inf"),
        coverage=relative_coverage(pairs) if pairs else None,
        by_category={c: relative_coverage(p) for c, p in sorted(by_category.items())},
    )


def note_figures(histories: Sequence[History], served: Sequence[Served]) -> dict[str, Any]:
    notes = [(h, n) for h, s in zip(histories, served, strict=True) for n in s.notes]
    reasons = [garbled_reason(n.text) for _, n in notes]
    within = [
        n.window_start_at is not None
        and n.window_end_at is not None
        and n.window_start_at.date() <= n.observed_at.date() <= n.window_end_at.date()
        for _, n in notes
    ]
    referenced = [n.referenced_at.date() <= h.asked_at.date() for h, n in notes if n.referenced_at]
    reflections = sum(s.reflected.reflections for s in served)
    source_tokens = sum(s.reflected.source_tokens for s in served)
    reflection_tokens = sum(s.reflected.reflection_tokens for s in served)
    return {
        "notes": len(notes),
        "reflections": reflections,
        "single_source": sum(s.reflected.single_source for s in served) / reflections
        if reflections
        else 0.0,
        "reflector_compression": source_tokens / reflection_tokens if reflection_tokens else 0.0,
        "garbled": _share([r is not None for r in reasons]),
        "garbled_kinds": Counter(r for r in reasons if r),
        "elided": _share(["…" in n.text or "..." in n.text for _, n in notes]),
        "within_span": _share(within),
        "referenced": len(referenced),
        "referenced_not_later": _share(referenced),
        "malformed_context": sum(len(malformed_pseudonyms(s.text)) for s in served),
        "malformed_notes": sum(1 for _, n in notes if malformed_pseudonyms(n.text)),
        "recent_tokens": sum(_tokens([s.recent_text for s in served])),
    }


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        cells = (
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        print("| " + " | ".join(cells) + " |")


def _ratio(value: RelativeCoverage | None) -> str:
    return f"{value.ratio:.3f}" if value and value.counted else "-"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def ingest_all(pipeline: Pipeline, dataset: Dataset, variants: Sequence[Variant]) -> dict[str, Run]:
    """Every history through every variant; ``LABEL+reflect`` after one Reflector run."""
    runs: dict[str, Run] = {}
    for variant in variants:
        workspace = pipeline.workspace(
            re.sub(r"\W+", "-", f"{dataset.key}-{variant.label}"),
            redact_before_observation=variant.redact_before_observation,
            fidelity=variant.fidelity,
        )
        runs[variant.label] = Run(variant.label, workspace)
        if variant.reflect:
            runs[f"{variant.label}+reflect"] = Run(f"{variant.label}+reflect", workspace)
    for history in dataset.histories:
        for variant in variants:
            engine = pipeline.engine_seconds
            conversation, cpu = pipeline.ingest(runs[variant.label].workspace, history, sweep=True)
            served = pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
            runs[variant.label].served.append(served)
            if variant.reflect:
                cpu += pipeline.reflect(conversation)
                runs[f"{variant.label}+reflect"].served.append(
                    pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
                )
    return runs


def run_dataset(
    pipeline: Pipeline,
    dataset: Dataset,
    variants: Sequence[Variant],
    *,
    samples: bool,
    seed: int,
) -> None:
    histories = dataset.histories
    raw_each = [sum(_tokens(h.texts)) for h in histories]
    raw = sum(raw_each)
    raw_words = [content_words("\n".join(h.texts)) for h in histories]
    print(f"\n## {dataset.title}")
    print(
        f"{len(histories)} conversations, {sum(len(h.sessions) for h in histories):,} sessions, "
        f"{sum(len(h.turns) for h in histories):,} turns, {raw:,} raw tokens, "
        f"{dataset.questions:,} questions"
    )
    for line in dataset.notes:
        print(line)
    wall = time.monotonic()
    runs = ingest_all(pipeline, dataset, variants)
    print(f"pipeline wall time {time.monotonic() - wall:.0f} s (ingest, runs, context)")
    wall = time.monotonic()
    values = {label: pipeline.pseudonym_values(run.workspace) for label, run in runs.items()}
    has_questions = dataset.questions > 0

    curves: dict[str, list[Scored]] = {"first-k": [], "salient-m": []}
    for size in BASELINE_SIZES:
        for name, letter, make in (
            ("first-k", "k", first_k_text),
            ("salient-m", "m", salient_m_text),
        ):
            texts = [make(h.turns, size) for h in histories]
            curves[name].append(
                score(f"{name} {letter}={size}", histories, [[t] for t in texts], raw_words,
                      raw, sum(_tokens(texts)))
            )  # fmt: skip
    indexes = [Bm25Turns(h.texts) for h in histories] if has_questions else []

    rows, scored, readable_scored, bm25 = [], {}, {}, {}
    for label, run in runs.items():
        memory_tokens = _tokens([s.memory_text for s in run.served])
        item = score(label, histories, [[s.memory_text] for s in run.served], raw_words, raw,
                     sum(memory_tokens))  # fmt: skip
        scored[label] = item
        readable = score(
            label, histories,
            [[read_back(s.memory_text, values[label])] for s in run.served], raw_words, raw,
            sum(memory_tokens),
        )  # fmt: skip
        readable_scored[label] = readable
        bm25[label] = score(
            f"BM25 at {label}'s budget", histories,
            [
                [index.within_budget(q.question, budget, count=_count, cut=_cut)
                 for q in h.questions]
                for h, index, budget in zip(histories, indexes, memory_tokens, strict=True)
            ] if has_questions else [[""] for _ in histories],
            raw_words, raw, sum(memory_tokens),
        )  # fmt: skip
        at_size = [
            interpolate_curve(
                [(b.compression, b.coverage.ratio) for b in curve if b.coverage], item.compression
            )
            if has_questions
            else None
            for curve in curves.values()
        ]
        base = bm25[label].coverage
        share = item.coverage.ratio / base.ratio if item.coverage and base and base.ratio else None
        rows.append(
            [
                label,
                f"{item.tokens:,}",
                f"{item.compression:.1f}x" if item.tokens else "-",
                _ratio(item.coverage),
                _ratio(readable.coverage),
                *(f"{v:.3f}" if v is not None else "-" for v in at_size),
                _ratio(bm25[label].coverage),
                f"{share:.2f}x" if share is not None else "-",
            ]
        )
    default = runs.get("default")
    if default is not None and has_questions:
        tail = [s.memory_text + "\n" + s.recent_text for s in default.served]
        item = score("default, memory + recent tail", histories, [[t] for t in tail], raw_words,
                     raw, sum(_tokens(tail)))  # fmt: skip
        rows.append([item.label, f"{item.tokens:,}", f"{item.compression:.1f}x",
                     _ratio(item.coverage), "", "", "", "", ""])  # fmt: skip
    stutter = _share([garbled_reason(t.content) == "repeat" for h in histories for t in h.turns])
    print(f"raw turns with a word said twice in a row: {stutter:.1%} (what notes may copy)")
    first = next(iter(scored.values())).coverage
    if first:
        print(
            f"raw transcripts keep {first.raw:.2f} of the answer words on average "
            f"({first.counted} questions scored, {first.raw_zero} left out: raw coverage 0)"
        )
    print()
    print_table(
        rows,
        ["memory", "tokens", "compression", "relative as served", "read back",
         "first-k at size", "salient-m at size", "BM25 at budget", "memory / BM25"],
    )  # fmt: skip

    for label, run in runs.items():
        cost = label_cost("\n".join(s.memory_text for s in run.served), values[label], _count)
        memory = scored[label].tokens
        print(
            f"labels in the memory, {label}: {cost.labels:,}, {cost.label_tokens:,} tokens "
            f"({cost.label_tokens / memory if memory else 0:.1%} of the memory); "
            f"written as their values {cost.value_tokens:,}"
        )

    figures = {label: note_figures(histories, run.served) for label, run in runs.items()}
    cpu = {
        label: (
            sum(s.engine_seconds for s in run.served) * 1e6 / raw,
            sum(s.cpu_seconds for s in run.served) * 1e6 / raw,
        )
        for label, run in runs.items()
    }
    print()
    print_table(
        [
            [
                label,
                f"{f['notes']:,}",
                f"{f['reflections']:,}",
                f"{f['single_source']:.1%}" if f["reflections"] else "-",
                f"{f['reflector_compression']:.1f}x" if f["reflections"] else "-",
                f"{f['garbled']:.2%}",
                f"{f['elided']:.1%}",
                f"{f['within_span']:.1%}",
                f"{f['referenced_not_later']:.1%} of {f['referenced']:,}",
                f"{f['malformed_context']:,} ({f['malformed_notes']:,} notes)",
                f"{f['recent_tokens']:,}",
                f"{cpu[label][0]:.1f} / {cpu[label][1]:.1f}",
            ]
            for label, f in figures.items()
        ],
        ["memory", "notes", "reflections", "single-source", "Reflector compression",
         "garbled", "elided", "dated in span", "referenced not after asked", "malformed",
         "recent tokens", "CPU ms/1k engine / runs"],
    )  # fmt: skip
    for label, f in figures.items():
        if f["garbled_kinds"]:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(f["garbled_kinds"].items()))
            print(f"garbled, {label}: {kinds}")

    people: dict[str, int] = Counter()
    for history in histories:
        people.update(history.people)
    main = main_people(people)
    print()
    pseudonym_rows = []
    labelled = {}
    for variant in variants:
        found = people_labels(values[variant.label], people)
        labelled[variant.label] = found
        counts = sorted((len(v) for v in found.by_person.values()), reverse=True)
        main_labelled, main_per_person = found.per_person_among(main)
        pseudonym_rows.append(
            [
                f"{variant.label} workspace",
                f"{found.person_labels:,}",
                f"{found.location_labels:,}",
                f"{found.people_labelled:,} of {len(people):,}" if people else "-",
                f"{found.per_person:.2f} (max {counts[0]}; {found.overlong} overlong)"
                if counts
                else "-",
                f"{main_per_person:.2f} ({main_labelled} of {len(main)})" if main else "-",
                f"{found.false_person:,} + {found.false_location:,}" if people else "-",
                f"{found.person_as_location:,}" if people else "-",
            ]
        )
    print_table(
        pseudonym_rows,
        ["pseudonyms", "PERSON", "LOCATION", "known people labelled", "PERSON labels per person",
         "per main person (1%+ of turns)", "false people (PERSON + LOCATION)",
         "people as LOCATION"],
    )  # fmt: skip

    if has_questions:
        print("\nbaselines (relative coverage of the raw turns cut to size)")
        print_table(
            [
                [b.label, f"{b.tokens:,}", f"{b.compression:.1f}x", _ratio(b.coverage)]
                for curve in curves.values()
                for b in curve
            ],
            ["baseline", "tokens", "compression", "relative"],
        )
        categories = sorted({q.category for h in histories for q in h.questions})
        print("\nrelative coverage per question category (questions scored)")
        columns = [
            *((s.label, s) for s in scored.values()),
            *((f"{s.label} read back", s) for s in readable_scored.values()),
        ]
        budget = bm25.get("default") or next(iter(bm25.values()))
        columns.append((budget.label, budget))
        print_table(
            [
                [category]
                + [
                    f"{v.ratio:.2f} ({v.counted})" if (v := s.by_category.get(category)) else "-"
                    for _, s in columns
                ]
                for category in categories
            ],
            ["category", *(name for name, _ in columns)],
        )

    print()
    target = TARGET_RELATIVE.get(dataset.key, TARGET_RELATIVE_DEFAULT)
    for label, item in scored.items():
        f = figures[label]
        checks: list[tuple[str, bool]] = []
        if item.coverage:
            checks.append((
                f"relative >= {target:.2f} at >= {TARGET_COMPRESSION:g}x",
                item.compression >= TARGET_COMPRESSION and item.coverage.ratio >= target,
            ))  # fmt: skip
            for name, curve in curves.items():
                points = [(b.compression, b.coverage.ratio) for b in curve if b.coverage]
                checks.append((
                    f"above {name}",
                    item.tokens > 0
                    and item.coverage.ratio > interpolate_curve(points, item.compression),
                ))  # fmt: skip
            base = bm25[label].coverage
            checks.append((
                f"within {TARGET_BM25_SHARE:g}x of BM25",
                bool(base and item.coverage.ratio >= TARGET_BM25_SHARE * base.ratio),
            ))  # fmt: skip
        if label.endswith("+reflect"):
            before = scored[label.removesuffix("+reflect")].coverage
            if item.coverage and before and before.ratio:
                checks.append((
                    f"keeps >= {TARGET_REFLECT_KEEPS:.0%} of {label.removesuffix('+reflect')}",
                    item.coverage.ratio >= TARGET_REFLECT_KEEPS * before.ratio,
                ))  # fmt: skip
        if f["reflections"]:
            checks.append(("no single-source reflection", f["single_source"] == 0))
            checks.append((
                f"Reflector compression >= {TARGET_REFLECTOR_COMPRESSION:g}x",
                f["reflector_compression"] >= TARGET_REFLECTOR_COMPRESSION,
            ))  # fmt: skip
        checks.append((f"garbled <= {TARGET_GARBLED:.0%}", f["garbled"] <= TARGET_GARBLED))
        checks.append(("malformed 0", f["malformed_context"] == 0))
        checks.append((f"dated in span >= {TARGET_DATED:.0%}", f["within_span"] >= TARGET_DATED))
        found_people = labelled.get(label.removesuffix("+reflect"))
        if people and found_people and found_people.people_labelled:
            checks.append((
                f"PERSON labels per person <= {TARGET_PER_PERSON:g}",
                found_people.per_person <= TARGET_PER_PERSON,
            ))  # fmt: skip
        print(f"targets, {label}: " + "; ".join(f"{c} {verdict(ok)}" for c, ok in checks))
    print(f"scoring wall time {time.monotonic() - wall:.0f} s")

    if samples:
        print_samples(runs, labelled, seed)


def print_samples(runs: dict[str, Run], labelled: dict[str, Any], seed: int) -> None:
    """The only content the bench prints: 20 notes of the ``default`` variant (its
    reflected run's where it wrote none), every note of it that reads as garbled, and,
    per known person, the labels it got."""
    label = next(iter(runs))
    if not any(s.notes for s in runs[label].served) and f"{label}+reflect" in runs:
        label = f"{label}+reflect"
    notes = [n for s in runs[label].served for n in s.notes]
    print(f"\n{SAMPLE_NOTES} random notes ({label} variant, seed {seed})")
    for note in random.Random(seed).sample(notes, min(SAMPLE_NOTES, len(notes))):
        print(f"- [{note.kind}, observed {note.observed_at:%Y-%m-%d}] {note.text}")
    garbled = [(reason, n) for n in notes if (reason := garbled_reason(n.text))]
    if garbled:
        print(f"\ngarbled notes ({label} variant, {len(garbled)})")
        for reason, note in garbled:
            print(f"- [{reason}] {note.text}")
    for workspace, found in labelled.items():
        if found.by_person:
            people = "; ".join(f"{p} {len(v)}" for p, v in found.by_person.items())
            print(f"PERSON labels per known person ({workspace} workspace): {people}")
