"""How the Reflector writes: the parts of a group's notes ranked by what they are worth,
the line that says the best of them in a word budget, and the short forms it uses
(fillers and hedges dropped, a list cut to the items that name something).

Nothing here cuts a clause in the middle, and a pseudonym label (``<PERSON_12>``) is
never split, re-cased or stripped: words are only ever dropped whole, and never a label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.engines.extractive.pseudonyms import PSEUDONYM, is_pseudonym
from memory.engines.extractive.sentences import QUOTED
from memory.engines.extractive.subjects import (
    ASKING_VERBS,
    LISTING_VERBS,
    Clause,
    keys_of,
)
from memory.engines.extractive.vocabulary import HIGH, MEDIUM, wordset

# Words a short fact does without.
_FILLERS = wordset("the very really just quite also actually basically totally")
# "User thinks User will buy it" says "User will buy it".
_HEDGE = re.compile(
    r"^(?:thinks|guesses|feels|believes|supposes|figures)\s+(?:that\s+)?\S+\s+"
    r"(?=(?:will|would|might|should|could|is\s+going\s+to|wants|needs)\b)"
)
_THINKING_OF = re.compile(r"^is\s+(?:thinking|considering)\s+(?:of|about)\s+")
_DIGIT = re.compile(r"\d")
_AMOUNT = re.compile(r"[$€£¥]?\d[\d.,:/-]*\d|[$€£¥]?\d")  # "$130", "129.0", "10:30", "7"
_COMMITMENT = re.compile(r"\b(?:will|promised?|guarantee[ds]?|committed|must)\b", re.I)
_TRAILING_PUNCTUATION = " ,;:.-"
# A note is condensed to its best parts in a third of its words (its best part alone may
# take up to 1/1.8 of them); a part worth this much or more is never left out of it.
TARGET_RATIO = 3.0
MIN_RATIO = 1.8
ESSENTIAL_VALUE = 6.0
# A clause this short is one fact, which a third of its words cannot say: a note of one
# or two such clauses (a fact; a request and its answer) joins a line whole (its fillers
# dropped, its speaker said once for the line), and the line must still be shorter than
# its notes together.
SHORT_CLAUSE_WORDS = 12
SHORT_NOTE_CLAUSES = 2


def day_label(moment: datetime) -> str:
    return f"{moment:%b} {moment.day}"


def compact(text: str) -> str:
    """The words that carry the fact: fillers and hedges dropped, labels kept as they
    are. Words are only dropped whole, so no clause is cut short."""
    text = _HEDGE.sub("", text.strip())
    text = _THINKING_OF.sub("is considering ", text)
    words = text.split()
    kept = [
        word
        for before, word, after in zip(["", *words], words, [*words[1:], ""], strict=False)
        # "the drive" is "drive", but "The Women in the Castle" is a title, and "for the
        # for this" (speech that started again) does not become "for for this".
        if word.lower() not in _FILLERS
        or after[:1].isupper()
        or after[:1] in '<"“'
        or before.lower() == after.lower()
    ]
    return " ".join(kept).strip(_TRAILING_PUNCTUATION)


def names_something(text: str) -> bool:
    """A number, a pseudonym, a quoted title or a capitalised word past the first."""
    if _DIGIT.search(text) or QUOTED.search(text) or PSEUDONYM.search(text):
        return True
    words = text.split()
    return any(word[:1].isupper() for word in words[1:])


@dataclass
class Part:
    """A clause of a note on its way into a line: whose note (``note``), where in it
    (``position``), who says it, what, how much it is worth and what it is about."""

    note: int
    position: int
    actor: str
    text: str
    value: float
    keys: frozenset[str]
    day: datetime

    @property
    def words(self) -> int:
        return len(self.text.split()) + (1 if self.actor else 0)


def _list_items(clause: Clause) -> list[str]:
    first = clause.text.split(None, 1)[1] if " " in clause.text else ""
    candidates = [piece.strip() for piece in first.split(", ") if piece.strip()]
    return [*candidates, *clause.items]


def _named_items(clause: Clause, limit: int) -> list[str]:
    """The items of a quoted list that name something (a product, a title, an amount);
    advice in general words ("Start small") is left out."""
    named = []
    for item in _list_items(clause):
        words = item.split()
        capitalised = sum(1 for w in words if w[:1].isupper())
        if len(words) < 2 and not QUOTED.search(item):
            continue  # "Focus", "155": a word alone says nothing about what it names
        if _DIGIT.search(item) or QUOTED.search(item) or any(is_pseudonym(w) for w in words):
            named.append(item)
        elif len(words) >= 2 and capitalised == len(words):
            named.append(item)  # "Philips Hue Bridge", "Kiwi Crate"
    return named[:limit]


def parts_of(
    note: int, clauses: Sequence[Clause], *, priority: str, day: datetime, list_limit: int
) -> list[Part]:
    """A note's clauses as parts, each worth what it tells: a fact about a speaker most,
    then what someone said with a name or number in it, a commitment, the named items of
    a list; a question asked least. A high-priority note's parts are worth the most."""
    parts = []
    weight = 3.0 if priority == HIGH else 1.0 if priority == MEDIUM else 0.0
    for position, clause in enumerate(clauses):
        verb = clause.verb
        if verb in LISTING_VERBS:
            items = _named_items(clause, list_limit)
            if not items:
                continue
            text = f"{verb} {', '.join(items)}"
            value = 1.5
        else:
            text = compact(clause.text)
            if not text:
                continue
            specific = names_something(clause.text)
            if verb in ASKING_VERBS:
                value = 1.5 if specific else 0.5
            elif clause.actor.startswith("Tool"):
                value = 1.0
            elif verb == "said":
                value = 2.5 if specific else 1.5
            elif clause.actor == "Assistant":
                value = 2.0 + (1.0 if specific else 0.0)
            else:
                value = 3.0 + (1.0 if specific else 0.0)
            if _COMMITMENT.search(clause.text):
                value += 1.0
            if _answers(clause, clauses[position - 1] if position else None):
                value = max(value, ESSENTIAL_VALUE)  # what was asked for is never dropped
        parts.append(
            Part(
                note=note,
                position=position,
                actor=clause.actor,
                text=text,
                value=value + weight,
                keys=frozenset(keys_of(text) | set(_AMOUNT.findall(text))),
                day=day,
            )
        )
    return parts


def _answers(clause: Clause, before: Clause | None) -> bool:
    """Is this clause someone's answer to the request just before it ("User requested a
    main course; Assistant said a wellington would serve eight")? A list of options is
    not: its named items are worth what they name."""
    return (
        before is not None
        and clause.verb not in LISTING_VERBS
        and before.actor != clause.actor
        and bool(clause.actor)
        and before.verb in ASKING_VERBS
    )


def _says(said: set[str], part: Part) -> bool:
    """Do the words already said name (nearly) all this part is about, and every amount
    and number in it? "$130" after "$129" is another fact."""
    unsaid = part.keys - said
    return (
        bool(part.keys)
        and len(unsaid) <= len(part.keys) // 5
        and not any(_DIGIT.search(k) for k in unsaid)
    )


def digest(
    parts: Sequence[Sequence[Part]], words: Sequence[int], *, key: str = ""
) -> tuple[list[Part], list[int]]:
    """(the parts a line says, in order; the notes it condenses). Each note, in order,
    is said by its best parts that the line does not say already, best first, in a third
    of its words; a note whose best part alone takes more than 1/MIN_RATIO of them, that
    would lose an essential part, or that would lose a part about ``key`` (what the line
    is about) as good as any it keeps, does not condense and is not cited. A note all of whose parts
    the line already says is cited: it repeats them."""
    kept: list[Part] = []
    cited: list[int] = []
    said: set[str] = set()
    for note, own in enumerate(parts):
        if not own:
            continue
        fresh = [p for p in own if not _says(said, p)]
        chosen: list[Part] = []
        used = 0
        short = len(own) <= SHORT_NOTE_CLAUSES and all(p.words <= SHORT_CLAUSE_WORDS for p in own)
        budget = words[note] if short else words[note] / TARGET_RATIO
        for part in sorted(fresh, key=lambda p: (-p.value, p.position)):
            fits = used + part.words <= budget
            if not (fits or (not chosen and part.words <= words[note] / MIN_RATIO)):
                break  # never a lesser part in the place of a better one that does not fit
            chosen.append(part)
            used += part.words
        left_out = [p for p in fresh if p not in chosen]
        if fresh and not chosen or any(p.value >= ESSENTIAL_VALUE for p in left_out):
            continue
        best = max((p.value for p in chosen), default=0.0)
        if any(key in p.keys and p.value >= best for p in left_out):
            continue  # grouped for a part as good as any the line says, which it leaves out
        cited.append(note)
        kept.extend(sorted(chosen, key=lambda p: p.position))
        said.update(k for p in chosen for k in p.keys)
    return kept, cited


def write_line(parts: Sequence[Part], *, dated: bool, head: str = "") -> str:
    """The parts in order, the speaker named where it changes, after ``head`` (what they
    are all about); with ``dated``, each day's last part says its day."""
    pieces: list[str] = []
    actor = None
    for index, part in enumerate(parts):
        text = part.text
        # "'s doctor arrives" is only read with its owner, however recently named.
        if part.actor and (part.actor != actor or text.startswith(("'", "’"))):
            joiner = "" if text.startswith(("'", "’", ",")) else " "
            text = f"{part.actor}{joiner}{text}"
        # After a sentence of its own ("The gang hides"), a speaker is named again.
        actor = part.actor or None
        last_of_day = index + 1 == len(parts) or parts[index + 1].day.date() != part.day.date()
        if dated and last_of_day:
            text = f"{text} ({day_label(part.day)})"
        pieces.append(text)
    line = "; ".join(pieces)
    return f"{head}: {line}" if head else line


_ID_NOUNS = r"(?:order|ticket|case|invoice|account|parcel|package|booking|reservation|claim)"
_PREPOSITIONS = r"(?:for|of|on|about|with|from|in|to)"


def factor_id(parts: Sequence[Part], key: str) -> str:
    """The id a group is about, said once at the head of its line ("order ORD-5521")
    and no longer in each part: "refund for order ORD-5521" becomes "refund", and where
    the id is what a part is about, it ("order ORD-5521 arrived" becomes "it arrived")."""
    token = re.escape(key).replace("\\-", "-")
    phrase = re.compile(
        rf"(?:\b{_PREPOSITIONS}\s+)?(?:\bthe\s+)?(?:\b(?P<noun>{_ID_NOUNS})\s+)?#?"
        rf"(?<![\w-]){token}(?![\w-])",
        re.IGNORECASE,
    )
    nouns = [m.group("noun") for p in parts for m in phrase.finditer(p.text) if m.group("noun")]
    written = [
        m.group(0) for p in parts for m in re.finditer(rf"(?<![\w-]){token}(?![\w-])", p.text, re.I)
    ]
    if not written:
        return ""
    head = (
        written[0]
        if not nouns
        else f"{max(sorted(set(nouns)), key=nouns.count).lower()} {written[0]}"
    )

    def replace(match: re.Match[str]) -> str:
        opening = match.group(0).split(None, 1)[0].lower()
        return "" if re.fullmatch(_PREPOSITIONS, opening) else "it"

    for part in parts:
        text = phrase.sub(replace, part.text)
        text = re.sub(r"\s+([,;])", r"\1", re.sub(r"\s{2,}", " ", text)).strip(" ,")
        part.text = text or part.text
    return head
