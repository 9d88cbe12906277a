"""The conversations the quality bench reads, each turned into ``History`` objects: one
conversation of dated sessions and the questions later asked about it.

- LongMemEval (``longmemeval/*.json``): one history per question (its haystack), sessions
  sorted by their ``haystack_dates``, turn ``i`` of a session dated the session's date
  plus ``i`` minutes. Abstention questions (``_abs``) are left out and counted.
- FriendsQA (``friendsqa/conversations.json``): one history per episode, scenes as
  sessions. The data has no dates: scene ``i`` is dated ``SCRIPT_START`` plus ``i`` days,
  turns a minute apart. Every turn is sent as a ``user`` message carrying its speaker as
  ``name``; the speakers (less the pseudo-speakers ``Narrator`` and ``All``) are the
  history's known people, weighted by the turns they speak.
- QMSum AMI (``qmsum_ami/conversations.json``): one history per series, meetings as
  sessions a day apart, turns ten seconds apart (a meeting has up to 1,518 turns, which a
  minute apart would run past the next day). The speakers are roles ("Project Manager"),
  sent as ``name``; they name no person.
- ABCD (``abcd_sample.json``): one history per dialogue, one session, turns a minute
  apart; customer turns are ``user``, agent turns ``assistant``, ``action`` turns ``tool``
  messages of a tool called ``crm``. No questions. The known person is the scenario's
  ``customer_name``.

Nothing here touches Django: the loaders are pure and read only the file they are given.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from core.text import is_blank

ROOT = Path(__file__).resolve().parent.parent.parent
DATA = ROOT.parent / "shared" / "data" / "conversations"
LONGMEMEVAL = DATA / "longmemeval"
FRIENDSQA = DATA / "friendsqa" / "conversations.json"
QMSUM = DATA / "qmsum_ami" / "conversations.json"
ABCD = DATA / "abcd_sample.json"

# Where the undated datasets start; any fixed day works, it only has to be in the past.
SCRIPT_START = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
# FriendsQA's stage directions and chorus lines are not people.
NOT_PEOPLE = frozenset({"Narrator", "All"})
ABCD_ROLES = {"customer": "user", "agent": "assistant", "action": "tool"}
ABCD_TOOL = "crm"


@dataclass(frozen=True)
class Turn:
    role: str
    content: str
    name: str = ""  # the speaker, sent as the message's name
    tool_name: str = ""

    @property
    def text(self) -> str:
        """The turn as the raw transcript reads it: "Name: content" when it is named."""
        return f"{self.name}: {self.content}" if self.name else self.content


@dataclass(frozen=True)
class Session:
    began: datetime
    turns: list[Turn]


@dataclass(frozen=True)
class Question:
    question_id: str
    category: str  # LongMemEval's question type, FriendsQA's Who/What..., QMSum's kind
    question: str
    answer: str


@dataclass
class History:
    """One conversation, the questions later asked about it, and who is in it."""

    history_id: str
    sessions: list[Session]  # sorted by date
    questions: list[Question]
    asked_at: datetime  # when the questions are asked: the sweeper's last look
    turn_step: timedelta = timedelta(minutes=1)
    # The people the dataset names, with how many turns each speaks (1 where unknown).
    people: dict[str, int] = field(default_factory=dict)

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]

    @property
    def texts(self) -> list[str]:
        return [turn.text for turn in self.turns]


@dataclass
class Dataset:
    key: str  # the --datasets name
    title: str
    histories: list[History]
    notes: list[str] = field(default_factory=list)  # what the loader chose, for the report

    @property
    def questions(self) -> int:
        return sum(len(h.questions) for h in self.histories)


def parse_dataset_date(value: str) -> datetime:
    """LongMemEval's "2023/08/11 (Fri) 15:58" as an aware UTC datetime."""
    day, _, clock = value.partition(" (")
    clock = clock.partition(") ")[2] or "00:00"
    return datetime.strptime(f"{day} {clock}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def _read(path: Path) -> Any:
    return json.loads(path.read_text())


def _turns(raw: list[dict[str, Any]]) -> list[Turn]:
    return [
        Turn(role=t["role"], content=t["content"])
        for t in raw
        if isinstance(t.get("content"), str) and not is_blank(t["content"])
    ]


def load_longmemeval(
    path: Path, *, sample: int | None = None, limit: int | None = None, seed: int = 0
) -> tuple[list[History], int]:
    """The histories of a LongMemEval file (a seeded ``sample`` of them, or the first
    ``limit``) and how many abstention questions were left out."""
    data = _read(path)
    abstentions = sum(1 for q in data if q["question_id"].endswith("_abs"))
    data = [q for q in data if not q["question_id"].endswith("_abs")]
    if sample is not None and sample < len(data):
        data = random.Random(seed).sample(data, sample)
    if limit is not None:
        data = data[:limit]
    histories = []
    for q in data:
        dated = sorted(
            zip((parse_dataset_date(d) for d in q["haystack_dates"]), q["haystack_sessions"],
                strict=True),
            key=lambda pair: pair[0],
        )  # fmt: skip
        histories.append(
            History(
                history_id=q["question_id"],
                sessions=[Session(began, _turns(turns)) for began, turns in dated],
                questions=[
                    Question(q["question_id"], q["question_type"], q["question"], str(q["answer"]))
                ],
                asked_at=parse_dataset_date(q["question_date"]),
            )
        )
    return histories, abstentions


def _speakers(name: str) -> list[str]:
    """The people behind a speaker label ("Monica Geller & Rachel Green" is two)."""
    return [part.strip() for part in name.split("&") if part.strip() not in NOT_PEOPLE]


def _scripted(
    episode: dict[str, Any], *, session_step: timedelta, turn_step: timedelta, people: bool
) -> History:
    sessions = []
    spoken: Counter[str] = Counter()
    for i, session in enumerate(episode["sessions"]):
        turns = []
        for turn in session["turns"]:
            if is_blank(turn["text"]):
                continue
            turns.append(Turn(role="user", content=turn["text"], name=turn["speaker"]))
            spoken.update(_speakers(turn["speaker"]))
        sessions.append(Session(SCRIPT_START + i * session_step, turns))
    last = sessions[-1]
    return History(
        history_id=episode["id"],
        sessions=sessions,
        questions=[
            Question(f"{episode['id']}-{j}", qa["category"], qa["question"], qa["answer"])
            for j, qa in enumerate(episode["qa"])
        ],
        asked_at=last.began + len(last.turns) * turn_step + timedelta(days=1),
        turn_step=turn_step,
        people=dict(sorted(spoken.items())) if people else {},
    )


def load_friendsqa(path: Path, *, limit: int | None = None) -> list[History]:
    """The first ``limit`` episodes: scenes a day apart, turns a minute apart."""
    episodes = _read(path)[:limit]
    return [
        _scripted(e, session_step=timedelta(days=1), turn_step=timedelta(minutes=1), people=True)
        for e in episodes
    ]


def load_qmsum(path: Path, *, limit: int | None = None) -> list[History]:
    """The first ``limit`` series: meetings a day apart, turns ten seconds apart."""
    series = _read(path)[:limit]
    return [
        _scripted(s, session_step=timedelta(days=1), turn_step=timedelta(seconds=10), people=False)
        for s in series
    ]


def load_abcd(path: Path) -> list[History]:
    """The dialogues as support conversations; no questions."""
    histories = []
    for dialogue in _read(path):
        turns = [
            Turn(
                role=ABCD_ROLES[speaker],
                content=text,
                tool_name=ABCD_TOOL if speaker == "action" else "",
            )
            for speaker, text in dialogue["original"]
            if not is_blank(text)
        ]
        customer = " ".join(dialogue["scenario"]["personal"].get("customer_name", "").split())
        histories.append(
            History(
                history_id=f"abcd-{dialogue['convo_id']}",
                sessions=[Session(SCRIPT_START, turns)],
                questions=[],
                asked_at=SCRIPT_START + len(turns) * timedelta(minutes=1) + timedelta(days=1),
                people={customer.title(): 1} if customer else {},
            )
        )
    return histories
