"""The Reflector: observations about one subject condensed into short facts.

Notes about the same subject (a person, an id, a topic two notes name) are grouped; what
repeats is merged, and a later note that updates an earlier one supersedes it, keeping
the day of the change ("User now prefers SMS over email, since Feb 9"). A group becomes
one line that says its best parts (facts before questions, named things before advice)
in a third of its words; a note none of whose parts the line says is not cited and stays
an observation. So no reflection ever repeats a single observation, and a conversation
with nothing to condense gets no reflection at all. The newest notes are only merged or
superseded, never summed up: older material is condensed harder than recent material (a
memory of a few notes is condensed whole: it has no older part).
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memory.engines.base import DraftReflection, SourceObservation
from memory.engines.extractive.condense import (
    Part,
    day_label,
    digest,
    factor_id,
    parts_of,
    write_line,
)
from memory.engines.extractive.cues import never_background
from memory.engines.extractive.pseudonyms import is_pseudonym
from memory.engines.extractive.subjects import (
    Clause,
    Subjected,
    clauses_of,
    definite_keys,
    group_by_subject,
    is_strong_key,
    keys_of,
    lowercase_keys,
    name_keys,
    speakers_of,
)
from memory.engines.extractive.vocabulary import (
    ADVERBS,
    COMPLETED,
    LOW,
    MEDIUM,
    PRIORITY_STRENGTH,
    VAGUE_WORDS,
    content_tokens,
    numbers_in,
    wordset,
)

# Token-set Jaccard at which two notes say the same thing. Lower merges distinct events
# ("went to the park with a friend" / "went to the zoo with a friend" share 4 of 6).
DUPLICATE_SIMILARITY = 0.75
RECENT_SHARE = 0.25  # the newest quarter of notes is only merged or superseded
RECENT_FROM_NOTES = 8  # a memory of fewer notes has no older part to condense harder
MAX_GROUP_NOTES = 12
LIST_ITEMS = 4  # named items of one quoted list a line keeps
MAX_STATEMENT_WORDS = 20  # a value, a preference or a change of mind: one short clause
MAX_SUPERSEDE_CANDIDATES = 64  # per word: bounds a very long memory to linear time
_NEGATION = re.compile(r"\b(?:not|never|yet|no\s+longer|\w+n't)\b|\bn't\b", re.IGNORECASE)


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def _strongest(priorities: Iterable[str]) -> str:
    return max(priorities, key=lambda p: PRIORITY_STRENGTH.get(p, 0))


@dataclass
class _Item:
    """An observation on its way into a reflection."""

    order: int
    text: str
    priority: str
    observed_at: datetime
    referenced_at: datetime | None
    ids: dict[str, int]  # observation id -> its place in time, for ordered output
    words: int  # of every note it stands for
    tokens: frozenset[str]
    numbers: frozenset[str]
    actor: str
    topic: str
    remainder: str
    subject: tuple[str, ...] | None
    clauses: list[Clause] = field(default_factory=list)
    since: datetime | None = None  # the day a later note changed what an earlier said
    was: str = ""  # the value a changed attribute had before
    # What the notes this one superseded also said, still true: "User's name is Dana"
    # beside the preference it changed.
    carried: list[str] = field(default_factory=list)
    alive: bool = True
    _statements: list[_Statement] | None = field(default=None, repr=False)

    @property
    def event_day(self) -> datetime:
        return self.referenced_at or self.observed_at

    @property
    def stands_for_several(self) -> bool:
        return len(self.ids) > 1

    def absorb(self, other: _Item) -> None:
        # The smaller set goes into the larger one: a long run of duplicates stays linear.
        small, large = sorted((self.ids, other.ids), key=len)
        large.update(small)
        self.ids = large
        self.words += other.words
        other.ids = {}
        other.alive = False

    def supersede(self, earlier: _Item, *, keeping: Sequence[str] = ()) -> None:
        """This later note replaces ``earlier`` (all but its clauses ``keeping``, which
        it carries on): said as of this note's day."""
        self.carried.extend([*keeping, *earlier.carried])
        if (
            self.subject is not None
            and earlier.subject == self.subject
            and earlier.remainder.strip() != self.remainder.strip()
        ):
            self.was = earlier.remainder.strip(" .;")
        self.since = self.event_day
        self.absorb(earlier)

    @property
    def restated(self) -> str:
        """The note as a reflection says it: with the day of a change and the value
        before it."""
        text = self.text.rstrip(" .;")
        if self.was:
            text += f" (was {self.was})"
        if self.since is not None:
            text += f", since {day_label(self.since)}"
        return "; ".join([text, *self.carried])

    @property
    def statements(self) -> list[_Statement]:
        """The note's clauses as statements, each with its speaker (read once: only
        superseding reads them, before any text changes)."""
        if self._statements is None:
            if "; " not in self.text:
                self._statements = [_statement(self.text)]
            else:
                self._statements = [_statement(c.written) for c in clauses_of(self.text)]
        return self._statements


def _ids_in_order(items: Iterable[_Item]) -> list[str]:
    merged: dict[str, int] = {}
    for item in items:
        merged.update(item.ids)
    return sorted(merged, key=merged.__getitem__)


# Who a note is by: a role, a pseudonym, or a name ("Maria", "Tom Berg").
_WHO = r"(?P<actor>User|Assistant|System|<[A-Z]+(?:_[A-Z]+)*_\d+>|[A-Z][a-z]+(?: [A-Z][a-z]+)?)"
_ATTRIBUTE = re.compile(
    "^" + _WHO + r"'s\s+(?P<attribute>[\w-]+(?:\s+[\w-]+)?)\s+(?:is|are|was|were)\s+"
)
_ACTOR_VERB = re.compile(
    "^" + _WHO + r"\s+(?:(?:" + "|".join(sorted(ADVERBS)) + r")\s+)*(?P<verb>[a-z][\w'-]*)\s*"
)
_TOOL_LINE = re.compile(r"^Tool\s+(?P<tool>[\w.:-]+):\s*")
_TOOL_OBJECT = re.compile(r"^[a-z ]{2,20} ([A-Z]*-?\d[\w-]*)")
_CHANGE_MARKER = re.compile(
    r"\b(?:now|no\s+longer|anymore|instead|switched|changed|actually)\b", re.IGNORECASE
)
# A second statement with one of these verbs replaces the first ("prefers SMS" after
# "prefers email"); "wants" and "needs" add up unless a change is said ("now", "no longer").
_EXCLUSIVE_VERB = re.compile(r"^(?:prefers?|chose|chooses|picked|switched)$", re.IGNORECASE)
_PREFERENCE_VERB = re.compile(
    r"^(?:prefers?|wants?|needs?|chose|chooses|picked|switched|uses?)$", re.IGNORECASE
)
# Ways to reach someone: a preference for one replaces a preference for another ("prefers
# SMS" after "prefers phone calls"), though the two share no word.
CONTACT_CHANNELS = wordset(
    "email e-mail mail post letter sms text phone call telephone whatsapp chat message"
)
_POLAR_VERB = re.compile(
    r"^(?:likes?|loves?|enjoys?|prefers?|hates?|dislikes?|doesn't|does|no|is|isn't)$", re.I
)


def topic_of(text: str) -> tuple[str, str, str, tuple[str, ...] | None]:
    """(actor, topic, remainder, subject) of a note.

    The topic is what a summary line groups by ("User likes", "Tool lookup_order:"); the
    subject names what a later note replaces ("User's email is ...", an order's state)."""
    tool = _TOOL_LINE.match(text)
    if tool:
        rest = text[tool.end() :]
        obj = _TOOL_OBJECT.match(rest)
        subject: tuple[str, ...] | None = (
            ("tool", tool.group("tool"), obj.group(1)) if obj else None
        )
        return "Tool", text[: tool.end()].strip(), rest, subject
    attribute = _ATTRIBUTE.match(text)
    if attribute and "; " not in text and len(text.split()) <= MAX_STATEMENT_WORDS:
        actor = attribute.group("actor")
        subject = (actor, attribute.group("attribute").lower())
        return actor, text[: attribute.end()].strip(), text[attribute.end() :], subject
    statement = _ACTOR_VERB.match(text)
    if statement:
        actor = statement.group("actor")
        return actor, f"{actor} {statement.group('verb')}", text[statement.end() :], None
    actor = text.split("'", 1)[0] if text.startswith(("User'", "Assistant'")) else ""
    return actor, "", text, None


def _make_items(observations: Sequence[SourceObservation]) -> list[_Item]:
    indexed = sorted(enumerate(observations), key=lambda pair: (pair[1].observed_at, pair[0]))
    items = []
    for order, (_, observation) in enumerate(indexed):
        actor, topic, remainder, subject = topic_of(observation.text)
        tokens = content_tokens(observation.text)
        items.append(
            _Item(
                order=order,
                text=observation.text,
                # A note about money, a deadline or a promise is never background, even
                # when whoever wrote it said so.
                priority=(
                    MEDIUM
                    if observation.priority == LOW and never_background(observation.text)
                    else observation.priority
                ),
                observed_at=observation.observed_at,
                referenced_at=observation.referenced_at,
                ids={observation.id: order},
                words=len(observation.text.split()),
                tokens=tokens,
                numbers=numbers_in(tokens),
                actor=actor,
                topic=topic,
                remainder=remainder,
                subject=subject,
            )
        )
    return items


@dataclass(frozen=True)
class _Statement:
    """One clause of a note, as a statement someone makes about something."""

    text: str
    actor: str
    topic: str
    remainder: str


def _statement(text: str) -> _Statement:
    actor, topic, remainder, _ = topic_of(text)
    return _Statement(text, actor, topic, remainder)


def _is_preference_like(statement: _Statement) -> bool:
    """A short statement of a preference, a choice or a change of mind."""
    if len(statement.text.split()) > MAX_STATEMENT_WORDS:
        return False
    verb = statement.topic.split()[-1] if statement.topic else ""
    return bool(
        _PREFERENCE_VERB.match(verb)
        or _POLAR_VERB.match(verb)
        or _CHANGE_MARKER.search(statement.text)
    )


def _object_words(statement: _Statement) -> frozenset[str]:
    """What a statement is about: not who makes it ("<PERSON_2> doesn't know, <PERSON_2>
    lost it all" is about nothing "<PERSON_2> wants to buy shares" is about)."""
    return content_tokens(statement.remainder) - VAGUE_WORDS - content_tokens(statement.actor)


def _replaces(later: _Statement, earlier: _Statement) -> bool:
    """Does a later preference-like statement overturn an earlier one about the same
    things (at least half the words of what the shorter one is about)?"""
    if earlier.actor != later.actor or not _is_preference_like(earlier):
        return False
    later_words, earlier_words = _object_words(later), _object_words(earlier)
    exclusive = _EXCLUSIVE_VERB.match(later.topic.split()[-1] if later.topic else "") is not None
    if _about_channels(later_words) and _about_channels(earlier_words):
        return exclusive
    shared = later_words & earlier_words
    if not shared or 2 * len(shared) < min(len(later_words), len(earlier_words)):
        return False
    flipped = (_NEGATION.search(later.text) is None) != (_NEGATION.search(earlier.text) is None)
    if _CHANGE_MARKER.search(later.text) or flipped:
        return True
    return earlier.topic == later.topic and exclusive


_A_CHANNEL = "(a way to be reached)"  # indexes every statement about channels together


def _about_channels(words: frozenset[str]) -> bool:
    """What a statement is about is ways to be reached, and nothing else."""
    return bool(words) and words <= CONTACT_CHANNELS


def _index_words(statement: _Statement) -> frozenset[str]:
    """The words a statement is found by, for those that may overturn it."""
    words = _object_words(statement)
    return words | {_A_CHANNEL} if _about_channels(words) else words


def _said_again(later: _Statement, earlier: _Statement) -> bool:
    """A repeat of a statement rather than a change of it: nearly the same words, no
    change marker, the same polarity."""
    flipped = (_NEGATION.search(later.text) is None) != (_NEGATION.search(earlier.text) is None)
    return (
        not flipped
        and _CHANGE_MARKER.search(later.text) is None
        and jaccard(content_tokens(later.text), content_tokens(earlier.text))
        >= DUPLICATE_SIMILARITY
    )


def supersede(items: list[_Item]) -> None:
    """A later note about the same subject replaces the earlier one: a changed attribute,
    a new state of the same tool object, a changed or reversed preference. A preference
    may be one clause of an earlier note: the other clauses live on in the later one."""
    latest_by_subject: dict[tuple[str, ...], _Item] = {}
    # Preference-like statements by the words of what they are about: only those that
    # share one can overturn each other, and the index keeps a long memory linear.
    by_object_word: dict[str, list[tuple[_Item, int]]] = defaultdict(list)
    for item in items:
        if item.subject is not None:
            earlier = latest_by_subject.get(item.subject)
            if earlier is not None and earlier.alive:
                item.supersede(earlier)
            latest_by_subject[item.subject] = item
            continue
        statements = item.statements
        if len(statements) == 1 and _is_preference_like(statements[0]):
            later = statements[0]
            candidates: dict[tuple[int, int], tuple[_Item, int]] = {}
            for word in sorted(_index_words(later)):
                alive = [(e, c) for e, c in by_object_word[word] if e.alive]
                by_object_word[word] = alive
                # The latest few statements about a word are those a new one can overturn.
                candidates.update(
                    ((e.order, c), (e, c)) for e, c in alive[-MAX_SUPERSEDE_CANDIDATES:]
                )
            for key in sorted(candidates):
                earlier, clause = candidates[key]
                earlier_statements = earlier.statements
                if not earlier.alive or not _replaces(later, earlier_statements[clause]):
                    continue
                keeping = [st.text for i, st in enumerate(earlier_statements) if i != clause]
                if not keeping and _said_again(later, earlier_statements[clause]):
                    item.absorb(earlier)
                else:
                    item.supersede(earlier, keeping=keeping)
        for clause, statement in enumerate(statements):
            if _is_preference_like(statement):
                for word in sorted(_index_words(statement)):
                    by_object_word[word].append((item, clause))


def merge_near_duplicates(items: list[_Item]) -> None:
    """Fold notes that say the same thing into the later one.

    Prefix filtering keeps this near-linear: two token sets with Jaccard >= t must share
    one of the len - ceil(t * len) + 1 rarest tokens of each."""
    frequency: Counter[str] = Counter(t for item in items if item.alive for t in item.tokens)
    # Who says a note is no part of what it says: "Ticket Agent can't do that" and "Ticket
    # Agent can't imagine why" share "can't", not three words of four.
    said = {item.order: item.tokens - content_tokens(item.actor) for item in items}
    index: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        if not item.alive or not item.tokens:
            continue
        ranked = sorted(item.tokens, key=lambda t: (frequency[t], t))
        prefix = ranked[: len(ranked) - math.ceil(DUPLICATE_SIMILARITY * len(ranked)) + 1]
        candidates: dict[int, _Item] = {}
        for token in prefix:
            # Absorbed notes leave the index as they are met, so that a long run of
            # repeats does not make every later note walk past all of them.
            index[token] = [other for other in index[token] if other.alive]
            for other in index[token]:
                candidates[other.order] = other
        for order in sorted(candidates):
            other = candidates[order]
            if other.actor != item.actor or other.numbers != item.numbers:
                continue  # a different amount or id is a different fact
            if _different_days(item.referenced_at, other.referenced_at):
                continue  # the same thing on another day is another event
            if jaccard(said[item.order], said[other.order]) >= DUPLICATE_SIMILARITY:
                if len(other.tokens) > len(item.tokens):
                    item.text, item.remainder = other.text, other.remainder
                item.priority = _merged_priority(other.priority, item.priority)
                item.referenced_at = item.referenced_at or other.referenced_at
                item.since, item.was = item.since or other.since, item.was or other.was
                item.absorb(other)
        for token in prefix:
            index[token].append(item)


def _different_days(left: datetime | None, right: datetime | None) -> bool:
    return left is not None and right is not None and left.date() != right.date()


def _merged_priority(earlier: str, later: str) -> str:
    if later == COMPLETED:
        return COMPLETED  # the same task, now finished
    return _strongest([earlier, later])


def _merged_priority_of(items: Sequence[_Item]) -> str:
    """A line is as urgent as its most urgent note; it is done only when all of them are."""
    priorities = [i.priority for i in items]
    if all(p == COMPLETED for p in priorities):
        return COMPLETED
    return _strongest(p for p in priorities if p != COMPLETED)


def _draft(
    items: Sequence[_Item], text: str, tags: list[str], *, topics: list[str] | None = None
) -> DraftReflection:
    referenced = [i.referenced_at for i in items if i.referenced_at is not None]
    return DraftReflection(
        text=text,
        priority=_merged_priority_of(items),
        referenced_at=max(referenced) if referenced else None,
        source_observation_ids=_ids_in_order(items),
        tags=tags,
        topics=topics if topics is not None else sorted({i.topic for i in items if i.topic})[:1],
    )


def _condense(group: list[_Item], *, key: str, speakers: frozenset[str]) -> DraftReflection | None:
    """One line for a group of notes about one subject, citing the notes it condenses;
    None when fewer than two of them condense."""
    parts: list[list[Part]] = []
    for index, item in enumerate(group):
        clauses = clauses_of(item.text, speakers)
        if clauses:
            # What changed, and since when, goes with the last thing the note says.
            clauses[-1].text += (f" (was {item.was})" if item.was else "") + (
                f", since {day_label(item.since)}" if item.since else ""
            )
        for carried in item.carried:
            clauses.extend(clauses_of(carried, speakers))
        parts.append(
            parts_of(
                index, clauses, priority=item.priority, day=item.event_day, list_limit=LIST_ITEMS
            )
        )
    head = ""
    if is_strong_key(key) and not is_pseudonym(key):
        head = factor_id([p for own in parts for p in own], key)
    kept, cited = digest(parts, [item.words for item in group], key=key)
    if len(cited) < 2 or not kept:
        return None
    dated = len({group[n].event_day.date() for n in cited}) > 1
    text = write_line(kept, dated=dated, head=head)
    if len(text.split()) >= sum(group[n].words for n in cited):
        return None  # short notes that a line would not shorten stay as they are
    return _draft([group[n] for n in cited], text, ["summary"], topics=[key])


def reflect_observations(observations: Sequence[SourceObservation]) -> list[DraftReflection]:
    """Reflections for what condenses; notes no reflection cites stay as they are."""
    if not observations:
        return []
    items = _make_items(observations)
    supersede(items)
    merge_near_duplicates(items)
    alive = [i for i in items if i.alive]
    speakers = speakers_of(i.text for i in alive)
    recent = math.ceil(len(alive) * RECENT_SHARE) if len(alive) >= RECENT_FROM_NOTES else 0
    older = alive[: len(alive) - recent]
    subjected = []
    common_words = {k for item in older for k in lowercase_keys(item.text)}
    for item in older:
        item.clauses = clauses_of(item.text, speakers)
        keys = {k for clause in item.clauses for k in _clause_keys(clause)}
        names = {k for clause in item.clauses for k in name_keys(clause.text)} & keys
        subjected.append(
            Subjected(
                day=item.event_day.toordinal(),
                keys=frozenset(keys),
                names=frozenset(names - common_words),
                definite=frozenset(definite_keys(item.text) & keys),
            )
        )
    drafts: list[tuple[int, DraftReflection]] = []
    condensed: set[int] = set()
    for key, members in group_by_subject(subjected, max_group=MAX_GROUP_NOTES):
        group = [older[m] for m in members]
        draft = _condense(group, key=key, speakers=speakers)
        if draft is None:
            continue
        cited = set(draft.source_observation_ids)
        condensed.update(i.order for i in group if cited & set(i.ids))
        drafts.append((group[0].order, draft))
    for item in alive:
        if item.order not in condensed and item.stands_for_several:
            tags = ["update"] if item.since else ["merged"]
            drafts.append((item.order, _draft([item], item.restated, tags)))
    drafts.sort(key=lambda pair: pair[0])
    return [draft for _, draft in drafts]


def _clause_keys(clause: Clause) -> set[str]:
    """The subject keys of a clause. A person is a subject where a speaker other than the
    assistant names them: the assistant's answers name products, places and titles by the
    dozen, and a pseudonym there is more often one of those than someone in the
    conversation. Ids count wherever they are, a list's items only by their ids."""
    keys = keys_of(clause.text)
    if clause.actor == "Assistant":
        keys = {k for k in keys if not is_pseudonym(k)}
    for item in clause.items:
        keys.update(k for k in keys_of(item) if is_strong_key(k) and not is_pseudonym(k))
    return keys
