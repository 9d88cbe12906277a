"""The Reflector: observations merged and compressed into reflections.

A later note about the same subject supersedes the earlier one ("User now prefers SMS"
replaces "User prefers email"), near-duplicates (token-set similarity) are merged, and
the older part of memory is compressed harder than the recent part: old high-priority
notes stay as they are, other old notes become one line per topic, and background and
completed ones are shortened on the way.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.engines.base import DraftReflection, SourceObservation
from memory.engines.extractive.cues import never_background
from memory.engines.extractive.vocabulary import (
    ADVERBS,
    COMPLETED,
    HIGH,
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
RECENT_SHARE = 0.25  # the newest quarter of observations is reflected verbatim
OLD_HIGH_WORDS = 60  # in practice no limit: old high-priority notes are kept whole
OLD_MEDIUM_WORDS = 18  # old medium notes keep about this many words each, no articles
OLD_BACKGROUND_WORDS = 10  # old low and completed notes, harder still
MAX_GROUP_ITEMS = 12
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
    tokens: frozenset[str]
    numbers: frozenset[str]
    actor: str
    topic: str
    remainder: str
    subject: tuple[str, ...] | None
    alive: bool = True

    @property
    def event_day(self) -> datetime:
        return self.referenced_at or self.observed_at

    def absorb(self, other: _Item) -> None:
        # The smaller set goes into the larger one: a long run of duplicates stays linear.
        small, large = sorted((self.ids, other.ids), key=len)
        large.update(small)
        self.ids = large
        other.ids = {}
        other.alive = False


def _ids_in_order(items: Iterable[_Item]) -> list[str]:
    merged: dict[str, int] = {}
    for item in items:
        merged.update(item.ids)
    return sorted(merged, key=merged.__getitem__)


_ATTRIBUTE = re.compile(
    r"^(?P<actor>User|Assistant|System)'s\s+(?P<attribute>[\w-]+(?:\s+[\w-]+)?)\s+"
    r"(?:is|are|was|were)\s+"
)
_ACTOR_VERB = re.compile(
    r"^(?P<actor>User|Assistant|System)\s+(?:(?:" + "|".join(sorted(ADVERBS)) + r")\s+)*"
    r"(?P<verb>[\w'-]+)\s*"
)
_TOOL_LINE = re.compile(r"^Tool\s+(?P<tool>[\w.:-]+):\s*")
_TOOL_OBJECT = re.compile(r"^[a-z ]{2,20} ([A-Z]*-?\d[\w-]*)")
_CHANGE_MARKER = re.compile(
    r"\b(?:now|no\s+longer|anymore|instead|switched|changed|actually)\b", re.IGNORECASE
)
_EXCLUSIVE_VERB = re.compile(
    r"^(?:prefers?|wants?|needs?|chose|chooses|picked|switched|uses?)$", re.IGNORECASE
)
_POLAR_VERB = re.compile(
    r"^(?:likes?|loves?|enjoys?|prefers?|hates?|dislikes?|doesn't|does|no|is|isn't)$", re.I
)
_TELEGRAPHIC_DROP = wordset("a an the that which who very really just some quite also so")


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
    if attribute:
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
                tokens=tokens,
                numbers=numbers_in(tokens),
                actor=actor,
                topic=topic,
                remainder=remainder,
                subject=subject,
            )
        )
    return items


def _is_preference_like(item: _Item) -> bool:
    verb = item.topic.split()[-1] if item.topic else ""
    return bool(
        _EXCLUSIVE_VERB.match(verb) or _POLAR_VERB.match(verb) or _CHANGE_MARKER.search(item.text)
    )


def _replaces(later: _Item, earlier: _Item) -> bool:
    """Does a later preference-like statement overturn an earlier one?"""
    if earlier.actor != later.actor:
        return False
    shared = (content_tokens(later.remainder) & content_tokens(earlier.remainder)) - VAGUE_WORDS
    if not shared:
        return False
    flipped = (_NEGATION.search(later.text) is None) != (_NEGATION.search(earlier.text) is None)
    if _CHANGE_MARKER.search(later.text) or flipped:
        return True
    verb = later.topic.split()[-1] if later.topic else ""
    return earlier.topic == later.topic and _EXCLUSIVE_VERB.match(verb) is not None


def supersede(items: list[_Item]) -> None:
    """A later note about the same subject replaces the earlier one: a changed attribute,
    a new state of the same tool object, a changed or reversed preference."""
    latest_by_subject: dict[tuple[str, ...], _Item] = {}
    # Preference-like notes by the words of what they are about: only notes that share
    # one can overturn each other, and the index keeps a long memory from going quadratic.
    by_object_word: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        if item.subject is not None:
            earlier = latest_by_subject.get(item.subject)
            if earlier is not None and earlier.alive:
                item.absorb(earlier)
            latest_by_subject[item.subject] = item
            continue
        if not _is_preference_like(item):
            continue
        object_words = sorted(content_tokens(item.remainder) - VAGUE_WORDS)
        candidates: dict[int, _Item] = {}
        for word in object_words:
            alive = [e for e in by_object_word[word] if e.alive]
            by_object_word[word] = alive
            # The latest few statements about a word are the ones a new one can overturn.
            candidates.update((e.order, e) for e in alive[-MAX_SUPERSEDE_CANDIDATES:])
        for order in sorted(candidates):
            earlier = candidates[order]
            if earlier.alive and _replaces(item, earlier):
                item.absorb(earlier)
        for word in object_words:
            by_object_word[word].append(item)


def merge_near_duplicates(items: list[_Item]) -> None:
    """Fold notes that say the same thing into the later one.

    Prefix filtering keeps this near-linear: two token sets with Jaccard >= t must share
    one of the len - ceil(t * len) + 1 rarest tokens of each."""
    frequency: Counter[str] = Counter(t for item in items if item.alive for t in item.tokens)
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
            if jaccard(item.tokens, other.tokens) >= DUPLICATE_SIMILARITY:
                if len(other.tokens) > len(item.tokens):
                    item.text, item.remainder = other.text, other.remainder
                item.priority = _merged_priority(other.priority, item.priority)
                item.referenced_at = item.referenced_at or other.referenced_at
                item.absorb(other)
        for token in prefix:
            index[token].append(item)


def _different_days(left: datetime | None, right: datetime | None) -> bool:
    return left is not None and right is not None and left.date() != right.date()


def _merged_priority(earlier: str, later: str) -> str:
    if later == COMPLETED:
        return COMPLETED  # the same task, now finished
    return _strongest([earlier, later])


_CONJUNCTIONS = frozenset({"and", "but", "while", "because"})
_CLAUSE_BOUNDARY = re.compile(r"(?<=[,;])\s+|\s+(?=(?:and|but|while|because)\s)")


def _is_specific(clause: str) -> bool:
    return any(
        w[:1].isupper() or w[:1] == '"' or any(c.isdigit() for c in w) for w in clause.split()
    )


def telegraphic(text: str, limit: int) -> str:
    """Drop articles and fillers; past the word limit drop whole clauses that carry no
    name or number. A clause is never cut in the middle: the first one always stays."""
    words = [w for w in text.split() if w.lower() not in _TELEGRAPHIC_DROP]
    if len(words) <= limit:
        return " ".join(words)
    clauses = [c.strip(" ,;") for c in _CLAUSE_BOUNDARY.split(" ".join(words)) if c.strip(" ,;")]
    kept, used = [clauses[0]], len(clauses[0].split())
    for clause in clauses[1:]:
        size = len(clause.split())
        if used + size <= limit or _is_specific(clause):
            kept.append(clause)
            used += size
    joined = kept[0]
    for clause in kept[1:]:
        joined += (" " if clause.split()[0].lower() in _CONJUNCTIONS else "; ") + clause
    return joined


def _summary_line(topic: str, group: list[_Item], words_per_item: int, dated: bool) -> str:
    """One line for a topic: "User went to park (Jan 1); zoo (Jan 3) with a friend"."""
    recent = group[-MAX_GROUP_ITEMS:]
    parts: list[str] = []
    days: list[datetime] = []
    for item in recent:
        part = telegraphic(item.remainder if topic else item.text, words_per_item).rstrip(" .;")
        if parts and part.lower() == parts[-1].lower() and item.event_day.date() == days[-1].date():
            continue
        parts.append(part)
        days.append(item.event_day)
    head, middles, tail = _factor_common_words(parts)
    if dated and len({d.date() for d in days}) > 1:
        middles = [_with_day(m, d, i + 1 == len(days) or days[i + 1].date() != d.date())
                   for i, (m, d) in enumerate(zip(middles, days, strict=True))]  # fmt: skip
    earlier = len(group) - len(recent)
    body = "; ".join(m for m in middles if m) + (f"; +{earlier} earlier" if earlier else "")
    return " ".join(piece for piece in (topic, head, body, tail) if piece)


def _with_day(part: str, day: datetime, last_of_day: bool) -> str:
    label = f"{day:%b} {day.day}"
    return f"{part} ({label})" if last_of_day and label not in part else part


def _factor_common_words(parts: list[str]) -> tuple[str, list[str], str]:
    """Words every part starts or ends with, said once: "to park with a friend", "to zoo
    with a friend" -> ("to", ["park", "zoo"], "with a friend")."""
    if len(parts) < 3:
        return "", parts, ""
    split = [p.split() for p in parts]
    shortest = min(len(words) for words in split)
    lead = 0
    while lead < shortest - 1 and len({words[lead].lower() for words in split}) == 1:
        lead += 1
    trail = 0
    while trail < shortest - lead - 1 and len({words[-1 - trail].lower() for words in split}) == 1:
        trail += 1
    if trail < 2:
        trail = 0  # one shared last word is usually chance, not a pattern
    head = " ".join(split[0][:lead])
    tail = " ".join(split[0][len(split[0]) - trail :]) if trail else ""
    middles = [" ".join(words[lead : len(words) - trail]) for words in split]
    return head, middles, tail


def _summarise(
    items: list[_Item], words_per_item: int, *, dated: bool
) -> list[tuple[int, DraftReflection]]:
    """One line per priority and topic, each note shortened to about ``words_per_item``."""
    groups: dict[tuple[str, str], list[_Item]] = {}
    for item in items:
        groups.setdefault((item.priority, item.topic or item.text), []).append(item)
    drafts = []
    for (priority, _), group in groups.items():
        topic = group[0].topic
        text = _summary_line(topic, group, words_per_item, dated)
        referenced = [i.referenced_at for i in group if i.referenced_at is not None]
        draft = DraftReflection(
            text=text,
            priority=priority,
            referenced_at=max(referenced) if referenced else None,
            source_observation_ids=_ids_in_order(group),
            tags=["summary"] if len(group) > 1 else [],
            topics=[topic] if topic else [],
        )
        drafts.append((group[0].order, draft))
    return drafts


def _keep(item: _Item, *, words: int | None = None) -> tuple[int, DraftReflection]:
    return item.order, DraftReflection(
        text=telegraphic(item.text, words) if words else item.text,
        priority=item.priority,
        referenced_at=item.referenced_at,
        source_observation_ids=_ids_in_order([item]),
        topics=[item.topic] if item.topic else [],
    )


def reflect_observations(observations: Sequence[SourceObservation]) -> list[DraftReflection]:
    if not observations:
        return []
    items = _make_items(observations)
    supersede(items)
    merge_near_duplicates(items)
    alive = [i for i in items if i.alive]
    recent_count = max(1, math.ceil(len(alive) * RECENT_SHARE))
    old, recent = alive[:-recent_count], alive[-recent_count:]
    drafts: list[tuple[int, DraftReflection]] = []
    # Old high-priority notes keep every fact; they only lose articles and fillers.
    drafts.extend(_keep(i, words=OLD_HIGH_WORDS) for i in old if i.priority == HIGH)
    relevant = [i for i in old if i.priority == MEDIUM]
    drafts.extend(_summarise(relevant, OLD_MEDIUM_WORDS, dated=False))
    background = [i for i in old if i.priority in (LOW, COMPLETED)]
    drafts.extend(_summarise(background, OLD_BACKGROUND_WORDS, dated=True))
    drafts.extend(_keep(i) for i in recent)
    if not drafts:  # cannot happen (the newest note always survives); never return []
        drafts.append(_keep(items[-1]))
    drafts.sort(key=lambda pair: pair[0])
    return [draft for _, draft in drafts]
