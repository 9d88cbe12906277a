"""Throughput of PII detection: Memdesk's batched path against naive one-text-at-a-time
analyzer calls and against raw spaCy on the same pipeline and texts.

Run: ``.venv/bin/python bench/redaction_throughput.py [--texts 3000] [--repeat 3]
[--source short|contextual]`` (about ten minutes on two cores). Prints figures only,
never text.

Texts (``--source``): ``short`` (the default), the 100 sentences of
``presidio_generated_small.json`` and the 77 turns of ``abcd_sample.json``
(``../shared/data/``), repeated in order to ``--texts`` texts; ``contextual``, the first
``--texts`` texts of the contextual anonymizer corpus (chats, e-mail threads, records:
about 340 characters each, denser in PII).

Rows (each the best of ``--repeat`` runs, wall clock, after a warm-up):
- raw spaCy, full pipeline: ``nlp.pipe`` of the same model, every component (tok2vec,
  tagger, parser, attribute_ruler, lemmatizer, ner); the baseline of the 0.8x target;
- raw spaCy, same components: the parser disabled, as the engine runs it;
- naive: ``AnalyzerEngine.analyze`` per text (spaCy runs once per text);
- batched: ``RedactionEngine.detect`` (``nlp.pipe`` in batches, then the recognizers),
  for several batch sizes and process counts; ``+ redact`` adds applying the operators;
- batched, reuse: ``detect`` as the scan calls it (``reuse=True``): a text repeated in the
  batch is read once (the short source repeats its 177 texts; the contextual one does
  not). What earlier rounds kept is forgotten before each round.
The default workspace policy is used (the engine's default entity types).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")


def load_texts(count: int, source: str = "short") -> list[str]:
    if source == "contextual":
        corpus = DATA / "pii" / "contextual_anonymizer" / "spans_clean.json"
        return [item["text"] for item in json.loads(corpus.read_text())][:count]
    pii = json.loads((DATA / "pii" / "presidio_generated_small.json").read_text())
    dialogues = json.loads((DATA / "conversations" / "abcd_sample.json").read_text())
    base = [item["full_text"] for item in pii]
    base += [text for dialogue in dialogues for _, text in dialogue["original"]]
    return (base * (count // len(base) + 1))[:count]


def cpu_seconds(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def wall_seconds(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--source", choices=("short", "contextual"), default="short")
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"the evaluation data is not at {DATA}")

    import django

    django.setup()
    import spacy

    from governance.redaction.presidio import PolicySpec, engine, redact_text

    texts = load_texts(args.texts, args.source)
    chars = sum(len(t) for t in texts)
    print(f"{len(texts)} texts, {chars} characters, {chars / len(texts):.0f} per text")
    redaction = engine()
    # "replace": the engine's own cost, comparable with earlier runs (pseudonyms add
    # database round trips, which this benchmark does not measure).
    spec = PolicySpec(workspace_id="bench", version=1, default_operator="replace")
    print(f"pipeline {redaction.model_name}, spaCy {spacy.__version__}, cores {os.cpu_count()}")

    raw = spacy.load(redaction.model_name)
    raw_same = spacy.load(redaction.model_name, exclude=["parser"])
    analyzer = redaction.analyzer
    entities = spec.analysed_entities
    naive_share = 3  # naive calls run on a third of the texts (slow, and linear) x 3

    def naive() -> None:
        for text in texts[: len(texts) // naive_share]:
            analyzer.analyze(text=text, language="en", entities=entities, score_threshold=0.4)

    def detect_reusing() -> None:
        redaction.found_before.clear()
        redaction.detect(texts, spec=spec, reuse=True)

    def detect_and_redact() -> None:
        for text, detections in zip(texts, redaction.detect(texts, spec=spec), strict=True):
            redact_text(text, detections, spec=spec)

    # One process: CPU time of this process, so that other work on a shared machine does
    # not count; each row the best of --repeat rounds, the rows interleaved in a round.
    single: dict[str, tuple[Callable[[], object], float]] = {
        "raw spaCy nlp.pipe, full pipeline, batch 64": (
            lambda: list(raw.pipe(texts, batch_size=64)),
            1,
        ),
        "raw spaCy nlp.pipe, full pipeline, batch 256": (
            lambda: list(raw.pipe(texts, batch_size=256)),
            1,
        ),
        "raw spaCy nlp.pipe, parser off, batch 64": (
            lambda: list(raw_same.pipe(texts, batch_size=64)),
            1,
        ),
        "naive AnalyzerEngine.analyze per text": (naive, naive_share),
        **{
            f"batched detect, batch {size}, 1 process": (
                lambda size=size: redaction.detect(texts, spec=spec, batch_size=size),
                1,
            )
            for size in (1, 16, 64, 256)
        },
        "batched detect + redact, batch 64, 1 process": (detect_and_redact, 1),
        "batched detect, reuse, batch 64, 1 process": (detect_reusing, 1),
    }
    best = {label: float("inf") for label in single}
    for run, _ in single.values():
        run()  # warm-up: lazily built recognizers, caches
    for _ in range(args.repeat):
        for label, (run, scale) in single.items():
            best[label] = min(best[label], cpu_seconds(run) * scale)
    for label, seconds in best.items():
        print(f"{label:48s} {len(texts) / seconds:8.0f} texts/s {chars / seconds:10.0f} chars/s")

    # Two processes: CPU time cannot add up the children, so wall clock, best of two.
    two = min(
        wall_seconds(lambda: redaction.detect(texts, spec=spec, batch_size=64, n_process=2))
        for _ in range(2)
    )
    one_wall = min(wall_seconds(lambda: redaction.detect(texts, spec=spec)) for _ in range(2))
    print(
        f"{'batched detect, batch 64, 2 processes (wall)':48s} {len(texts) / two:8.0f} texts/s"
        f" {chars / two:10.0f} chars/s"
    )
    print(
        f"{'batched detect, batch 64, 1 process (wall)':48s} {len(texts) / one_wall:8.0f} "
        f"texts/s {chars / one_wall:10.0f} chars/s"
    )

    raw_full = min(
        best["raw spaCy nlp.pipe, full pipeline, batch 64"],
        best["raw spaCy nlp.pipe, full pipeline, batch 256"],
    )
    ours = best["batched detect, batch 64, 1 process"]
    print()
    print(f"batched (64, 1) / raw spaCy full pipeline:  {raw_full / ours:.2f}x  (target 0.8x)")
    print(
        "batched (64, 1) / raw spaCy, parser off:    "
        f"{best['raw spaCy nlp.pipe, parser off, batch 64'] / ours:.2f}x"
    )
    print(
        "detect + redact / raw spaCy full pipeline:  "
        f"{raw_full / best['batched detect + redact, batch 64, 1 process']:.2f}x"
    )
    print(
        "batched, reuse / raw spaCy full pipeline:   "
        f"{raw_full / best['batched detect, reuse, batch 64, 1 process']:.2f}x"
    )
    print(
        "batched (64, 1) / naive per-text calls:     "
        f"{best['naive AnalyzerEngine.analyze per text'] / ours:.2f}x"
    )


if __name__ == "__main__":
    main()
