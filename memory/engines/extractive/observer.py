"""The Observer: the notes a window of messages leaves.

Clauses of one message and priority become one note. Each tool call becomes one line; a
later state of the same object replaces an earlier one, and a line whose values another
line of the window already holds is folded into it, as is a user request that the tool
calls after it carried out. A fact already in the previous observations is not repeated.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from typing import Any

from memory.engines.base import (
    DEFAULT_FIDELITY,
    MEMORY_BLOCK_HEADER,
    DraftObservation,
    ObserverOutput,
    SourceMessage,
)
from memory.engines.extractive.answers import detail_for
from memory.engines.extractive.clauses import (
    Clause,
    WindowState,
    message_clauses,
    stage_direction,
)
from memory.engines.extractive.cues import never_background
from memory.engines.extractive.pseudonyms import Pseudonyms
from memory.engines.extractive.sentences import named_speaker, speaker_of
from memory.engines.extractive.tools import ToolFold, fold_tool_output
from memory.engines.extractive.vocabulary import (
    COMPLETED,
    HIGH,
    LOW,
    MEDIUM,
    VAGUE_WORDS,
    content_tokens,
    numbers_in,
    wordset,
)

# Token-set Jaccard at which a note repeats what memory already says. Stricter than the
# Reflector's DUPLICATE_SIMILARITY: here a fact is dropped because it was said before.
KNOWN_SIMILARITY = 0.8


@lru_cache(maxsize=16_384)
def _cached_numbers(tokens: frozenset[str]) -> frozenset[str]:
    return numbers_in(tokens)


def forget_texts() -> None:
    """Empty the caches of words and numbers, at the end of a run. Kept across runs they
    filled towards their bounds (16,384 texts each), and a Celery worker grew for its
    first ten minutes under load; cleared after each task, its children stayed flat.
    Reading a run's previous observations again costs the next run about 2 ms."""
    content_tokens.cache_clear()
    _cached_numbers.cache_clear()


def _is_memory_block(message: SourceMessage) -> bool:
    return message.role == "system" and message.content.lstrip().startswith(MEMORY_BLOCK_HEADER)


@dataclass
class Note:
    """A future observation: text, priority and the messages it came from."""

    text: str
    priority: str
    messages: dict[str, SourceMessage]  # by id; put in seq order when drafted
    referenced_at: datetime | None
    kind: str
    tool: str = ""
    fold: ToolFold | None = None
    first_seq: int = field(init=False)
    last_seq: int = field(init=False)

    def __post_init__(self) -> None:
        self.first_seq = min(m.seq for m in self.messages.values())
        self.last_seq = max(m.seq for m in self.messages.values())

    @classmethod
    def of(cls, message: SourceMessage, **fields: Any) -> Note:
        return cls(messages={message.id: message}, **fields)

    def absorb(self, other: Note) -> None:
        # The smaller set goes into the larger one: a tool polled a thousand times for the
        # same object stays linear.
        small, large = sorted((self.messages, other.messages), key=len)
        large.update(small)
        self.messages = large
        self.first_seq = min(self.first_seq, other.first_seq)
        self.last_seq = max(self.last_seq, other.last_seq)
        self.referenced_at = self.referenced_at or other.referenced_at

    def absorb_message(self, message: SourceMessage) -> None:
        self.messages[message.id] = message
        self.first_seq = min(self.first_seq, message.seq)
        self.last_seq = max(self.last_seq, message.seq)

    @property
    def source_message_ids(self) -> list[str]:
        return [m.id for m in sorted(self.messages.values(), key=lambda m: m.seq)]


def _tool_note(message: SourceMessage) -> Note:
    fold = fold_tool_output(message)
    return Note.of(
        message,
        text=fold.text,
        priority=fold.priority,
        referenced_at=fold.referenced_at,
        kind="tool",
        tool=message.tool_name or "call",
        fold=fold,
    )


def _replace_earlier_states(notes: list[Note]) -> set[int]:
    """The same tool reporting on the same object again: only the latest state counts."""
    replaced: set[int] = set()
    latest: dict[tuple[str, str], Note] = {}
    for note in notes:
        if note.fold is None or note.fold.primary_id is None or note.priority == HIGH:
            continue
        key = (note.tool, note.fold.primary_id)
        if key in latest:
            note.absorb(latest[key])
            replaced.add(id(latest[key]))
        latest[key] = note
    return replaced


def _covering_note(note: Note, holders: dict[str, list[Note]], dropped: set[int]) -> Note | None:
    """Another line of the window that already shows everything this one shows, or that
    shows the option picked from the list this one offered. ``holders`` maps a value to
    the lines holding it, so that a window of a thousand calls is not searched a thousand
    times over."""
    assert note.fold is not None
    shown = note.fold.shown - {"success"}
    if shown:
        rarest = min(shown, key=lambda value: (len(holders[value]), value))
        for other in reversed(holders[rarest]):
            if other is note or id(other) in dropped or other.fold is None:
                continue
            values = other.fold.visible_values
            if shown <= values and len(values) > len(shown):
                return other
    if note.fold.options:
        offered = sorted(note.fold.options)
        choosers = {id(o): o for value in offered for o in holders[value] if o is not note}
        later = [
            o for o in choosers.values() if id(o) not in dropped and o.last_seq > note.first_seq
        ]
        if later:
            return max(later, key=lambda o: (o.last_seq, o.first_seq))
    return None


def _attach_bare_success(notes: list[Note], dropped: set[int]) -> None:
    """ "Tool finish_order: success" names no object; when the window touched exactly one
    object, the success is that object's, and its line becomes a completed one."""
    live = [n for n in notes if id(n) not in dropped and n.fold is not None]
    objects = [n for n in live if n.fold is not None and n.fold.primary_id]
    if len(objects) != 1:
        return
    target = objects[0]
    for note in live:
        fold = note.fold
        bare = fold is not None and fold.primary_id is None and fold.shown <= {"success"}
        if bare and note.priority == COMPLETED and note.last_seq > target.first_seq:
            target.text = f"{target.text}; {note.tool}: success"
            target.priority = COMPLETED
            target.absorb(note)
            dropped.add(id(note))


def fold_tool_notes(notes: list[Note]) -> list[Note]:
    """One line per call, then: a later state of the same object replaces the earlier one,
    and a line that another line of the window covers is folded into it."""
    tool_notes = [n for n in notes if n.fold is not None]
    dropped = _replace_earlier_states(tool_notes)
    live = [n for n in tool_notes if id(n) not in dropped]
    holders: dict[str, list[Note]] = defaultdict(list)
    for note in live:
        assert note.fold is not None
        for value in note.fold.visible_values:
            holders[value].append(note)
    for note in live:
        if note.priority in (HIGH, COMPLETED):
            continue
        covering = _covering_note(note, holders, dropped)
        if covering is not None:
            covering.absorb(note)
            dropped.add(id(note))
    _attach_bare_success(tool_notes, dropped)
    return [n for n in notes if id(n) not in dropped]


def fold_fulfilled_requests(
    clauses: list[Clause], tool_notes: list[Note], messages: Sequence[SourceMessage]
) -> list[Clause]:
    """ "User requested an oat milk latte" next to the tool line of the order that holds
    "Latte, Oat Milk": the request was carried out and the line says it all. Only the
    tool lines between the request and the user's next turn are candidates."""
    user_turns = sorted(m.seq for m in messages if m.role == "user")
    by_end = sorted((n for n in tool_notes if n.fold is not None), key=lambda n: n.last_seq)
    ends = [n.last_seq for n in by_end]
    kept = []
    for clause in clauses:
        wanted = clause.tokens - VAGUE_WORDS - {"requested", "asked", "need", "want"}
        fulfilled = None
        if clause.is_request and clause.priority == LOW and wanted:
            seq = clause.message.seq
            next_turn = next((s for s in user_turns[bisect_right(user_turns, seq) :]), None)
            for note in by_end[bisect_right(ends, seq) :]:
                if next_turn is not None and note.first_seq > next_turn:
                    break  # later lines answer later turns
                assert note.fold is not None
                shown = note.fold.tokens
                if quantities_in(wanted) <= shown and len(wanted & shown) * 3 >= len(wanted) * 2:
                    fulfilled = note
                    break
        if fulfilled is None:
            kept.append(clause)
        else:
            fulfilled.absorb_message(clause.message)
            fulfilled.referenced_at = fulfilled.referenced_at or clause.referenced_at
    return kept


QUANTITY_WORDS = wordset("two three four five six seven eight nine ten eleven twelve dozen")


def quantities_in(tokens: frozenset[str]) -> frozenset[str]:
    """ "two lattes": a line that does not say "two" did not say it all."""
    return numbers_in(tokens) | (tokens & QUANTITY_WORDS)


def _exchanges(messages: Sequence[SourceMessage]) -> dict[str, str]:
    """Message id -> the id of the exchange it belongs to: a user turn and the assistant
    turns that answer it, so that a question and its answer share a line. A user turn
    that left no note still opens an exchange: its answer is not glued to an older one."""
    exchange: dict[str, str] = {}
    current: str | None = None
    for message in messages:
        if message.role == "user" or current is None:
            current = message.id
        exchange[message.id] = current if message.role in ("user", "assistant") else message.id
    return exchange


# Turns of people talking after which their background remarks are no longer noted.
LONG_TALK_TURNS = 150
MINUTES_KINDS = frozenset({"fact", "event"})  # low-priority clauses a meeting's minutes keep
# Words of a line that holds several people's turns of a meeting or a scene: more turns
# per line save each its own marker and date in the served context (about twelve tokens
# a line). At 80 rather than 60, QMSum's minutes are 5.1x instead of 4.9x for 0.004 of
# coverage; FriendsQA keeps the same (docs/benchmarks.md, issue 22).
TALK_LINE_WORDS = 80


def _words(text: str) -> int:
    return text.count(" ") + 1


def _is_group_talk(messages: Sequence[SourceMessage]) -> bool:
    """People talking among themselves (or one person writing on), with no assistant in
    the window: no turn answers another's request, so no exchange holds a line."""
    if any(m.role == "assistant" for m in messages):
        return False
    return sum(m.role == "user" for m in messages) > 1


def group_clauses(clauses: list[Clause], messages: Sequence[SourceMessage]) -> list[Note]:
    """One note per exchange and priority: "User likes tea; lives in Oslo", "User asked
    for vegan recipes; Assistant listed Chana masala; Dal"; among named people talking,
    consecutive turns share a line of up to ``TALK_LINE_WORDS`` words ("Anna prefers a
    March launch; Ben said the login flow is broken"). A pending problem, a promise or a
    finished task stays a note of its own message, to be followed up on its own."""
    exchange = _exchanges(messages)
    talk = _is_group_talk(messages)
    notes: list[Note] = []
    by_key: dict[tuple[str, str], Note] = {}
    speakers: dict[int, str] = {}  # who the note's last clause was said by
    details_run = 0  # details given one after another ("name ...; email ...") share a line
    for clause in clauses:
        shared = clause.priority in (MEDIUM, LOW)
        if clause.kind == "detail":
            key = (f"details {details_run}", clause.priority)
        elif talk and shared:
            key = ("talk", clause.priority)  # a meeting's turns share lines
        else:
            key = (exchange[clause.message.id] if shared else clause.message.id, clause.priority)
        if clause.kind != "detail":
            details_run += 1
        speaker = speaker_of(clause.message.role, clause.message.speaker)
        note = by_key.get(key)
        if note is not None and talk and _words(note.text) + _words(clause.text) > TALK_LINE_WORDS:
            note = None  # a line of talk ends where a reader would want a new one
        if note is None:
            note = Note.of(
                clause.message,
                text=clause.text,
                priority=clause.priority,
                referenced_at=clause.referenced_at,
                kind=clause.kind,
            )
            by_key[key] = note
            notes.append(note)
            speakers[id(note)] = speaker
            continue
        continuation = clause.text
        same_speaker = speakers[id(note)] == speaker and note.text.startswith(f"{speaker} ")
        if same_speaker and continuation.startswith(f"{speaker} "):
            continuation = continuation[len(speaker) + 1 :]
        note.text = f"{note.text}; {continuation}"
        note.absorb_message(clause.message)
        note.referenced_at = note.referenced_at or clause.referenced_at
        speakers[id(note)] = speaker
    return notes


class KnownFacts:
    """Token sets of what memory already says, indexed for quick near-duplicate tests."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._sizes: list[int] = []
        self._numbers: list[frozenset[str]] = []
        self._index: dict[str, list[int]] = defaultdict(list)
        for text in texts:
            self.add(content_tokens(text))

    def add(self, tokens: frozenset[str]) -> None:
        if not tokens:
            return
        position = len(self._sizes)
        self._sizes.append(len(tokens))
        self._numbers.append(_cached_numbers(tokens))
        for token in tokens:
            self._index[token].append(position)

    def knows(self, tokens: frozenset[str], *, contained_counts: bool = True) -> bool:
        """Is there a known note that nearly equals these tokens, or (``contained_counts``)
        contains them all?"""
        if not tokens:
            return False
        shared: Counter[int] = Counter()
        for token in tokens:
            shared.update(self._index.get(token, ()))
        new_numbers = numbers_in(tokens)
        for position, count in shared.items():
            contained = contained_counts and count == len(tokens) >= 2
            similar = count / (len(tokens) + self._sizes[position] - count) >= KNOWN_SIMILARITY
            if (contained or similar) and not new_numbers - self._numbers[position]:
                return True  # a new number would have been a new fact
        return False


_EXCLUSIVE_CHOICE = re.compile(
    r"\b(?:prefer\w*|rather|favou?rite|instead|switch\w*|chose|choose\w*)\b"
)


def _drop_known_clauses(clauses: list[Clause], known: KnownFacts) -> list[Clause]:
    kept = []
    for clause in clauses:
        # A dated event that happens again is news, even in the same words; a request is
        # a new request.
        repeatable = clause.referenced_at is not None or clause.is_request
        # "User prefers SMS" is inside "User prefers email over SMS" and says the opposite.
        plain = _EXCLUSIVE_CHOICE.search(clause.text) is None
        if not repeatable and known.knows(clause.tokens, contained_counts=plain):
            continue
        known.add(clause.tokens)
        kept.append(clause)
    return kept


def _drop_known_tool_notes(notes: list[Note], previous: Sequence[str]) -> list[Note]:
    """A tool line identical to an earlier observation, object id included, says nothing
    new. A line without an id ("Tool finish_order: success") may concern another object."""
    seen = set(previous)
    kept = []
    for note in notes:
        if note.fold is not None and note.fold.primary_id and note.text in seen:
            continue
        seen.add(note.text)
        kept.append(note)
    return kept


def _raise_unanswered_requests(clauses: list[Clause], messages: Sequence[SourceMessage]) -> None:
    """A request that nothing in the window answered is pending: high priority. An answer
    is a later message of the assistant, a tool, or another named participant (in a
    meeting, a colleague answers)."""
    asking = {c.message.id for c in clauses if c.is_request}
    if not asking:
        return
    answered: set[str] = set()
    newest: tuple[str, str] | None = None  # the participant of the newest message seen
    other: tuple[str, str] | None = None  # the newest one seen who is not ``newest``
    for message in reversed(messages):
        who = _participant(message)
        if (newest is not None and newest != who) or (other is not None and other != who):
            answered.add(message.id)
        if newest is None:
            newest = who
        elif who != newest and other is None:
            other = who
    for clause in clauses:
        if clause.is_request and clause.message.id not in answered:
            clause.priority = HIGH


def _participant(message: SourceMessage) -> tuple[str, str]:
    """Who a message is from: a tool answers as the assistant does."""
    if message.role == "tool":
        return ("assistant", "")
    return (message.role, message.speaker)


def _listeners(messages: Sequence[SourceMessage]) -> dict[str, str]:
    """Message id -> the name of who it answers: the speaker of the last message before it
    by someone else, when that message named its speaker ("you" in Tom's reply to Maria
    is Maria)."""
    listeners: dict[str, str] = {}
    last_who: tuple[str, str] | None = None  # the latest message's participant
    last_name = ""  # its speaker's name
    other_name = ""  # the name of the latest one by someone other than ``last_who``
    assistant = False
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        assistant = assistant or message.role == "assistant"
        who = (message.role, message.speaker)
        if last_who is not None and last_who != who:
            other_name = last_name
            answered_name = last_name
        else:
            answered_name = other_name
        if answered_name:
            listeners[message.id] = answered_name
        last_who, last_name = who, message.speaker
    if not assistant:
        # Among named people with no assistant, whoever opens the window speaks to whoever
        # answers it.
        _first_answered_by_next(messages, listeners)
    return listeners


def _among_many(messages: Sequence[SourceMessage]) -> bool:
    """Three or more named people talking among themselves, no assistant in the window."""
    named = {m.speaker for m in messages if m.role == "user" and m.speaker}
    return len(named) >= 3 and _is_group_talk(messages)


def _first_answered_by_next(messages: Sequence[SourceMessage], listeners: dict[str, str]) -> None:
    people = [m for m in messages if m.role == "user"]
    for index, message in enumerate(people):
        if message.id in listeners:
            break
        nxt = next((m for m in people[index + 1 :] if m.speaker != message.speaker), None)
        if nxt is None or not nxt.speaker or not message.speaker:
            break
        listeners[message.id] = nxt.speaker


def _current_task(clauses: list[Clause]) -> tuple[str | None, str | None]:
    pending = [c for c in clauses if c.is_request and c.priority == HIGH]
    if pending:
        request = pending[-1].text
        return request, f"Answer the open request: {request}"
    promises = [c for c in clauses if c.kind == "commitment"]
    if promises:
        return None, f"Follow up on: {promises[-1].text}"
    return None, None


def _draft(note: Note) -> DraftObservation:
    priority = note.priority
    if priority == LOW and never_background(note.text):
        priority = MEDIUM  # money, a deadline or a promise, whatever rule classed it
    return DraftObservation(
        text=note.text,
        priority=priority,
        referenced_at=note.referenced_at,
        source_message_ids=note.source_message_ids,
        tags=["tool"] if note.fold is not None else [note.kind],
        topics=[note.tool] if note.tool else [],
    )


def _with_speaker(message: SourceMessage) -> SourceMessage:
    """ "Jo: I moved to Oslo" is Jo speaking: the note says "Jo moved to Oslo"."""
    if message.speaker or message.role not in ("user", "assistant"):
        return message
    named = named_speaker(message.content)
    if named is None:
        return message
    name, rest = named
    return replace(message, content=rest, speaker=name)


def _hidden(message: SourceMessage, labels: Pseudonyms) -> SourceMessage:
    """The message with its labels as placeholders; itself when it holds none (most
    messages: copying each one showed in the Observer's profile)."""
    content, speaker = labels.hide(message.content), labels.hide(message.speaker)
    if content == message.content and speaker == message.speaker:
        return message
    return replace(message, content=content, speaker=speaker)


def observe_window(
    messages: Sequence[SourceMessage],
    *,
    previous_observations: Sequence[str],
    fidelity: str = DEFAULT_FIDELITY,
) -> ObserverOutput:
    labels = Pseudonyms(
        [*(m.content for m in messages), *(m.speaker for m in messages), *previous_observations]
    )
    if labels:
        messages = [_hidden(m, labels) for m in messages]
        previous_observations = [labels.hide(text) for text in previous_observations]
    output = _observe(messages, previous_observations, fidelity)
    if not labels:
        return output
    return ObserverOutput(
        observations=[replace(o, text=labels.show(o.text)) for o in output.observations],
        current_task=labels.show(output.current_task) if output.current_task else None,
        suggested_response=(
            labels.show(output.suggested_response) if output.suggested_response else None
        ),
    )


def _observe(
    messages: Sequence[SourceMessage], previous_observations: Sequence[str], fidelity: str
) -> ObserverOutput:
    ordered = sorted(messages, key=lambda m: m.seq)
    visible = [_with_speaker(m) for m in ordered if not _is_memory_block(m)]
    state = WindowState(previous_observations)
    state.meet(sorted({m.speaker for m in visible if m.speaker}))
    state.hear(m.content for m in visible)
    detail = detail_for(fidelity)
    clauses: list[Clause] = []
    tool_notes: list[Note] = []
    # Among three or more people with no assistant, "you" is one of several, or anyone:
    # a turn names whom it speaks to ("Monica, would you ...") or "you" is "they".
    among_many = _among_many(visible)
    # A stage direction is said to nobody, and nobody answers it.
    listeners = (
        {} if among_many else _listeners([m for m in visible if stage_direction(m.content) is None])
    )
    for message in visible:
        if message.role == "tool":
            tool_notes.append(_tool_note(message))
        elif message.content.strip():
            listener = listeners.get(message.id, "")
            clauses.extend(
                message_clauses(message, state, detail, listener=listener, keep_you=among_many)
            )
    _raise_unanswered_requests(clauses, visible)
    if len(visible) > LONG_TALK_TURNS and _is_group_talk(visible):
        # A long meeting is noted as its minutes are: what was decided, preferred, planned
        # or found wrong, the facts with an amount or a name and what happened; the
        # questions and asides along the way are answered in it.
        clauses = [c for c in clauses if c.priority != LOW or c.kind in MINUTES_KINDS]
    clauses = _drop_known_clauses(clauses, KnownFacts(previous_observations))
    tool_notes = _drop_known_tool_notes(fold_tool_notes(tool_notes), previous_observations)
    clauses = fold_fulfilled_requests(clauses, tool_notes, visible)
    notes = sorted(group_clauses(clauses, visible) + tool_notes, key=lambda n: n.first_seq)
    current_task, suggested_response = _current_task(clauses)
    return ObserverOutput(
        observations=[_draft(note) for note in notes],
        current_task=current_task,
        suggested_response=suggested_response,
    )
