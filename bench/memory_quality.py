"""Memory quality on LongMemEval: does the memory ``GET /context`` serves keep what a later
question needs, how small is it, how readable, and how well dated.

Run: ``.venv/bin/python bench/memory_quality.py --fidelity-curve`` (about 8 minutes on two
cores; prints figures only, never message content). ``--samples`` also prints 20 random
notes per dataset for a reader to judge: the only place content is printed.
``--fidelity-curve`` adds the ``default`` variant at the other fidelity levels (S subset
only; about 3 minutes more). ``--s-limit N`` and ``--oracle-sample N`` shrink the
run; ``--redaction-sample N`` sizes the redaction run. Reads
``../shared/data/conversations/longmemeval/``; nothing from it is copied into the
repository.

Data
- ``longmemeval_s_subset68.json`` (the headline): 68 questions, each with its whole
  haystack of 42-55 sessions (about 115k tokens).
- ``longmemeval_oracle.json``: 500 questions with their evidence sessions only; a seeded
  sample of ``--oracle-sample`` questions (default 100) keeps the run short.
- Abstention questions (``question_id`` ending ``_abs``, answer "not enough
  information") are excluded from every figure and counted: their gold answer names
  nothing the memory should keep.

Ingest and pipeline (real code, a throwaway SQLite database)
- One workspace per variant, one fresh conversation per question. Sessions are sorted by
  their ``haystack_dates`` (about a third of the haystacks are listed out of order) and
  appended session by session through ``memory.services.messages.messages_append`` (chunks of at
  most 100 messages, as the bulk API takes them); turn ``i`` of a session is dated the
  session's date plus ``i`` minutes.
- ``default`` (the product at its defaults, sweeper included): ``messages_append``
  schedules an Observer run when the unobserved tokens reach 30,000; the bench executes
  every scheduled run at once with ``observer_run_execute`` (what the Celery worker
  does), and any Reflector run that becomes due (40,000 tokens of active observations)
  with ``reflector_run_execute``. The sweeper is played in message time: after each
  session the conversation's ``updated_at`` is set to the session's last turn (a
  queryset ``update()``: ``messages_append`` records the wall clock, and the bench writes
  a year of sessions in seconds), and before the next session, and once more at the
  question's date, the bench calls what ``pipeline_sweep`` calls for a conversation,
  ``observer_schedule_if_due(now=...)`` and ``reflector_schedule_if_due``, with ``now``
  the next session's start, and executes what they schedule. So a conversation that
  went quiet for ``MEMDESK_OBSERVER_IDLE_MINUTES`` (360) has its last stretch observed
  below the threshold, as in production; what is left unobserved at the end stays as
  recent messages: scored apart, it is not memory.
- ``default+reflect``: the ``default`` conversations after one more on-demand Reflector
  run (``pipeline.run_now``), so that the reflections (which 115k tokens rarely make due
  at 40,000 observation tokens) are scored too.
- ``threshold only``: ``default`` without the sweeper (runs at 30,000 unobserved tokens
  only): what the product serves between sweeps, and what it served before the idle rule.
- ``default, fidelity=LEVEL`` (``--fidelity-curve``, S subset only): ``default`` in a
  workspace whose ``fidelity`` is LEVEL, for each level of
  ``memory.engines.base.FIDELITIES`` other than ``MEMDESK_OBSERVER_FIDELITY`` (the
  default level is the ``default`` row itself). Read with the baselines, the rows give
  the compression / coverage curve a workspace's fidelity setting chooses from.
- Default redaction policy: a workspace's policy is created with its defaults
  (``redaction_policy_get_or_create``), which redact observations in front of the
  Reflector but not messages before observation. What redaction costs is measured on
  ``--redaction-sample`` S questions (default 3, seeded: Presidio is slow on
  115k-token haystacks): the ``default`` variant with ``redact_before_observation``
  switched on, against the same questions with the default.

Scores (the scoring functions are pure; they and the ingest are tested in
``tests/memory/test_memory_quality_bench.py``)
- Memory is what ``context_for_conversation(fmt="text")`` renders under
  ``## Reflections`` and ``## Observations`` (prompt lines with marker and date); the
  ``## Recent Messages`` tail is reported separately.
- Content words of a text: lower-cased; dates normalised to one token ("May 3",
  "3rd of May", "2023/05/03", "2023-05-03" are all ``date-05-03``; a year given stays a
  number beside it); numbers as words and digits equal ("three" = "3", "5,850" = "5850");
  stopwords dropped; a trailing plural "s" dropped on words of four letters or more.
- Coverage of a question: the share of the gold answer's content words found among the
  content words of a text. Relative coverage: the sum of memory coverage over questions
  divided by the sum of raw-session coverage over the same questions (a ratio of means);
  questions whose raw sessions score 0 are excluded and counted. Per question type as
  well.
- Compression: cl100k tokens of the raw message contents / tokens of the memory text.
- Baselines, scored the same way on the same questions: ``first-k`` (the first k words of
  each turn, k = 5, 10, 20, 40) and ``salient-m`` (each turn's capitalised words, numbers
  and words of 7+ letters, in order, at most m per turn, m = 5, 10, 20, 40).
- Above the baselines: at the engine's compression, the engine's relative coverage must
  exceed each baseline's curve there (linear interpolation in log compression between
  the two measured sizes around it; the nearest size outside the measured range).
- Garbled lines: the share of note texts (observations and reflections) cut mid-thought
  (ending with "…", "...", ";", "," or a word no finished clause ends with: "and",
  "because", "the", "of", ...; "since" and "that" can end one), with a word or
  possessive said twice in a row ("User's User's", "the the"; "that that" and "had had"
  are grammatical and allowed), or with an empty list item ("; ;", ", ,", "since ;").
  Reported beside it, not counted as garbled: the share of notes with an elision ("…")
  anywhere, where the engine cut a clause short inside the line.
- Dates: the share of notes whose ``observed_at`` day lies within their sources' span
  (``window_start_at``..``window_end_at``, by day), and the share of notes with a
  ``referenced_at`` whose day is not later than the question date.
- Cost: CPU ms (``time.process_time``) per 1,000 raw input tokens, twice: in the
  engine's ``observe`` and ``reflect`` alone (the target), and in the whole pipeline runs
  (claim, redaction gates, engine, storing). Ingest and scoring are not counted.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "conversations" / "longmemeval"

TYPES = (
    "temporal-reasoning",
    "knowledge-update",
    "multi-session",
    "single-session-user",
    "single-session-assistant",
    "single-session-preference",
)
BASELINE_SIZES = (5, 10, 20, 40)
SAMPLE_NOTES = 20
TARGET_COMPRESSION = 5.0
TARGET_RELATIVE_COVERAGE = 0.80
TARGET_GARBLED = 0.02
TARGET_DATED = 0.95
TARGET_CPU_MS = 5.0  # per 1,000 input tokens

# --------------------------------------------------------------------------- scoring


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


STOPWORDS = _wordset(
    """a an the and or but nor so yet to of in on at for with by from as into onto about
    over under than then that this these those there here it its it's is are was were be
    been being am do does did done have has had having i me my mine we us our you your
    yours he him his she her they them their what which who whom whose when where why how
    all any some no not also just only very really too more most much many such own same
    can could would should will shall may might must if because since while during before
    after again once up down out off s t user user's assistant would like prefer
    preferred prefers"""
)
NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5",
    "six": "6", "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11",
    "twelve": "12", "thirteen": "13", "fourteen": "14", "fifteen": "15", "sixteen": "16",
    "seventeen": "17", "eighteen": "18", "nineteen": "19", "twenty": "20", "thirty": "30",
    "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80",
    "ninety": "90", "hundred": "100", "thousand": "1000",
}  # fmt: skip
MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}  # fmt: skip
_MONTH = r"(?P<{}>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<{}>(?:19|20)\d\d))?"
DATE_PATTERNS = (
    # 2023/05/03, 2023-05-03
    re.compile(r"\b(?P<y>(?:19|20)\d\d)[/-](?P<m>[01]?\d)[/-](?P<d>[0-3]?\d)\b"),
    # May 3, May 3rd, 2023
    re.compile(
        r"\b" + _MONTH.format("m") + r"\s+" + _DAY.format("d") + r"\b" + _YEAR.format("y"),
        re.IGNORECASE,
    ),
    # 3 May, 3rd of May 2023
    re.compile(
        r"\b" + _DAY.format("d") + r"\s+(?:of\s+)?" + _MONTH.format("m") + r"\b"
        + _YEAR.format("y"),
        re.IGNORECASE,
    ),
)  # fmt: skip
WORD = re.compile(r"date-\d\d-\d\d|\d+(?:[.,]\d+)*|[a-z]+(?:'[a-z]+)?")


def normalise_dates(text: str) -> str:
    """Rewrite every date expression as ``date-MM-DD`` (plus its year, when given)."""

    def replace(match: re.Match[str]) -> str:
        month = match.group("m")
        month_number = int(month) if month.isdigit() else MONTHS[month.lower()]
        day = int(match.group("d"))
        if not (1 <= month_number <= 12 and 1 <= day <= 31):
            return match.group(0)
        year = match.group("y")
        return f" date-{month_number:02d}-{day:02d} " + (f"{year} " if year else "")

    for pattern in DATE_PATTERNS:
        text = pattern.sub(replace, text)
    return text


def _normal_word(word: str) -> str:
    if word[0].isdigit():
        number = word.replace(",", "")
        return number[:-2] if number.endswith(".00") else number
    word = NUMBER_WORDS.get(word, word)
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def content_words(text: str) -> set[str]:
    """The set of normalised content words of ``text`` (see the module docstring)."""
    words = set()
    for raw in WORD.findall(normalise_dates(text).lower()):
        if raw in STOPWORDS:
            continue
        word = _normal_word(raw)
        if word and word not in STOPWORDS:
            words.add(word)
    return words


def coverage(answer: str, text_words: set[str]) -> float | None:
    """Share of the answer's content words in ``text_words``; None if it has none."""
    wanted = content_words(answer)
    if not wanted:
        return None
    return len(wanted & text_words) / len(wanted)


@dataclass
class RelativeCoverage:
    ratio: float  # sum of memory coverage / sum of raw coverage, raw > 0 only
    memory: float  # mean memory coverage over the questions counted
    raw: float  # mean raw coverage over the questions counted
    counted: int
    raw_zero: int  # questions left out because the raw sessions score 0


def relative_coverage(pairs: Iterable[tuple[float, float]]) -> RelativeCoverage:
    """``pairs``: (memory coverage, raw coverage) per question."""
    kept = [(m, r) for m, r in pairs]
    counted = [(m, r) for m, r in kept if r > 0]
    memory_sum = sum(m for m, _ in counted)
    raw_sum = sum(r for _, r in counted)
    n = len(counted)
    return RelativeCoverage(
        ratio=memory_sum / raw_sum if raw_sum else 0.0,
        memory=memory_sum / n if n else 0.0,
        raw=raw_sum / n if n else 0.0,
        counted=n,
        raw_zero=len(kept) - n,
    )


# Words a finished clause does not end with. "since", "that", "in" and the like are left
# out: "User hasn't found it since" and "walk User through that" are complete.
DANGLING = _wordset("and or but nor because the a an to of with than my your their our")
ALLOWED_REPEATS = frozenset({"that", "had"})
REPEATED_WORD = re.compile(r"\b([\w]+(?:'s)?)\s+\1\b", re.IGNORECASE)
EMPTY_ITEM = re.compile(r"[;,]\s*[;,]|\b(?:since|because|and|or|the|a|an|of|with|to)\s+[;,]")


def garbled_reason(line: str) -> str | None:
    """Why a note reads as garbled ("cut", "repeat", "empty item"), or None."""
    text = line.strip()
    if text.endswith(("…", "...")) or text.endswith((";", ",")):
        return "cut"
    last = re.findall(r"[\w']+", text[-30:].lower())
    if last and last[-1] in DANGLING and not text.endswith((".", "!", "?", ")", '"')):
        return "cut"
    for match in REPEATED_WORD.finditer(text):
        if match.group(1).lower() not in ALLOWED_REPEATS and not match.group(1).isdigit():
            return "repeat"
    if EMPTY_ITEM.search(text):
        return "empty item"
    return None


def interpolate_curve(points: Sequence[tuple[float, float]], compression: float) -> float:
    """A baseline's coverage at ``compression``: linear in log(compression) between the two
    measured (compression, coverage) points around it; the nearest point outside them."""
    ordered = sorted(points)
    if compression <= ordered[0][0]:
        return ordered[0][1]
    if compression >= ordered[-1][0]:
        return ordered[-1][1]
    for (c0, v0), (c1, v1) in zip(ordered, ordered[1:], strict=False):
        if c0 <= compression <= c1:
            if c1 == c0:
                return max(v0, v1)
            share = (math.log(compression) - math.log(c0)) / (math.log(c1) - math.log(c0))
            return v0 + share * (v1 - v0)
    return ordered[-1][1]


def first_words(turn: str, k: int) -> str:
    return " ".join(turn.split()[:k])


SALIENT = re.compile(r"^(?:[A-Z][\w'-]*|[\d$][\d.,$%:/-]*|[A-Za-z'-]{7,})$")


def salient_words(turn: str, m: int) -> str:
    picked = [w for w in (t.strip('.,;:!?"()[]*') for t in turn.split()) if w and SALIENT.match(w)]
    return " ".join(picked[:m])


def parse_dataset_date(value: str) -> datetime:
    """The dataset's "2023/08/11 (Fri) 15:58" as an aware UTC datetime."""
    day, _, clock = value.partition(" (")
    clock = clock.partition(") ")[2] or "00:00"
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


# --------------------------------------------------------------------------- running


@dataclass
class Question:
    question_id: str
    question_type: str
    answer: str
    question_date: datetime
    sessions: list[tuple[datetime, list[dict[str, Any]]]]  # sorted by date

    @property
    def turns(self) -> list[str]:
        return [t["content"] for _, session in self.sessions for t in session if t["content"]]


def load(name: str, sample: int | None, seed: int) -> tuple[list[Question], int]:
    data = json.loads((DATA / name).read_text())
    abstentions = sum(1 for q in data if q["question_id"].endswith("_abs"))
    data = [q for q in data if not q["question_id"].endswith("_abs")]
    if sample is not None and sample < len(data):
        data = random.Random(seed).sample(data, sample)
    questions = []
    for q in data:
        sessions = sorted(
            zip((parse_dataset_date(d) for d in q["haystack_dates"]), q["haystack_sessions"],
                strict=True),
            key=lambda pair: pair[0],
        )  # fmt: skip
        questions.append(
            Question(
                question_id=q["question_id"],
                question_type=q["question_type"],
                answer=str(q["answer"]),
                question_date=parse_dataset_date(q["question_date"]),
                sessions=sessions,
            )
        )
    return questions, abstentions


@dataclass
class Note:
    text: str
    observed_at: datetime
    referenced_at: datetime | None
    window_start_at: datetime | None
    window_end_at: datetime | None
    kind: str  # observation | reflection


@dataclass
class Served:
    """What the context serves for one question under one variant."""

    memory_text: str
    recent_text: str
    notes: list[Note]
    cpu_seconds: float  # in pipeline runs
    engine_seconds: float  # in the engine's observe and reflect alone


def split_context(text: str) -> tuple[str, str]:
    """(memory sections, recent-messages section) of a rendered text context."""
    memory, recent = [], []
    for section in text.split("\n\n## "):
        section = section.removeprefix("## ")
        (recent if section.startswith("Recent Messages") else memory).append(section)
    return "\n\n".join(memory), "\n\n".join(recent)


class Pipeline:
    """The product's services and pipeline on a throwaway database (Django set up, and
    the database migrated, before it is made)."""

    def __init__(self) -> None:
        self.engine_seconds = 0.0

    def clock_engine(self) -> None:
        """Count the engine's own share of a run's CPU (the rest is claiming, redaction
        gates and storing): its two methods are wrapped with a clock for this process."""
        from memory.engines.extractive import ExtractiveEngine

        for name in ("observe", "reflect"):
            setattr(ExtractiveEngine, name, self._clocked(getattr(ExtractiveEngine, name)))

    def _clocked(self, method: Any) -> Any:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.engine_seconds += time.process_time() - started

        return clocked

    def workspace(
        self, name: str, *, redact_before_observation: bool = False, fidelity: str = ""
    ) -> Any:
        """A workspace with the default redaction policy (optionally redacting messages
        before observation) and ``fidelity`` (blank: MEMDESK_OBSERVER_FIDELITY)."""
        from governance.redaction.policy import redaction_policy_get_or_create
        from memory.engines.base import FIDELITIES
        from tenancy.services import workspace_get_or_create

        if fidelity and fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}; got {fidelity!r}")
        workspace = workspace_get_or_create(name=name)
        if fidelity:
            workspace.fidelity = fidelity
            workspace.save(update_fields=["fidelity"])
        policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
        if redact_before_observation:
            policy.redact_before_observation = True
            policy.save(update_fields=["redact_before_observation"])
        return workspace

    def _run_due(self, conversation: Any) -> None:
        from memory.models import ObserverRun, PipelineRun, ReflectorRun
        from memory.pipeline.observer import observer_run_execute
        from memory.pipeline.reflector import reflector_run_execute

        for model, execute in (
            (ObserverRun, observer_run_execute),
            (ReflectorRun, reflector_run_execute),
        ):
            for run_id in model.objects.filter(
                conversation=conversation, status=PipelineRun.Status.PENDING
            ).values_list("pk", flat=True):
                execute(run_id=run_id)

    def _sweep(self, conversation: Any, now: datetime) -> None:
        """What the sweeper (``pipeline_sweep``) does for one conversation at ``now``:
        schedule the Observer if due (idle for MEMDESK_OBSERVER_IDLE_MINUTES, or over the
        threshold) and the Reflector if due; then run what was scheduled, as the worker
        would. ``pipeline_sweep`` itself is not called: it takes the wall clock as now and
        sweeps every conversation of every variant."""
        from django.db import transaction

        from memory.models import PipelineRun
        from memory.pipeline.scheduling import observer_schedule_if_due, reflector_schedule_if_due

        with transaction.atomic():
            observer_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER, now=now
            )
            reflector_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER
            )
        self._run_due(conversation)

    def ingest(self, workspace: Any, question: Question, *, sweep: bool) -> tuple[Any, float]:
        """Append the sessions and run what becomes due; with ``sweep``, also what the
        sweeper finds due before each next session and at the question's date. Returns
        the conversation and the CPU seconds spent in pipeline runs."""
        from memory.models import Conversation
        from memory.services.conversations import conversation_create
        from memory.services.messages import MessageInput, messages_append

        conversation = conversation_create(
            workspace=workspace, title=question.question_id, created_at=question.sessions[0][0]
        )
        cpu = 0.0
        for began, session in question.sessions:
            if sweep:
                started = time.process_time()
                self._sweep(conversation, now=began)
                cpu += time.process_time() - started
            items = [
                MessageInput(
                    role=turn["role"],
                    content=turn["content"],
                    created_at=began + timedelta(minutes=i),
                )
                for i, turn in enumerate(session)
                if turn["content"].strip()
            ]
            for start in range(0, len(items), 100):
                messages_append(conversation=conversation, items=items[start : start + 100])
                started = time.process_time()
                self._run_due(conversation)
                cpu += time.process_time() - started
            if items:
                # Writes are simulated in message time: the conversation was last written
                # when the session's last turn was said, not when the bench appended it
                # (which is what messages_append records), so the idle rule sees the gaps
                # between sessions.
                said = items[-1].created_at
                Conversation.objects.filter(pk=conversation.pk).update(updated_at=said)
                conversation.updated_at = said
        if sweep:
            started = time.process_time()
            self._sweep(conversation, now=question.question_date)
            cpu += time.process_time() - started
        return conversation, cpu

    def reflect(self, conversation: Any) -> float:
        from memory.pipeline.on_demand import run_now

        started = time.process_time()
        run_now(kind="reflect", conversation=conversation, wait=True)
        return time.process_time() - started

    def served(self, conversation: Any, cpu_seconds: float, engine_seconds: float) -> Served:
        from memory.context.read import context_for_conversation
        from memory.models import Conversation
        from memory.selectors import active_observations, active_reflections

        conversation = Conversation.objects.get(pk=conversation.pk)
        text = context_for_conversation(
            conversation=conversation, fmt="text", max_tokens=None
        ).body.decode()
        memory, recent = split_context(text)
        notes = [
            Note(o.text, o.observed_at, o.referenced_at, o.window_start_at, o.window_end_at, kind)
            for kind, items in (
                ("reflection", active_reflections(conversation=conversation)),
                ("observation", active_observations(conversation=conversation)),
            )
            for o in items
        ]
        return Served(memory, recent, notes, cpu_seconds, engine_seconds)


# --------------------------------------------------------------------------- report


@dataclass
class Scored:
    label: str
    compression: float
    coverage: RelativeCoverage
    by_type: dict[str, RelativeCoverage] = field(default_factory=dict)
    tokens: int = 0


def _tokens(texts: Sequence[str]) -> int:
    from memory.tokens import token_counts

    return sum(token_counts(list(texts)))


def score_texts(
    label: str, questions: list[Question], texts: list[str], raw_words: list[set[str]], raw: int
) -> Scored:
    pairs_by_type: dict[str, list[tuple[float, float]]] = defaultdict(list)
    pairs = []
    for question, text, words in zip(questions, texts, raw_words, strict=True):
        raw_score = coverage(question.answer, words)
        if raw_score is None:
            continue
        memory_score = coverage(question.answer, content_words(text)) or 0.0
        pairs.append((memory_score, raw_score))
        pairs_by_type[question.question_type].append((memory_score, raw_score))
    tokens = _tokens(texts)
    return Scored(
        label=label,
        compression=raw / tokens if tokens else float("inf"),
        coverage=relative_coverage(pairs),
        by_type={t: relative_coverage(p) for t, p in pairs_by_type.items()},
        tokens=tokens,
    )


def _share(flags: list[bool]) -> float:
    return sum(flags) / len(flags) if flags else 0.0


def note_figures(questions: list[Question], served: list[Served]) -> dict[str, Any]:
    notes = [(q, n) for q, s in zip(questions, served, strict=True) for n in s.notes]
    reasons = [garbled_reason(n.text) for _, n in notes]
    within = [
        n.window_start_at is not None
        and n.window_end_at is not None
        and n.window_start_at.date() <= n.observed_at.date() <= n.window_end_at.date()
        for _, n in notes
    ]
    referenced = [
        n.referenced_at.date() <= q.question_date.date() for q, n in notes if n.referenced_at
    ]
    return {
        "notes": len(notes),
        "reflections": sum(1 for _, n in notes if n.kind == "reflection"),
        "garbled": _share([r is not None for r in reasons]),
        "garbled_kinds": {
            k: sum(1 for r in reasons if r == k) for k in ("cut", "repeat", "empty item")
        },
        "elided": _share(["…" in n.text or "..." in n.text for _, n in notes]),
        "within_span": _share(within),
        "referenced": len(referenced),
        "referenced_not_later": _share(referenced),
    }


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |"
    print(line)
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(
            "| "
            + " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
            + " |"
        )


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def default_fidelity() -> str:
    from django.conf import settings

    return str(settings.MEMDESK_OBSERVER_FIDELITY)


def fidelity_levels() -> list[str]:
    """The fidelity levels other than the default one (that one is the ``default`` row)."""
    from memory.engines.base import FIDELITIES

    return [level for level in FIDELITIES if level != default_fidelity()]


def run_dataset(
    pipeline: Pipeline,
    name: str,
    questions: list[Question],
    abstentions: int,
    args: argparse.Namespace,
    *,
    fidelity_curve: bool = False,
) -> None:
    from memory.tokens import token_counts

    raw_tokens = [sum(token_counts(q.turns)) for q in questions]
    raw = sum(raw_tokens)
    raw_words = [content_words("\n".join(q.turns)) for q in questions]
    print(f"\n## {name}")
    print(
        f"{len(questions)} questions ({abstentions} abstention questions excluded), "
        f"{sum(len(q.sessions) for q in questions):,} sessions, "
        f"{sum(len(q.turns) for q in questions):,} turns, {raw:,} raw tokens"
    )

    variants: dict[str, list[Served]] = {
        label: [] for label in ("default", "default+reflect", "threshold only")
    }
    levels = fidelity_levels() if fidelity_curve else []
    for level in levels:
        variants[f"default, fidelity={level}"] = []
    wall = time.monotonic()
    tag = re.sub(r"\W+", "-", name.split()[0])
    default_ws = pipeline.workspace(f"{tag}-default")
    threshold_ws = pipeline.workspace(f"{tag}-threshold-only")
    level_ws = {level: pipeline.workspace(f"{tag}-{level}", fidelity=level) for level in levels}
    for question in questions:
        engine = pipeline.engine_seconds
        conversation, cpu = pipeline.ingest(default_ws, question, sweep=True)
        variants["default"].append(
            pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
        )
        cpu += pipeline.reflect(conversation)
        variants["default+reflect"].append(
            pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
        )
        engine = pipeline.engine_seconds
        conversation, cpu = pipeline.ingest(threshold_ws, question, sweep=False)
        variants["threshold only"].append(
            pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
        )
        for level, workspace in level_ws.items():
            engine = pipeline.engine_seconds
            conversation, cpu = pipeline.ingest(workspace, question, sweep=True)
            variants[f"default, fidelity={level}"].append(
                pipeline.served(conversation, cpu, pipeline.engine_seconds - engine)
            )
    print(f"pipeline wall time {time.monotonic() - wall:.0f} s (ingest, runs, context)")
    if levels:
        print(
            f"fidelity curve: `default` is fidelity={default_fidelity()}; the other levels "
            f"({', '.join(levels)}) are the same pipeline in a workspace set to that level"
        )

    scored = []
    for label, served in variants.items():
        scored.append(score_texts(f"engine {label}", questions, [s.memory_text for s in served],
                                  raw_words, raw))  # fmt: skip
    with_tail = score_texts(
        "engine default, memory + recent tail",
        questions,
        [s.memory_text + "\n" + s.recent_text for s in variants["default"]],
        raw_words,
        raw,
    )
    baselines: dict[str, list[Scored]] = {"first-k": [], "salient-m": []}
    for size in BASELINE_SIZES:
        baselines["first-k"].append(score_texts(
            f"first-k k={size}", questions,
            ["\n".join(first_words(t, size) for t in q.turns) for q in questions], raw_words, raw,
        ))  # fmt: skip
        baselines["salient-m"].append(score_texts(
            f"salient-m m={size}", questions,
            ["\n".join(salient_words(t, size) for t in q.turns) for q in questions], raw_words,
            raw,
        ))  # fmt: skip

    figures = {label: note_figures(questions, served) for label, served in variants.items()}
    cpu_ms = {
        label: sum(s.cpu_seconds for s in served) * 1000 / (raw / 1000)
        for label, served in variants.items()
    }
    engine_ms = {
        label: sum(s.engine_seconds for s in served) * 1000 / (raw / 1000)
        for label, served in variants.items()
    }
    first = scored[0].coverage
    print(
        f"raw sessions keep {first.raw:.2f} of the answer words on average "
        f"({first.counted} questions scored, {first.raw_zero} left out: raw coverage 0)"
    )
    print()
    rows = []
    for item in [*scored, with_tail, *baselines["first-k"], *baselines["salient-m"]]:
        label = item.label.removeprefix("engine ")
        figure = figures.get(label)
        rows.append(
            [
                item.label,
                f"{item.tokens:,}",
                f"{item.compression:.1f}x" if item.tokens else "-",
                f"{item.coverage.memory:.2f}",
                f"{item.coverage.ratio:.3f}",
                f"{figure['garbled']:.2%}" if figure else "",
                f"{figure['within_span']:.1%}" if figure else "",
                f"{engine_ms[label]:.1f} / {cpu_ms[label]:.1f}" if figure else "",
            ]
        )
    print_table(
        rows,
        ["memory", "tokens", "compression", "coverage", "relative", "garbled",
         "dated in span", "CPU ms/1k engine / runs"],
    )  # fmt: skip
    print()
    print("relative coverage per question type (questions scored)")
    type_rows = []
    for question_type in TYPES:
        row = [question_type]
        for item in [*scored, baselines["salient-m"][2], baselines["first-k"][2]]:
            value = item.by_type.get(question_type)
            row.append(f"{value.ratio:.2f} ({value.counted})" if value and value.counted else "-")
        type_rows.append(row)
    print_table(
        type_rows,
        ["type", *[s.label.removeprefix("engine ") for s in scored],
         baselines["salient-m"][2].label, baselines["first-k"][2].label],
    )  # fmt: skip
    print()
    for label, figure in figures.items():
        kinds = ", ".join(f"{k} {v}" for k, v in figure["garbled_kinds"].items())
        print(
            f"{label:<26} notes {figure['notes']:>6,} ({figure['reflections']:,} reflections); "
            f"garbled {figure['garbled']:.2%} ({kinds}); with an elision anywhere "
            f"{figure['elided']:.1%}; observed date in sources' span "
            f"{figure['within_span']:.1%}; referenced date not after the question "
            f"{figure['referenced_not_later']:.1%} of {figure['referenced']:,}; recent tail "
            f"{_tokens([s.recent_text for s in variants[label]]):,} tokens"
        )

    print()
    for item in scored:
        label = item.label.removeprefix("engine ")
        figure = figures[label]
        above = []
        for curve in baselines.values():
            points = [(b.compression, b.coverage.ratio) for b in curve]
            above.append(
                item.tokens > 0
                and item.coverage.ratio > interpolate_curve(points, item.compression)
            )
        checks = [
            (
                f"compression >= {TARGET_COMPRESSION:g}x with relative coverage >= "
                f"{TARGET_RELATIVE_COVERAGE:.2f}",
                item.tokens > 0
                and item.compression >= TARGET_COMPRESSION
                and item.coverage.ratio >= TARGET_RELATIVE_COVERAGE,
            ),
            ("above first-k", above[0]),
            ("above salient-m", above[1]),
            (f"garbled <= {TARGET_GARBLED:.0%}", figure["garbled"] <= TARGET_GARBLED),
            (f"dated in span >= {TARGET_DATED:.0%}", figure["within_span"] >= TARGET_DATED),
            (f"engine CPU <= {TARGET_CPU_MS:g} ms/1k", engine_ms[label] <= TARGET_CPU_MS),
        ]
        print(f"targets, {label}: " + "; ".join(f"{c} {verdict(ok)}" for c, ok in checks))

    if args.samples:
        # The headline variant's notes; where it wrote none, the reflected variant's.
        label = "default" if any(s.notes for s in variants["default"]) else "default+reflect"
        notes = [n for s in variants[label] for n in s.notes]
        print(f"\n{SAMPLE_NOTES} random notes ({label} variant, seed {args.seed})")
        for note in random.Random(args.seed).sample(notes, min(SAMPLE_NOTES, len(notes))):
            print(f"- [{note.kind}, observed {note.observed_at:%Y-%m-%d}] {note.text}")


def run_redaction(pipeline: Pipeline, questions: list[Question]) -> None:
    """The ``default`` variant with and without redaction before observation."""
    from memory.tokens import token_counts

    raw = sum(sum(token_counts(q.turns)) for q in questions)
    raw_words = [content_words("\n".join(q.turns)) for q in questions]
    print(f"\n## What redaction costs ({len(questions)} S questions, default variant)")
    results = []
    for label, on in (("default policy", False), ("redact before observation", True)):
        workspace = pipeline.workspace(
            f"redaction-{'on' if on else 'off'}", redact_before_observation=on
        )
        served = []
        for question in questions:
            engine = pipeline.engine_seconds
            conversation, cpu = pipeline.ingest(workspace, question, sweep=True)
            served.append(pipeline.served(conversation, cpu, pipeline.engine_seconds - engine))
        item = score_texts(label, questions, [s.memory_text for s in served], raw_words, raw)
        cpu_ms = sum(s.cpu_seconds for s in served) * 1000 / (raw / 1000)
        garbled = note_figures(questions, served)["garbled"]
        results.append(
            [label, f"{item.compression:.1f}x", f"{item.coverage.ratio:.2f}", f"{garbled:.1%}",
             f"{cpu_ms:.1f}"]
        )  # fmt: skip
    print_table(results, ["policy", "compression", "relative", "garbled", "run CPU ms/1k"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--s-limit", type=int, default=None, help="first N S questions")
    parser.add_argument("--oracle-sample", type=int, default=100)
    parser.add_argument("--redaction-sample", type=int, default=3)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--samples", action="store_true", help="print 20 notes per dataset")
    parser.add_argument(
        "--fidelity-curve",
        action="store_true",
        help="also run the default variant at the other fidelity levels (S subset only)",
    )
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    import harness

    harness.stop_on_sigterm()
    started = time.monotonic()
    with harness.scratch_dir() as folder:
        os.environ.update(
            harness.django_env(
                f"sqlite:///{folder / 'bench.sqlite3'}",
                folder,
                CELERY_BROKER_URL="memory://",
                LOG_LEVEL="ERROR",
            )
        )
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        pipeline = Pipeline()
        pipeline.clock_engine()
        print("Memory quality on LongMemEval (extractive engine, default thresholds and policy)")
        s_questions, s_abs = load("longmemeval_s_subset68.json", None, args.seed)
        if args.s_limit is not None:
            s_questions = s_questions[: args.s_limit]
        run_dataset(pipeline, "longmemeval_s_subset68.json (whole haystacks)", s_questions,
                    s_abs, args, fidelity_curve=args.fidelity_curve)  # fmt: skip
        if args.oracle_sample:
            o_questions, o_abs = load("longmemeval_oracle.json", args.oracle_sample, args.seed)
            run_dataset(
                pipeline,
                f"longmemeval_oracle.json (evidence sessions only, seeded sample of "
                f"{len(o_questions)})",
                o_questions,
                o_abs,
                args,
            )
        if args.redaction_sample:
            sample = random.Random(args.seed).sample(
                s_questions, min(args.redaction_sample, len(s_questions))
            )
            run_redaction(pipeline, sample)
        from django.db import connection

        connection.close()
    print(f"\ntotal wall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
