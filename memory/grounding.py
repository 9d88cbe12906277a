"""How much of a note its sources support: the grounding score.

A note's claims are its names (capitalised words and redaction placeholders), its
numbers and its content words. The score is the share of those claims found in the
note's sources, names and numbers weighing twice: an invented amount or person misleads
an agent more than a paraphrased verb. A note with no claims scores 1.

Words match loosely on purpose, so that a faithful rewrite is not flagged: case, a
possessive and one common ending (-s, -es, -ed, -ing) are ignored, and longer words
match on their first five letters ("loves" is found in "I love", "arrival" in
"arrived"). Numbers match by value
("5" and "five", "1,200" and "1200"). Not claims: the words a note-taker adds to frame
a note ("User", "Assistant", "said", "asked") and dates the engine wrote out itself
("on Apr 27", "2026-02-17"), which it resolved from the message time.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

NAME_WEIGHT = 2
NUMBER_WEIGHT = 3
WORD_WEIGHT = 1
PREFIX = 5  # letters two words must share to match

_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_ENGINE_DATES = re.compile(
    rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|{_MONTH}\.? \d{{1,2}}(?:st|nd|rd|th)?(?:, \d{{4}})?"
    rf"|\d{{1,2}} {_MONTH}(?: \d{{4}})?|{_WEEKDAY})\b",
    re.IGNORECASE,
)
_TOKEN = re.compile(r"<[A-Z_]+(?:_\d+)?>|\d[\d,.]*\d|\d|[A-Za-z][A-Za-z'’-]*")


def _words(text: str) -> list[str]:
    return text.split()


_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        _words(
            """zero one two three four five six seven eight nine ten eleven twelve thirteen
            fourteen fifteen sixteen seventeen eighteen nineteen twenty"""
        )
    )
} | {"thirty": "30", "forty": "40", "fifty": "50", "hundred": "100", "thousand": "1000"}

# Words that frame a note rather than claim something, and words too common to count.
_NOT_CLAIMS = frozenset(
    _words(
        """user users assistant assistants customer tool name named called
        said says say asked asks ask told tells requested requests recommended recommends
        suggested suggests confirmed confirms explained explains replied answered
        mentioned mentions stated states noted notes reported reports also now currently
        a an the and or but if so of to in on at by for with from as into about over under
        is are was were be been being am do does did have has had having it its this that
        these those there here they them their he she him her his hers we us our you your
        i me my mine not no yes will would can could should may might must shall than then
        which who whom whose what when where why how all any each some such very just"""
    )
)


def _bare(word: str) -> str:
    """Lower case, without a possessive: "User's" is "user"."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return word.strip("'-")


def _key(word: str) -> str:
    word = _bare(word)
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:PREFIX]


def _number(token: str) -> str:
    return token.replace(",", "").rstrip(".")


def _claims(text: str) -> list[tuple[str, int]]:
    """The note's claims as (key, weight), in order."""
    claims = []
    for token in _TOKEN.findall(_ENGINE_DATES.sub(" ", text)):
        if token[0].isdigit():
            claims.append(("#" + _number(token), NUMBER_WEIGHT))
        elif token.startswith("<"):
            claims.append((token, NAME_WEIGHT))
        elif token.lower() in _NUMBER_WORDS:
            claims.append(("#" + _NUMBER_WORDS[token.lower()], NUMBER_WEIGHT))
        elif len(token) >= 3 and _bare(token) not in _NOT_CLAIMS:
            claims.append((_key(token), NAME_WEIGHT if token[0].isupper() else WORD_WEIGHT))
    return claims


def _source_keys(sources: Iterable[str]) -> set[str]:
    keys: set[str] = set()
    for text in sources:
        for token in _TOKEN.findall(text):
            if token[0].isdigit():
                keys.add("#" + _number(token))
            elif token.startswith("<"):
                keys.add(token)
            else:
                keys.add(_key(token))
                if token.lower() in _NUMBER_WORDS:
                    keys.add("#" + _NUMBER_WORDS[token.lower()])
    return keys


def grounding_score(text: str, sources: Iterable[str]) -> float:
    """The weighted share of ``text``'s claims found in ``sources``, from 0 to 1."""
    claims = _claims(text)
    total = sum(weight for _, weight in claims)
    if not total:
        return 1.0
    found_in = _source_keys(sources)
    found = sum(weight for key, weight in claims if key in found_in)
    return round(found / total, 3)


_WORD = re.compile(r"<[A-Z_]+(?:_\d+)?>|[\w’'-]+")


def key_terms_missing(text: str, source: str) -> list[str]:
    """The words of ``source`` holding a number, a pseudonym or a name (the claims that
    weigh more than a plain word) that ``text`` does not hold, as ``grounding_score``
    matches them (dates apart: ``dates_in``), as the source writes them ("ORD-88123"), in
    its order, once each: what a condensed note dropped of it."""
    held = _source_keys([text])
    missing: list[str] = []
    for word in _WORD.findall(_ENGINE_DATES.sub(" ", source)):
        shown = word.strip("'’-")
        if shown not in missing and any(
            key not in held for key, weight in _claims(word) if weight > WORD_WEIGHT
        ):
            missing.append(shown)
    return missing


def dates_in(text: str) -> list[str]:
    """The dates ``text`` writes out ("2026-12-12", "Dec 3", "Friday"), as written."""
    return [match.group(0) for match in _ENGINE_DATES.finditer(text)]
