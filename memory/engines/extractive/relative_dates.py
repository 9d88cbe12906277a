"""Dates in a note: relative dates are resolved against the message time
(``memory/engines/dates.py``) and written out ("yesterday" becomes "on Apr 27"), since a
note is read days later, when "yesterday" means something else."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from memory.engines.base import SourceMessage
from memory.engines.dates import MONTH_PATTERN, DateMention, find_dates
from memory.engines.extractive.vocabulary import Sentence, wordset

DATE_WORDS = wordset(
    "today tonight tomorrow yesterday ago next last morning afternoon evening week weekend "
    "month year monday tuesday wednesday thursday friday saturday sunday jan feb mar apr may "
    "jun jul aug sep sept oct nov dec january february march april june july august "
    "september october november december days weeks months years within end"
)
# Any fixed moment will do: the question is only whether a date expression resolves.
_PROBE_ANCHOR = datetime(2000, 1, 3, tzinfo=UTC)


def has_date(sentence: Sentence) -> bool:
    if DATE_WORDS.isdisjoint(sentence.words) and not sentence.has_digit:
        return False
    return bool(find_dates(sentence.text, anchor=_PROBE_ANCHOR))


_ABSOLUTE_DATE = re.compile(
    r"\d{4}|\d{1,2}/\d{1,2}|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d",
    re.IGNORECASE,
)
_PERIOD_UNIT = re.compile(r"\b(?:weekend|week|month|year)\b", re.IGNORECASE)
_ENDS_WITH_THE = re.compile(r"\bthe\s*$", re.IGNORECASE)
_ENDS_WITH_MONTH = re.compile(rf"\b{MONTH_PATTERN}\.?\s*$", re.IGNORECASE)
_PART_OF_DAY = re.compile(r"\btonight\b|\bthis\s+(morning|afternoon|evening)\b", re.IGNORECASE)
_ENDS_WITH_PREPOSITION = re.compile(
    r"\b(?:on|by|until|till|before|after|since|from|for|at|of|during|through|to)\s*$", re.I
)


def absolute_dates(sentence: Sentence, message: SourceMessage) -> tuple[str, datetime | None]:
    """The sentence with relative dates made absolute, and the first date it names.

    A note is read days later, when "yesterday" means something else: "yesterday" becomes
    "on Apr 27", "next week" "the week of May 4". Words for the message's own day
    ("today") are dropped where the sentence reads the same without them; the observation
    is dated that day anyway ("tonight", "this morning": "that night", "that morning").
    The term of a rule stays as said ("returns are accepted within 30 days"): no date
    stands for it."""
    if DATE_WORDS.isdisjoint(sentence.words) and not sentence.has_digit:
        return sentence.text, None
    mentions = find_dates(sentence.text, anchor=message.created_at)
    if not mentions:
        return sentence.text, None
    text = sentence.text
    for mention in reversed(mentions):
        if _ABSOLUTE_DATE.search(mention.text):
            continue
        before = text[: mention.start]
        if _a_rule(mention, before):
            continue
        phrase = _absolute_phrase(mention, message, before)
        text = before + phrase + text[mention.end :]
    return " ".join(text.split()).replace(" ,", ",").replace(" .", "."), mentions[0].value


# What makes "within 30 days" a deadline of this conversation rather than the term of a
# rule: a future or a modal ("will", "'ll", "must"), or the person it applies to ("you",
# "your", "I", "my", "we'll").
_NOT_A_RULE = re.compile(
    r"\b(?:will|won't|shall|gonna|going\s+to|would|should|must|need\s+to|have\s+to|has\s+to|"
    r"please|you|your|i|my|me)\b|'ll\b|'d\b",
    re.IGNORECASE,
)
_CLAUSE_START = re.compile(r"[;:.!?]|\b(?:but|and|so|if|when|because)\b", re.IGNORECASE)


def _a_rule(mention: DateMention, before: str) -> bool:
    """Whether "within ..." is the term of a rule, which no date stands for: a clause in
    the present about no one in particular ("returns are accepted within 30 days", "we
    ship within 2 days"), not a deadline or a promise ("I'll refund it within 5 days",
    "you must return it within 14 days")."""
    if not mention.text.lower().startswith("within"):
        return False
    starts = [m.end() for m in _CLAUSE_START.finditer(before)]
    clause = before[starts[-1] :] if starts else before
    return bool(clause.strip()) and not _NOT_A_RULE.search(clause)


def _year_or_month_phrase(unit: str, day: date, before: str, said_on: date) -> str:
    """ "last month" as the words before it let it be said: "in January", "from January"
    (after a preposition), "March 2025" ("in March last year"); "for the last month" is
    the month up to the day it was said: "for the month before Feb 10" ("over the next
    year": "the year after Feb 10")."""
    named = f"{day:%B}" if unit == "month" else str(day.year)
    if _ENDS_WITH_THE.search(before):
        side = "after" if day > said_on else "before"  # "over the next year"
        return f"{unit} {side} {said_on:%b} {said_on.day}"
    if unit == "year" and _ENDS_WITH_MONTH.search(before):
        return named
    return named if _ENDS_WITH_PREPOSITION.search(before) else f"in {named}"


def _absolute_phrase(mention: DateMention, message: SourceMessage, before: str) -> str:
    day, said_on = mention.value.date(), message.created_at.date()
    label = f"{day:%b} {day.day}"
    found = _PERIOD_UNIT.search(mention.text)
    unit = found.group(0).lower() if found else None
    if unit in ("year", "month"):
        return _year_or_month_phrase(unit, day, before, said_on)
    if unit:
        # "from the last week" -> "from the week of Oct 23", not "from the the week of"
        article = "" if _ENDS_WITH_THE.search(before) else "the "
        return f"{article}{unit} of {label}"
    if not before.strip():
        return label  # "Tomorrow is my birthday" -> "Apr 28 is my birthday"
    if day == said_on:
        # The note is dated that day; a part of it is still said ("I have a flight home
        # tonight": "... that night", not "... a flight home").
        part = _PART_OF_DAY.search(mention.text)
        return "" if part is None else f"that {part.group(1) or 'night'}"
    if _ENDS_WITH_PREPOSITION.search(before):
        return label  # "by tomorrow" -> "by Apr 28", not "by on Apr 28"
    if mention.text.lower().startswith("within"):
        return f"by {label}"  # a deadline: "within 5 business days" -> "by Feb 17"
    return f"on {label}"
