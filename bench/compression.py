"""Compression, fact retention and cost of the ``extractive`` Observer and Reflector.

Run: ``.venv/bin/python bench/compression.py`` (about ten seconds; prints figures only,
never message content). ``--fidelity LEVEL`` measures the engine at another fidelity
level than the default (``MEMDESK_OBSERVER_FIDELITY``). Reads the evaluation data in
``../shared/data/conversations/``; nothing from it is copied into the repository.

Datasets and windows
- ``memorybank_en.json`` (chat, multi-day): each of the 15 users' histories is one
  conversation. A day's exchanges are dated by the dataset's date (user and assistant
  turns one minute apart from 20:00 UTC) and observed as one window **per day**, with the
  tail of that user's earlier observation texts as ``previous_observations``. A user's
  whole history is only about 2,600 tokens, so a 30,000-token threshold would never fire;
  per-day windows are what a daily sweep (or a lower per-conversation threshold) yields,
  and they exercise cross-window de-duplication. All of a user's observations are then
  reflected in one call.
- ``taskmaster4_coffee_500.json`` (tool-heavy): each dialogue is one conversation. Every
  utterance becomes a user or assistant message; every ``api_response`` annotation becomes
  a ``tool`` message after it (``tool_name`` = the API name, content = the JSON response).
  The call arguments (``request``) are left out: in an OpenAI-style transcript they live
  in the assistant's ``tool_calls``, which the engine contract does not carry. Each
  dialogue (about 220 tokens) is observed as one window at its end and then reflected.

Figures per dataset
- raw tokens: cl100k tokens of all message contents (what the Observer reads);
  observation / reflection tokens: cl100k tokens of the note texts (what the prompt gets,
  before the marker and date that ``memory_line`` adds);
- compression: raw / observations and raw / reflections;
- cost: CPU milliseconds the engine spends (observe + reflect, token counting excluded)
  per 1,000 raw tokens, measured with ``time.process_time`` so that other processes on a
  busy machine do not count; the best of seven runs;
- retention (defined below).

Retention: what a careful human note-taker would be expected to keep, extracted from the
raw **user and tool** messages with simple rules written here, independently of the
engine's own rules. Assistant messages are not scored: in both datasets they mostly
restate, ask or advise, and a note-taker records what the user said and what the tools
returned. Four kinds of fact:
- names: quoted titles and runs of capitalised words that do not open a sentence (user
  messages; "Hi, Luna" greets, it is not a fact). In tool output: names and picked
  options (keys ``name``, ``*_name``, ``option``, but not field labels such as
  ``attribute_name`` "Order Type", nor "ADD" / "NO" switches); the id of the object a
  response is about (its first top-level id, ``order_id``); the options on offer
  (``options`` lists) unless one of them was picked later in the conversation, when the
  pick is the fact and the menu is not. Internal ids of nested items (``menu_item_id``,
  ``order_item_id`` next to ``order_id``) are not counted: nobody writes those down.
  Kept when the name appears in a note of the conversation (case-, space- and
  hyphen-insensitively, as whole words; a multi-word name also when all its words are
  in one note: "Double Cortado" is in "Cortado, Double").
- numbers: digits and number words from "two" up (user messages). Kept when the number
  appears as a word in a note of the conversation (digits and words count as equal).
- dates: relative and absolute date expressions ("today", "last night", "next Tuesday",
  "May 3") in user sentences that speak about the user (I / my / we) and not to the
  assistant (no "you"): "I ran 5 km yesterday" dates a fact, "See you tomorrow" or "How
  was your day today?" does not. Kept in observations when a note citing that message
  carries a ``referenced_at``, on the right day for the expressions this script resolves
  itself (today / tonight / this morning / yesterday / last night / tomorrow); kept in
  reflections when a reflection descending from that message is dated that day or names
  it ("Apr 28").
- preferences: "I like / love / enjoy / prefer / hate ..." and "my favourite ...": the
  first three content words of what is liked, up to the first comma (the first item of a
  list). Kept when at least two of them (all, if fewer) appear together in one note.
Retention is the share of these facts kept, per kind and overall (micro-averaged). It is
a lower bound for what a reader can recover (a paraphrase that drops the literal word
counts as lost) and an upper bound for usefulness (a kept word may sit in a poor note).
The rules are deliberately those a reviewer would apply by hand to a transcript; a
careful human note-taker keeps nearly all of these facts, so the bar is 90% and above.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402

from memory.engines.base import (  # noqa: E402
    FIDELITIES,
    DraftObservation,
    DraftReflection,
    SourceMessage,
    SourceObservation,
)
from memory.engines.extractive import ExtractiveEngine  # noqa: E402
from memory.pipeline.observer import PREVIOUS_OBSERVATIONS_TAIL  # noqa: E402
from memory.tokens import token_counts  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "conversations"
PREVIOUS_TAIL = PREVIOUS_OBSERVATIONS_TAIL  # earlier notes handed to the Observer
RUNS = 7
COST_TARGET_MS = 5.0  # per 1,000 input tokens
RETENTION_TARGET = 0.9

# --------------------------------------------------------------------------- loading


@dataclass
class Window:
    messages: list[SourceMessage]
    now: datetime


@dataclass
class Conversation:
    key: str
    windows: list[Window]

    @property
    def messages(self) -> list[SourceMessage]:
        return [m for w in self.windows for m in w.messages]


def load_memorybank() -> list[Conversation]:
    data = json.loads((DATA / "memorybank_en.json").read_text())
    conversations = []
    for user_key, user in data.items():
        seq = 0
        windows = []
        for day, exchanges in user["history"].items():
            start = datetime.fromisoformat(day).replace(hour=20, tzinfo=UTC)
            messages = []
            for exchange in exchanges:
                for role, text in (
                    ("user", exchange["query"]),
                    ("assistant", exchange["response"]),
                ):
                    seq += 1
                    messages.append(
                        SourceMessage(
                            id=f"{user_key.strip()}-{seq}",
                            seq=seq,
                            role=role,
                            content=text,
                            created_at=start + timedelta(minutes=seq),
                        )
                    )
            if messages:
                windows.append(Window(messages, messages[-1].created_at))
        conversations.append(Conversation(user_key.strip(), windows))
    return conversations


def taskmaster_messages(dialogue: dict, began: datetime) -> list[SourceMessage]:
    """Utterances as user / assistant messages, each API response as a tool message."""
    turns: list[tuple[str, str, str]] = []
    for utterance in dialogue["utterances"]:
        turns.append((utterance["speaker"], utterance["text"], ""))
        api = ""
        for annotation in utterance["annotations"]:
            if annotation["name"] == "api_response":
                api = annotation["value"]
            elif annotation["name"] == "response":
                turns.append(("tool", annotation["value"], api))
    return [
        SourceMessage(
            id=f"{dialogue['conversation_id']}-{seq}",
            seq=seq,
            role=role,
            content=content,
            created_at=began + timedelta(seconds=5 * seq),
            tool_name=tool_name,
        )
        for seq, (role, content, tool_name) in enumerate(turns, start=1)
    ]


def load_taskmaster() -> list[Conversation]:
    data = json.loads((DATA / "taskmaster4_coffee_500.json").read_text())
    start = datetime(2026, 2, 2, 8, 0, tzinfo=UTC)
    conversations = []
    for number, dialogue in enumerate(data):
        messages = taskmaster_messages(dialogue, start + timedelta(minutes=10 * number))
        conversations.append(
            Conversation(dialogue["conversation_id"], [Window(messages, messages[-1].created_at)])
        )
    return conversations


# --------------------------------------------------------------------------- running


@dataclass
class ConversationResult:
    conversation: Conversation
    observations: list[DraftObservation] = field(default_factory=list)
    reflections: list[DraftReflection] = field(default_factory=list)
    reflection_sources: list[list[DraftObservation]] = field(default_factory=list)


def run_engine(
    conversations: list[Conversation], fidelity: str
) -> tuple[list[ConversationResult], float]:
    engine = ExtractiveEngine()
    results = []
    started = time.process_time()
    for conversation in conversations:
        result = ConversationResult(conversation)
        previous: list[str] = []
        stored: list[SourceObservation] = []
        by_id: dict[str, DraftObservation] = {}
        for window in conversation.windows:
            output = engine.observe(
                window.messages,
                previous_observations=previous[-PREVIOUS_TAIL:],
                now=window.now,
                fidelity=fidelity,
            )
            said_at = {m.id: m.created_at for m in window.messages}
            for draft in output.observations:
                observation_id = f"o{len(stored)}"
                by_id[observation_id] = draft
                stored.append(
                    SourceObservation(
                        id=observation_id,
                        text=draft.text,
                        priority=draft.priority,
                        # As the pipeline dates it: when its last source was said.
                        observed_at=max(said_at[i] for i in draft.source_message_ids),
                        referenced_at=draft.referenced_at,
                        token_count=0,
                    )
                )
                previous.append(draft.text)
            result.observations.extend(output.observations)
        if stored:
            result.reflections = engine.reflect(stored, now=conversation.windows[-1].now)
            result.reflection_sources = [
                [by_id[i] for i in r.source_observation_ids] for r in result.reflections
            ]
        results.append(result)
    return results, time.process_time() - started


# --------------------------------------------------------------------------- retention


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


NUMBER_WORDS = {
    "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7",
    "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "twenty": "20", "thirty": "30", "hundred": "100",
}  # fmt: skip
COMMON_CAPITALISED = _wordset(
    """I I'm I've I'll I'd AI OK Okay Hi Hello Hey Yes No The A An It This That My Your We
    You He She They What Which Who How When Where Why Do Does Did Can Could Would Should
    Will Is Are Was Were Thanks Thank Please Sorry Oh Well So But And Or If Then Also Sure
    Great Good Nice Dear There Here Its Our Their His Her Let Haha Wow Hmm Actually
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
    May June July August September October November December"""
)
STOP = _wordset(
    """a an the and or but to of in on at for with my me i it is are was be very really so
    just also too some any this that these those all more most much many lot lots about
    from by as into than then when while what which who how playing doing going"""
)
DATE_EXPRESSION = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|last\s+night|this\s+(?:morning|afternoon|"
    r"evening)|(?:next|last|this)\s+(?:week|weekend|month|year|monday|tuesday|wednesday|"
    r"thursday|friday|saturday|sunday)|\d+\s+days?\s+ago|(?:january|february|march|april|"
    r"june|july|august|september|october|november|december)\s+\d{1,2})\b",
    re.IGNORECASE,
)
FIRST_PERSON = re.compile(r"\b(?:I|my|we|our)\b", re.IGNORECASE)
SECOND_PERSON = re.compile(r"\byou(?:r)?\b", re.IGNORECASE)
SAME_DAY = {"today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0,
            "this evening": 0, "yesterday": -1, "last night": -1, "tomorrow": 1}  # fmt: skip
PREFERENCE = re.compile(
    r"\b(?:i\s+(?:really\s+|also\s+|especially\s+|mainly\s+)*(?:like|love|enjoy|prefer|hate|"
    r"dislike)\s+|my\s+favou?rite\s+\w+\s+(?:is|are)\s+)([^.!?;,]+)",
    re.IGNORECASE,
)
SENTENCE = re.compile(r"(?<=[.!?])\s+")
CAPITALISED = re.compile(r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
VOCATIVE = re.compile(r"^(?:Hi|Hello|Hey|Dear)[\s,]+(?!I\b|I')")
QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”")


@dataclass
class Fact:
    kind: str  # name | number | date | preference
    value: str
    message_id: str
    words: tuple[str, ...] = ()
    day: datetime | None = None


def _norm(word: str) -> str:
    word = word.lower().strip(".,;:!?\"'()")
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def user_facts(message: SourceMessage) -> list[Fact]:
    facts = []
    for sentence in SENTENCE.split(message.content):
        for a, b in QUOTED.findall(sentence):
            facts.append(Fact("name", a or b, message.id))
        vocative = VOCATIVE.match(sentence)
        for match in CAPITALISED.finditer(sentence):
            if vocative and match.start() == vocative.end():
                continue  # "Hi, Luna": whom the user greets, not a fact
            words = match.group(0).split()
            if match.start() == 0 or sentence[: match.start()].rstrip()[-1:] in '"“':
                words = words[1:]  # capitalised because it opens the sentence
            words = [w for w in words if w not in COMMON_CAPITALISED]
            if words:
                facts.append(Fact("name", " ".join(words), message.id))
        for token in re.findall(r"\b\d+(?:[.,]\d+)?\b|\b[a-z]+\b", sentence.lower()):
            if token[0].isdigit() or token in NUMBER_WORDS:
                facts.append(Fact("number", NUMBER_WORDS.get(token, token), message.id))
        about_user = FIRST_PERSON.search(sentence) and not SECOND_PERSON.search(sentence)
        for match in DATE_EXPRESSION.finditer(sentence if about_user else ""):
            expression = " ".join(match.group(0).lower().split())
            offset = SAME_DAY.get(expression)
            day = message.created_at + timedelta(days=offset) if offset is not None else None
            facts.append(Fact("date", expression, message.id, day=day))
        for match in PREFERENCE.finditer(sentence):
            words = [_norm(w) for w in re.findall(r"[\w'-]+", match.group(1))]
            content = tuple(w for w in words if w not in STOP)[:3]
            if content:
                facts.append(Fact("preference", match.group(1).strip(), message.id, content))
    return facts


def _payload(message: SourceMessage) -> object:
    try:
        return json.loads(message.content)
    except ValueError:
        return None


def _leaves(node: object, key: str = "", depth: int = 0) -> Iterable[tuple[str, int, object]]:
    if isinstance(node, dict):
        for child_key, value in node.items():
            yield from _leaves(value, child_key, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value, key, depth)
    else:
        yield key, depth, node


TOGGLES = {"add", "no", "yes"}  # "option": "ADD" says an add-on was picked; its name is the fact


def _same(value: str) -> str:
    return " ".join(value.lower().replace("-", " ").split())


def chosen_values(conversation: Conversation) -> set[str]:
    """Every value a tool reported as picked (an ``option``) in the conversation."""
    return {
        _same(value)
        for message in conversation.messages
        if message.role == "tool"
        for key, _, value in _leaves(_payload(message))
        if key == "option" and isinstance(value, str)
    }


def tool_facts(message: SourceMessage, chosen: set[str]) -> list[Fact]:
    """Names and picked options, the id of the object the response is about, and the
    options on offer unless one of them was picked later (then the pick is the fact)."""
    facts: list[Fact] = []
    leaves = list(_leaves(_payload(message)))
    offered = [v for k, _, v in leaves if k == "options" and isinstance(v, str)]
    menu_led_to_choice = any(_same(v) in chosen for v in offered)
    first_id = next((k for k, d, v in leaves if d == 1 and k.endswith("_id")), None)
    for key, depth, value in leaves:
        if not isinstance(value, str) or not value.strip():
            continue
        picked = key == "option" and _same(value) not in TOGGLES
        name_like = picked or key == "name" or (key.endswith("_name") and key != "attribute_name")
        on_offer = key == "options" and not menu_led_to_choice and _same(value) not in TOGGLES
        subject_id = depth == 1 and key == first_id
        if name_like or on_offer or subject_id:
            facts.append(Fact("name", value.strip(), message.id))
    return facts


def facts_of(conversation: Conversation) -> list[Fact]:
    chosen = chosen_values(conversation)
    facts: list[Fact] = []
    for message in conversation.messages:
        if message.role == "user":
            facts.extend(user_facts(message))
        elif message.role == "tool":
            facts.extend(tool_facts(message, chosen))
    return facts


def _contains_words(text: str, value: str) -> bool:
    """Case-, space- and hyphen-insensitive: "Sugar-Free Vanilla" is "sugar free vanilla"."""
    pattern = r"(?<![\w])" + re.escape(_same(value)) + r"(?![\w])"
    return re.search(pattern, _same(text)) is not None


def _names_kept(text: str, name: str) -> bool:
    """The name, or all of its words in one note: "Double Cortado" is kept by "Cortado,
    Double" (a tool line lists the drink, then its size)."""
    if _contains_words(text, name):
        return True
    words = _same(name).split()
    return len(words) > 1 and all(_contains_words(text, w) for w in words)


def _number_kept(text: str, value: str) -> bool:
    words = {NUMBER_WORDS.get(w, w) for w in re.findall(r"\d+(?:[.,]\d+)?|[a-z]+", text.lower())}
    return value in words


def _preference_kept(texts: Iterable[str], words: tuple[str, ...]) -> bool:
    needed = min(2, len(words))
    for text in texts:
        present = {_norm(w) for w in re.findall(r"[\w'-]+", text)}
        if sum(1 for w in words if w in present) >= needed:
            return True
    return False


def _day_named(text: str, day: datetime) -> bool:
    return f"{day:%b} {day.day}" in text


def kept(fact: Fact, texts: list[str], dated: list[tuple[str, datetime | None, set[str]]]) -> bool:
    """``texts``: every note of the conversation; ``dated``: (text, referenced_at, ids of
    the messages the note descends from)."""
    if fact.kind == "name":
        return any(_names_kept(t, fact.value) for t in texts)
    if fact.kind == "number":
        return any(_number_kept(t, fact.value) for t in texts)
    if fact.kind == "preference":
        return _preference_kept(texts, fact.words)
    for text, referenced_at, message_ids in dated:
        if fact.message_id not in message_ids:
            continue
        if fact.day is None and (referenced_at is not None or fact.value in text.lower()):
            return True
        if fact.day is not None and (
            (referenced_at is not None and referenced_at.date() == fact.day.date())
            or _day_named(text, fact.day)
        ):
            return True
    return False


@dataclass
class Retention:
    total: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    observed: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    reflected: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def share(self, tier: dict[str, int], kind: str | None = None) -> float:
        if kind is None:
            total = sum(self.total.values())
            return sum(tier.values()) / total if total else 1.0
        return tier[kind] / self.total[kind] if self.total[kind] else 1.0


def measure_retention(results: list[ConversationResult]) -> Retention:
    retention = Retention()
    for result in results:
        observation_texts = [o.text for o in result.observations]
        observation_dated = [
            (o.text, o.referenced_at, set(o.source_message_ids)) for o in result.observations
        ]
        reflection_texts = [r.text for r in result.reflections]
        reflection_dated = [
            (r.text, r.referenced_at, {m for o in sources for m in o.source_message_ids})
            for r, sources in zip(result.reflections, result.reflection_sources, strict=True)
        ]
        for fact in facts_of(result.conversation):
            retention.total[fact.kind] += 1
            retention.observed[fact.kind] += kept(fact, observation_texts, observation_dated)
            retention.reflected[fact.kind] += kept(fact, reflection_texts, reflection_dated)
    return retention


# --------------------------------------------------------------------------- report


def best_time(run: Callable[[], float]) -> float:
    return min(run() for _ in range(RUNS))


def report(
    name: str, conversations: list[Conversation], target: float, fidelity: str
) -> dict[str, float]:
    results, _ = run_engine(conversations, fidelity)
    seconds = best_time(lambda: run_engine(conversations, fidelity)[1])
    raw = sum(token_counts([m.content for c in conversations for m in c.messages]))
    observed = sum(token_counts([o.text for r in results for o in r.observations]))
    reflected = sum(token_counts([x.text for r in results for x in r.reflections]))
    retention = measure_retention(results)
    figures = {
        "raw": raw,
        "observations": observed,
        "reflections": reflected,
        "ratio_observations": raw / observed if observed else float("inf"),
        "ratio_reflections": raw / reflected if reflected else float("inf"),
        "ms_per_1k": seconds * 1000 / (raw / 1000),
        "retention_observations": retention.share(retention.observed),
        "retention_reflections": retention.share(retention.reflected),
    }
    messages = sum(len(c.messages) for c in conversations)
    windows = sum(len(c.windows) for c in conversations)
    print(f"\n## {name}")
    print(
        f"{len(conversations)} conversations, {windows} observer windows, {messages} messages; "
        f"{sum(len(r.observations) for r in results)} observations, "
        f"{sum(len(r.reflections) for r in results)} reflections"
    )
    print(f"raw tokens            {raw:>9,}")
    print(
        f"observation tokens    {observed:>9,}   compression {figures['ratio_observations']:5.1f}x"
    )
    print(
        f"reflection tokens     {reflected:>9,}   compression {figures['ratio_reflections']:5.1f}x"
    )
    print(
        f"per conversation      {raw / len(conversations):9.1f} raw tokens, "
        f"{observed / len(conversations):.1f} in observations"
    )
    print(
        f"engine cost           {figures['ms_per_1k']:9.2f} CPU ms per 1,000 input tokens"
        f" (best of {RUNS})"
    )
    print("retention             observations  reflections  facts")
    for kind in ("name", "number", "date", "preference"):
        print(
            f"  {kind:<19} {retention.share(retention.observed, kind):>12.1%}"
            f" {retention.share(retention.reflected, kind):>12.1%}  {retention.total[kind]:>5}"
        )
    print(
        f"  {'all':<19} {figures['retention_observations']:>12.1%}"
        f" {figures['retention_reflections']:>12.1%}  {sum(retention.total.values()):>5}"
    )
    verdicts = [
        ("compression (observations)", figures["ratio_observations"] >= target, f">= {target:g}x"),
        ("cost", figures["ms_per_1k"] <= COST_TARGET_MS, f"<= {COST_TARGET_MS:g} ms / 1k"),
        ("retention (observations)", figures["retention_observations"] >= RETENTION_TARGET,
         f">= {RETENTION_TARGET:.0%}"),
    ]  # fmt: skip
    print("targets               " + "; ".join(
        f"{label} {bar}: {'met' if ok else 'NOT met'}" for label, ok, bar in verdicts
    ))  # fmt: skip
    return figures


def main() -> None:
    default = settings.MEMDESK_OBSERVER_FIDELITY
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fidelity", choices=FIDELITIES, default=default)
    fidelity = parser.parse_args().fidelity
    print(
        "Extractive Observer and Reflector: compression, retention, cost "
        f"(fidelity={fidelity}{', the default' if fidelity == default else ''})"
    )
    report("memorybank_en.json (chat, per-day windows)", load_memorybank(), 5, fidelity)
    report(
        "taskmaster4_coffee_500.json (tool-heavy, one window per dialogue)",
        load_taskmaster(),
        20,
        fidelity,
    )


if __name__ == "__main__":
    main()
