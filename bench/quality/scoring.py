"""The bench's pure scoring: content words and answer coverage, garbled lines, malformed
pseudonyms, pseudonyms read back, and pseudonyms per known person. No database, no data
files (the pseudonym format is the product's, read from governance.redaction.labels,
plain text): every function here is tested on hand-made inputs
(tests/memory/test_memory_quality_bench.py)."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# How the product writes a pseudonym, and what only looks like one: the bench counts by
# the product's own definition.
from governance.redaction.labels import LABEL


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
# A pseudonym ("<PERSON_3>") or a mask ("<PERSON>") says no word of an answer: read as
# words it would give "person" and "3", and an answer "3 times" would count as found.
OPAQUE = re.compile(r"<[A-Z][A-Z0-9_]*>")


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


def content_word_list(text: str) -> list[str]:
    """The normalised content words of ``text`` in order, repeats kept (BM25 counts them)."""
    words = []
    for raw in WORD.findall(normalise_dates(OPAQUE.sub(" ", text)).lower()):
        if raw in STOPWORDS:
            continue
        word = _normal_word(raw)
        if word and word not in STOPWORDS:
            words.append(word)
    return words


def content_words(text: str) -> set[str]:
    """The set of normalised content words of ``text`` (see bench/memory_quality.py)."""
    return set(content_word_list(text))


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
    kept = list(pairs)
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


# --------------------------------------------------------------------------- pseudonyms


def read_back(text: str, values: Mapping[str, str]) -> str:
    """``text`` with every label the mapping holds replaced by its value: what a person
    allowed to reveal reads. Labels the mapping does not hold stay as written."""
    if "<" not in text:
        return text
    return LABEL.sub(lambda m: values.get(m.group(0), m.group(0)), text)


@dataclass(frozen=True)
class LabelCost:
    """What the pseudonym labels of a served memory cost: how many, their tokens, and the
    tokens their values would take written out (labels the mapping does not hold count
    as themselves)."""

    labels: int
    label_tokens: int
    value_tokens: int


def label_cost(text: str, values: Mapping[str, str], count: Callable[[str], int]) -> LabelCost:
    """``LabelCost`` of ``text``; ``count`` counts a string's tokens (each label and value
    is counted with the space before it, as it stands in a line)."""
    found = Counter(match.group(0) for match in LABEL.finditer(text))
    return LabelCost(
        labels=found.total(),
        label_tokens=sum(n * count(f" {label}") for label, n in found.items()),
        value_tokens=sum(n * count(f" {values.get(label, label)}") for label, n in found.items()),
    )


TITLES = _wordset("mr mrs ms miss dr")
_NAME_WORD = re.compile(r"[a-z0-9]+")


def _name_words(value: str) -> list[str]:
    words = _NAME_WORD.findall(value.casefold().replace("'s ", " ").removesuffix("'s"))
    return [w for w in words if w not in TITLES and w not in STOPWORDS and not w.isdigit()]


@dataclass
class PeopleLabels:
    """How a workspace's PERSON and LOCATION pseudonyms fall on the people a dataset names."""

    by_person: dict[str, list[str]] = field(default_factory=dict)  # person -> labels
    overlong: int = 0  # labels on people whose value holds more than the name ("I'm Maria")
    false_person: int = 0  # PERSON labels whose value is no known person
    false_location: int = 0  # LOCATION labels whose value is no known person
    person_as_location: int = 0  # LOCATION labels whose value names a known person
    person_labels: int = 0  # PERSON labels in the mapping
    location_labels: int = 0  # LOCATION labels in the mapping

    @property
    def people_labelled(self) -> int:
        return len(self.by_person)

    @property
    def labels_on_people(self) -> int:
        return sum(len(labels) for labels in self.by_person.values())

    @property
    def per_person(self) -> float:
        """PERSON labels allocated per distinct known person that has one (1.0 is ideal)."""
        return self.labels_on_people / self.people_labelled if self.people_labelled else 0.0

    def per_person_among(self, people: Iterable[str]) -> tuple[int, float]:
        """(how many of ``people`` have a label, labels per such person)."""
        counts = [len(self.by_person[p]) for p in people if p in self.by_person]
        return len(counts), (sum(counts) / len(counts) if counts else 0.0)


def main_people(people: Mapping[str, int], share: float = 0.01) -> list[str]:
    """The people who speak at least ``share`` of all the turns the people speak: the
    main characters, without the one-line "Man" and "Girl 1" of a script."""
    total = sum(people.values())
    return sorted(p for p, turns in people.items() if total and turns >= share * total)


def person_of(value: str, people: Mapping[str, int]) -> tuple[str, bool] | None:
    """The known person ``value`` names, and whether the value holds only words of that
    name (titles, a possessive, stopwords and digits left out). A value names a person
    when it shares a word with the name: "Monica", "Mr. Geller", and "I'm Monica Geller"
    (a span that swallowed a word) all do. Where it fits several, the one whose name it
    shares most words with, then the one who speaks most, then the first by name; None
    where it fits nobody."""
    words = set(_name_words(value))
    if not words:
        return None
    shared = {p: len(words & set(_name_words(p))) for p in people}
    fits = [p for p, n in shared.items() if n]
    if not fits:
        return None
    person = min(fits, key=lambda p: (-shared[p], -people[p], p))
    return person, words <= set(_name_words(person))


def people_labels(values: Mapping[str, str], people: Mapping[str, int]) -> PeopleLabels:
    """``values``: the workspace mapping, label -> value; ``people``: the known people with
    the turns each speaks (the weight that settles a value several names share)."""
    result = PeopleLabels()
    by_person: dict[str, list[str]] = defaultdict(list)
    for label, value in sorted(values.items(), key=lambda item: _label_key(item[0])):
        match = LABEL.fullmatch(label)
        if match is None or match.group(1) not in ("PERSON", "LOCATION"):
            continue
        found = person_of(value, people)
        if match.group(1) == "PERSON":
            result.person_labels += 1
            if found is None:
                result.false_person += 1
            else:
                by_person[found[0]].append(label)
                result.overlong += not found[1]
        else:
            result.location_labels += 1
            if found is None:
                result.false_location += 1
            else:
                result.person_as_location += 1
    result.by_person = dict(sorted(by_person.items()))
    return result


def _label_key(label: str) -> tuple[str, int]:
    match = LABEL.fullmatch(label)
    return (match.group(1), int(match.group(2))) if match else (label, 0)
