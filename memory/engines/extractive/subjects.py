"""What a note is about, for the Reflector: the clauses of a note and who says each, the
keys a note can be grouped by (a person, an id, a name, a topic word), and the groups of
notes that share a subject.

The Observer writes a note as clauses joined by "; " ("User asked for hotels in Kyoto;
Assistant listed Hotel Kanra; Ace Hotel"), naming who speaks at each change of speaker;
the items of a list it quotes are joined the same way. A pseudonym label
(``<PERSON_12>``) is one word everywhere here: a key as it is written, never split at
its underscore nor re-cased.
"""

from __future__ import annotations

import heapq
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from memory.engines.extractive.pseudonyms import PSEUDONYM, is_pseudonym
from memory.engines.extractive.vocabulary import STOPWORDS, VAGUE_WORDS, wordset

_LABEL = PSEUDONYM.pattern
_WORD = re.compile(_LABEL + r"|[A-Za-z0-9$€£]+(?:['’.,/-][A-Za-z0-9]+)*")
_ROLE_ACTOR = re.compile(r"^(User|Assistant|System)(?=['’]s\b|[\s,])")
_TOOL_ACTOR = re.compile(r"^(Tool\s+[\w.:-]+:)\s*")
# A named speaker at the start of a note: "Maria asked ...", "Tom, the agent, promised",
# "<PERSON_3> said ...".
_NAME_ACTOR = re.compile(
    r"^(" + _LABEL + r"|[A-Z][\w'-]+(?: [A-Z][\w'-]+)?)(?=(?:,[^,;]{1,40},)? [a-z]|['’]s\b)"
)
# The verbs the Observer reports what a speaker says with ("Monica said ...").
REPORTING_VERBS = wordset("said asked requested means thinks")
# Words that open a list the Observer quotes: the fragments after them are its items.
LISTING_VERBS = wordset("listed mentioned recommended suggested named")
ASKING_VERBS = wordset("asked wondered wonders requested")
_CONTINUING = wordset("and or but so which because while since though although")
# Words that say how something was said, or how a conversation went, not what about.
_NOT_A_SUBJECT = wordset(
    """listed mentioned recommended suggested said says saying asked asks asking wondering
    wonders wondered thinks thinking thought interested curious looking planning plans plan
    wants wanted need needs needed tell told know knows information recommend recommends
    suggest suggests option options example examples specific more kind sort bit pretty
    little new different able sure already still even tips tip started start starting
    use used using uses find found help helps helped work works working getting trying
    set include includes including make making mean means going told add added like liked
    would could should user assistant system tool yes no okay thing things people person
    someone something anything everything lot lots really actually definitely probably
    maybe perhaps sounds sound seems seem wonder question questions answer answers provide
    provided give given keep kept take taken put let lets many much few several first last
    next other another each every same own right well good great best better yeah um uh
    while before after during until through across around within without however although
    though because whether either neither instead rather whole part parts way ways done
    jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june
    july august september october november december monday tuesday wednesday thursday
    friday saturday sunday mon tue wed thu fri sat sun week weekend month year morning
    evening afternoon night hour minute today tomorrow yesterday"""
)
# An order, ticket or account number: "3348917502", "ord-123456", "pk-88", "#4471".
_ID_LIKE = re.compile(r"^(?:#?[a-z]{0,4}\d{4,}|[a-z]{1,5}-\d{2,}[a-z\d-]*)$")
_YEAR = re.compile(r"^(?:19|20)\d\d$")


@dataclass
class Clause:
    """One clause of a note: who says it (blank when the note does not say), what
    (``text``, the predicate as the note words it) and the items of a list it opens."""

    actor: str
    text: str
    items: list[str] = field(default_factory=list)

    @property
    def verb(self) -> str:
        words = self.text.split(None, 1)
        return words[0].lower() if words else ""

    @property
    def written(self) -> str:
        """The clause as a note writes it, with its actor."""
        body = self.text
        if self.items:
            body = f"{body} {'; '.join(self.items)}" if body else "; ".join(self.items)
        if not self.actor:
            return body
        joiner = "" if body.startswith(("'", "’", ",")) else " "
        return f"{self.actor}{joiner}{body}".strip()


def speakers_of(texts: Iterable[str]) -> frozenset[str]:
    """The names (or pseudonyms) that at least two notes open with as their speaker
    ("Maria asked ...", "<PERSON_3> said ..."), besides the roles."""
    counts: Counter[str] = Counter()
    for text in texts:
        match = _NAME_ACTOR.match(text)
        if match and match.group(1) not in ("User", "Assistant", "System", "Tool"):
            counts[match.group(1)] += 1
    return frozenset(name for name, count in counts.items() if count >= 2)


def _leading_actor(fragment: str, speakers: frozenset[str]) -> tuple[str, str] | None:
    match = _ROLE_ACTOR.match(fragment)
    if match:
        rest = fragment[match.end() :].strip()
        # "User Interface said ...": a meeting's designer, not the role.
        named = _named_actor(fragment, speakers) if rest[:1].isupper() else None
        return named or (match.group(1), rest)
    tool = _TOOL_ACTOR.match(fragment)
    if tool:
        return tool.group(1), fragment[tool.end() :]
    return _named_actor(fragment, speakers)


def _named_actor(fragment: str, speakers: frozenset[str]) -> tuple[str, str] | None:
    match = _NAME_ACTOR.match(fragment)
    if match is None:
        return None
    rest = fragment[match.end() :].strip()
    # A name memory opens few notes with is still the speaker of "<PERSON_60> said ...":
    # read as the last speaker's words, the line would say "<PERSON_53> <PERSON_60> said".
    if match.group(1) in speakers or rest.split(" ", 1)[0] in REPORTING_VERBS:
        return match.group(1), rest
    return None


def clauses_of(text: str, speakers: frozenset[str] = frozenset()) -> list[Clause]:
    """The note's clauses. A fragment that opens with a speaker starts a clause of theirs;
    one that opens in lower case continues the last speaker; one that opens otherwise
    after a listing verb is an item of that list, and anywhere else a sentence of its
    own, nobody's words."""
    clauses: list[Clause] = []
    actor = ""
    for raw in text.split("; "):
        fragment = raw.strip()
        if not fragment:
            continue
        lead = _leading_actor(fragment, speakers)
        if lead is not None:
            actor = lead[0]
            clauses.append(Clause(actor, lead[1]))
        elif clauses and clauses[-1].verb in LISTING_VERBS and not fragment[:1].islower():
            clauses[-1].items.append(fragment)
        elif clauses and fragment.split(None, 1)[0] in _CONTINUING:
            clauses[-1].text += f"; {fragment}"  # "; and she will call back"
        elif fragment[:1].islower():
            clauses.append(Clause(actor, fragment))  # "asked ...": the last speaker's
        else:
            # A sentence with a subject of its own ("<PERSON_1> makes a sound", "The gang
            # hides", "Scene: ..."), not the last speaker's words.
            clauses.append(Clause("", fragment))
    return clauses


def word_key(word: str) -> str:
    """The key of a word: a pseudonym as written; any other word lower-cased, without a
    possessive or a plural "s"."""
    if word[:1] == "<" and is_pseudonym(word):
        return word
    key = word.lower().replace("’", "'")
    key = key.removesuffix("'s")
    if len(key) > 3 and key.endswith("s") and not key.endswith(("ss", "is", "us")):
        key = key[:-1]  # "postcards" is "postcard"; "tennis" and "status" stay
    return key


_NOT_KEYS = STOPWORDS | VAGUE_WORDS | _NOT_A_SUBJECT


def keys_of(text: str) -> set[str]:
    """The words of a text that can name a subject."""
    keys = set()
    for word in _WORD.findall(text):
        key = word_key(word)
        if (
            key[:1].isalpha() and len(key) >= 3 and "'" not in key and key not in _NOT_KEYS
        ) or is_strong_key(key):
            keys.add(key)
    return keys


def is_strong_key(key: str) -> bool:
    """A person's pseudonym or an id: the same one in two notes is the same subject, on
    whatever day."""
    if key[:1] == "<":
        return is_pseudonym(key)
    return _ID_LIKE.match(key) is not None and not _YEAR.match(key)


_CAPITALISED = re.compile(r"(?<=[a-z,;:] )[A-Z][a-z][\w'’-]*")


def name_keys(text: str) -> set[str]:
    """Keys of the words a text capitalises inside a sentence: names ("Petco",
    "Philips Hue"), not a capitalised "While" that opens a quoted sentence."""
    keys = {word_key(word) for word in _CAPITALISED.findall(text)}
    return {k for k in keys if k not in STOPWORDS and k not in _NOT_A_SUBJECT} - _ROLE_KEYS


_ROLE_KEYS = frozenset({"user", "assistant", "system", "tool"})
_LOWER_WORD = re.compile(r"(?<![\w'’-])[a-z][\w'’-]*")


def lowercase_keys(text: str) -> set[str]:
    """Keys of the words a text writes in lower case: "old" in "old shoes" is no name,
    even where another note writes "Old Town"."""
    return {word_key(word) for word in _LOWER_WORD.findall(text)}


@dataclass(frozen=True)
class Subjected:
    """A note as grouping sees it: its place in time (day number), its keys, and which
    of them are names."""

    day: int
    keys: frozenset[str]
    names: frozenset[str] = frozenset()
    # Keys the note refers back to, as something already met: "the party".
    definite: frozenset[str] = frozenset()


_DEFINITE = re.compile(r"\b[Tt]he\s+([A-Za-z][\w'’-]*)")


def definite_keys(text: str) -> set[str]:
    """Keys of the words a text says "the" before: "for the party" refers back to a
    party a note before it named ("User is planning a dinner party")."""
    return {word_key(word) for word in _DEFINITE.findall(text)}


def _rare_enough(key: str, frequency: int, notes: int) -> bool:
    """Does a key name few enough notes to be a subject? An id always does (a ticket may
    be what a whole conversation is about); a person up to a tenth of the notes; a word
    up to one in 25."""
    if frequency < 2:
        return False
    if is_pseudonym(key):
        return frequency <= max(3, notes // 10)
    return is_strong_key(key) or frequency <= max(3, round(0.04 * notes))


def _runs(members: list[int], notes: Sequence[Subjected], *, gap: int) -> list[list[int]]:
    """``members`` (in order) cut where two that follow each other are over ``gap``
    days apart."""
    runs: list[list[int]] = []
    for index in members:
        if runs and notes[index].day - notes[runs[-1][-1]].day <= gap:
            runs[-1].append(index)
        else:
            runs.append([index])
    return runs


def _cohesive(
    run: list[int], notes: Sequence[Subjected], key: str, by_key: dict[str, list[int]]
) -> list[int]:
    """The notes of a word's or a person's run that share another subject word with one
    of the others, or that refer back to the word ("the party") and the note before that
    named it: one word in common may be chance ("prioritize" papers, "prioritize" cards),
    and a person two scenes only mention is no subject of either."""
    members = set(run)
    cohesive = {
        index
        for index in run
        if any(
            other != key and len(members.intersection(by_key[other])) >= 2
            for other in notes[index].keys
            if other in by_key and (len(by_key[other]) <= 3 or other in notes[index].names)
        )
    }
    for before, index in zip(run, run[1:], strict=False):
        if key in notes[index].definite:
            cohesive.update((before, index))
    return sorted(cohesive)


def group_by_subject(notes: Sequence[Subjected], *, max_group: int) -> list[tuple[str, list[int]]]:
    """(key, indexes) of the notes about one subject (each group in order, groups by
    first note), every note of a group naming the group's key: a person or an id on any
    day, a name or a topic word within a day of the note before. A person's or a word's
    notes must also share another subject word ("<PERSON_5>" and "marathon"): a sitcom's
    scenes or a meeting's agenda points that only mention someone are not glued together.

    A key many notes name (the conversation's running theme), or a word named on many
    days (a word of every topic, like "experience"), groups nothing. No note is in two
    groups: a person or an id chooses first, then a name, then a word, and of each kind
    the key that groups the most notes. A group larger than ``max_group`` is cut into
    runs of notes."""
    frequency: Counter[str] = Counter(k for note in notes for k in note.keys)
    days: dict[str, set[int]] = defaultdict(set)
    by_key: dict[str, list[int]] = defaultdict(list)
    named: set[str] = set()
    for index, note in enumerate(notes):
        named.update(note.names)
        for key in sorted(note.keys):
            if _rare_enough(key, frequency[key], len(notes)):
                by_key[key].append(index)
                days[key].add(note.day)
    all_days = len({note.day for note in notes})
    candidates: list[tuple[int, int, str, list[int]]] = []
    for key, members in sorted(by_key.items()):
        rank = 0 if is_strong_key(key) else 1 if key in named else 2
        if rank == 2 and len(days[key]) > max(3, all_days // 10):
            continue
        for run in _runs(members, notes, gap=10**6 if rank == 0 else 1):
            if rank == 2 or is_pseudonym(key):
                run = _cohesive(run, notes, key, by_key)
            if len(run) >= 2:
                candidates.append((rank, -len(run), key, run))
    taken: set[int] = set()
    groups: list[tuple[str, list[int]]] = []
    # Sizes change as notes are taken: a key is tried again with the notes it has left.
    pending = candidates
    heapq.heapify(pending)
    while pending:
        rank, _, key, run = heapq.heappop(pending)
        free = [i for i in run if i not in taken]
        if len(free) < 2:
            continue
        if len(free) < len(run):
            heapq.heappush(pending, (rank, -len(free), key, free))
            continue
        groups.append((key, free))
        taken.update(free)
    groups.sort(key=lambda group: group[1][0])
    return [
        (key, members[start : start + max_group])
        for key, members in groups
        for start in range(0, len(members), max_group)
    ]
