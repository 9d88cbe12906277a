"""Memory quality on conversations nobody tuned for: does the memory ``GET /context``
serves keep what a later question needs, how small is it, how readable, how well dated,
and what do its pseudonyms look like. Per dataset, every variant side by side.

Run: ``.venv/bin/python bench/memory_quality.py`` runs every dataset whole (well over an
hour on two cores). ``--datasets lme_s,lme_oracle,friendsqa,qmsum,abcd`` picks datasets;
``--s-limit N`` or ``--s-sample N``, ``--oracle-sample N``, ``--friendsqa-limit N``
(episodes) and ``--qmsum-limit N`` (series) size them. A quick run:
``--datasets friendsqa --friendsqa-limit 2`` (under a minute); the run of
docs/benchmarks/2026-12-04-issue22-before.md (17 minutes on two busy cores):
``--s-sample 6 --oracle-sample 60 --qmsum-limit 8 --samples``. It prints figures only,
never message content; ``--samples`` also prints 20 random notes per dataset (seeded)
and the labels each known person got: the only content printed. ``--fidelity-curve``
adds ``default`` at the other fidelity levels (no reflect run). Reads
``../shared/data/conversations/``; nothing from it is copied into the repository.

Data (bench/quality/datasets.py says how each file becomes conversations)
- ``lme_s``: ``longmemeval/longmemeval_s_subset68.json``, 68 questions, each with its
  whole haystack of 42-55 sessions (about 115k tokens); the first ``--s-limit``, or a
  seeded sample of ``--s-sample`` (the file is sorted by question type).
- ``lme_oracle``: ``longmemeval/longmemeval_oracle.json``, 500 questions with their
  evidence sessions only; a seeded sample of ``--oracle-sample``.
  LongMemEval's abstention questions (``_abs``) are left out and counted.
- ``friendsqa``: 17 TV episodes, multi-party, every turn by a named speaker (sent as the
  message's ``name``, role ``user``), questions whose answers are spans of the dialogue.
  No dates in the data: the bench dates scene ``i`` 2024-03-04 09:00 UTC plus ``i`` days,
  turns a minute apart.
- ``qmsum``: AMI design meetings, 3-4 per series, four speakers named by role
  ("Project Manager", sent as ``name``), questions with written answers (the transcript
  itself covers about 0.84 of their words). No dates: meetings a day apart, turns ten
  seconds apart.
- ``abcd``: 3 customer-service dialogues (customer ``user``, agent ``assistant``,
  ``action`` turns ``tool`` messages), no questions: only the figures that need none.
  Its known people are the scenarios' ``customer_name``.
The raw transcript of a named turn is "Name: content"; of any other turn its content.

Ingest and pipeline (real code, a throwaway SQLite database; bench/quality/pipeline.py)
- One workspace per dataset and variant, one conversation per history, appended session
  by session through ``memory.services.messages.messages_append`` (at most 100 messages
  a call, as the bulk API takes them). ``messages_append`` schedules an Observer run
  at 30,000 unobserved tokens; the bench executes every scheduled run at once with
  ``observer_run_execute`` (what the Celery worker does), and any Reflector run that
  becomes due (40,000 tokens of active observations). The sweeper is played in message
  time before each session and once more when the questions are asked, so a
  conversation that went quiet for ``MEMDESK_OBSERVER_IDLE_MINUTES`` has its last stretch
  observed below the threshold, as in production; what is left unobserved stays as
  recent messages, scored apart: it is not memory.
- Variants: ``default`` (the product at its defaults: the private policy, messages
  pseudonymised before the Observer reads them); ``reflection-only redaction`` (a
  workspace with ``redact_before_observation`` off: observations are redacted in front
  of the Reflector only); and each ``+reflect``: the same conversations after one more
  on-demand Reflector run (``pipeline.run_now``), so that reflections are scored even
  where the histories are too short to make one due.

Scores (pure functions in bench/quality/scoring.py and baselines.py, tested in
``tests/memory/test_memory_quality_bench.py``)
- Memory is what ``context_for_conversation(fmt="text")`` renders under
  ``## Reflections`` and ``## Observations``; the ``## Recent Messages`` tail is
  reported apart (the ``default, memory + recent tail`` row).
- Content words of a text: lower-cased; dates normalised to one token ("May 3",
  "3rd of May", "2023/05/03" are all ``date-05-03``; a year given stays beside it);
  numbers as words and digits equal; stopwords dropped; a trailing plural "s" dropped
  on words of four letters or more.
- Coverage of a question: the share of the gold answer's content words found among the
  content words of a text. Relative coverage: the sum of memory coverage over questions
  divided by the sum of raw-transcript coverage over the same questions; questions
  whose raw transcript scores 0 are excluded and counted. ``relative as served`` scores
  the memory with its pseudonyms; ``read back`` the same memory with each label
  replaced by the value the workspace's mapping holds (what a person allowed to reveal
  reads). Per question category as well, as served and read back (FriendsQA's "Who"
  questions: 0.25 as served, 0.94 read back).
- Labels in the memory: how many pseudonym labels the served memory holds, their tokens
  and their share of the memory, and the tokens their values would take written out
  (``scoring.label_cost``; what the private default costs in compression).
- Compression: cl100k tokens of the raw transcript / tokens of the memory text.
- Baselines, on the raw turns, scored the same way: ``first-k`` (the first k words of
  each turn, k = 5, 10, 20, 40) and ``salient-m`` (capitalised words, numbers and words
  of 7+ letters, at most m per turn), read at the memory's compression by linear
  interpolation in log compression between the two measured sizes around it (the
  nearest size outside the range); and ``BM25 at budget``: per question, the
  conversation's turns ranked against the question by Okapi BM25 (``rank-bm25``),
  taken in rank order until that conversation's memory token count is used.
  ``memory / BM25`` is the ratio of the two relative coverages (target >= 0.9x).
- Notes (observations and reflections served): ``garbled``, the share cut mid-thought
  (ending with "…", ";", "," or a word no finished clause ends with), with a word said
  twice in a row, or with an empty list item; ``elided``, the share with a "…" anywhere;
  ``dated in span``, the share whose ``observed_at`` day lies within their sources' span;
  ``referenced not after asked``, the share of notes with a ``referenced_at`` not later
  than the day the questions are asked.
- Reflections: ``single-source``, the share of active reflections citing exactly one
  observation; ``Reflector compression``, tokens of the observations the active
  reflections cite / tokens of those reflections.
- ``malformed``: labels in the whole served context (memory and recent messages) that
  look like pseudonyms but are not written ``<ENTITY_TYPE_n>`` (``<PERSON158>``,
  ``PERSON131``, ``<PERSON_12``, ``person_3>``), by the product's own
  definition (``governance.redaction.labels.malformed_pseudonyms``); in brackets, the
  notes holding one.
- Pseudonyms, per workspace, from its mapping after every run: PERSON and LOCATION
  labels allocated; where the dataset names people (FriendsQA speakers, ABCD
  customers), the PERSON labels whose value names a known person (shares a word of the
  name, titles, possessives and stopwords left out: "Monica", "Mr. Geller", "I'm Monica
  Geller"; a value several names fit goes to the name it shares most words with, then to
  the one who speaks most), per known person labelled (target <= 1.2), and how many of
  them are overlong (the value holds words beyond the name: a span that swallowed a
  word); the same per main person (one who speaks at least 1% of the turns: FriendsQA's
  friends rather than its one-line "Man"); false people: PERSON and LOCATION labels
  whose value names no known person (on FriendsQA and ABCD mostly exclamations,
  products, brands and months; a real place counts too); people as LOCATION: a known
  person's name labelled a place.
- Cost: CPU ms (``time.process_time``) per 1,000 raw input tokens, in the engine's
  ``observe`` and ``reflect`` alone, and in the whole pipeline runs (claim, redaction
  gates, engine, storing). Ingest and scoring are not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.quality.datasets import Dataset

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("lme_s", "lme_oracle", "friendsqa", "qmsum", "abcd")
# --variants names -> the labels of bench/quality/report.py's DEFAULT_VARIANTS
VARIANT_NAMES = {"default": "default", "reflection-only": "reflection-only redaction"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--datasets",
        default=",".join(DATASETS),
        help=f"comma-separated, from {', '.join(DATASETS)} (default: all)",
    )
    parser.add_argument("--s-limit", type=int, default=None, help="first N LongMemEval_S questions")
    parser.add_argument(
        "--s-sample", type=int, default=None, help="a seeded sample of N LongMemEval_S questions"
    )
    parser.add_argument("--oracle-sample", type=int, default=100)
    parser.add_argument("--friendsqa-limit", type=int, default=None, help="first N episodes")
    parser.add_argument("--qmsum-limit", type=int, default=None, help="first N series")
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--samples", action="store_true", help="print 20 notes per dataset")
    parser.add_argument(
        "--variants",
        default="",
        help="comma-separated redaction variants to run, from default, reflection-only "
        "(default: both); for a quick look while tuning, not for the figures on the page",
    )
    parser.add_argument(
        "--fidelity-curve",
        action="store_true",
        help="also run the default variant at the other fidelity levels",
    )
    # The side-by-side redaction variants replaced the separate redaction run; the flag
    # stays so that older commands keep working.
    parser.add_argument("--redaction-sample", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    chosen = [name.strip() for name in args.datasets.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in DATASETS]
    if unknown or not chosen:
        parser.error(f"--datasets takes names from {', '.join(DATASETS)}; got {args.datasets!r}")
    args.datasets = chosen
    args.variants = [name.strip() for name in args.variants.split(",") if name.strip()]
    if unknown_variants := [v for v in args.variants if v not in VARIANT_NAMES]:
        parser.error(
            f"--variants takes names from {', '.join(VARIANT_NAMES)}; got {unknown_variants}"
        )
    return args


def load_dataset(key: str, args: argparse.Namespace) -> Dataset:
    from bench.quality import datasets as d

    if key == "lme_s":
        histories, abstentions = d.load_longmemeval(
            d.LONGMEMEVAL / "longmemeval_s_subset68.json",
            sample=args.s_sample,
            limit=args.s_limit,
            seed=args.seed,
        )
        chosen = (
            f"a seeded sample of {args.s_sample} (seed {args.seed})" if args.s_sample else ""
        ) or (f"the first {args.s_limit}" if args.s_limit is not None else "all")
        return d.Dataset(
            key,
            f"LongMemEval_S subset (whole haystacks; {chosen})",
            histories,
            [f"{abstentions} abstention questions excluded"],
        )
    if key == "lme_oracle":
        histories, abstentions = d.load_longmemeval(
            d.LONGMEMEVAL / "longmemeval_oracle.json", sample=args.oracle_sample, seed=args.seed
        )
        return d.Dataset(
            key,
            f"LongMemEval oracle (evidence sessions only, seeded sample of {len(histories)})",
            histories,
            [f"{abstentions} abstention questions excluded before sampling (seed {args.seed})"],
        )
    if key == "friendsqa":
        histories = d.load_friendsqa(d.FRIENDSQA, limit=args.friendsqa_limit)
        return d.Dataset(
            key,
            f"FriendsQA ({len(histories)} episodes)",
            histories,
            ["undated: the bench dates scenes a day apart, turns a minute apart"],
        )
    if key == "qmsum":
        histories = d.load_qmsum(d.QMSUM, limit=args.qmsum_limit)
        return d.Dataset(
            key,
            f"QMSum AMI ({len(histories)} series)",
            histories,
            ["undated: the bench dates meetings a day apart, turns ten seconds apart"],
        )
    histories = d.load_abcd(d.ABCD)
    return d.Dataset(key, f"ABCD sample ({len(histories)} dialogues, no questions)", histories)


def main() -> None:
    args = parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    import harness

    harness.stop_on_sigterm()
    started = time.monotonic()
    with harness.scratch_django():
        from bench.quality.pipeline import Pipeline
        from bench.quality.report import DEFAULT_VARIANTS, Variant, run_dataset
        from memory.engines.base import FIDELITIES

        pipeline = Pipeline()
        pipeline.clock_engine()
        from django.conf import settings

        chosen = {VARIANT_NAMES[name] for name in args.variants}
        variants = [v for v in DEFAULT_VARIANTS if not chosen or v.label in chosen]
        if args.fidelity_curve:
            variants += [
                Variant(f"default, fidelity={level}", fidelity=level, reflect=False)
                for level in FIDELITIES
                if level != settings.MEMDESK_OBSERVER_FIDELITY
            ]
        print("Memory quality (extractive engine, default thresholds; variants side by side)")
        for key in args.datasets:
            run_dataset(
                pipeline, load_dataset(key, args), variants, samples=args.samples, seed=args.seed
            )
    print(f"\ntotal wall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
