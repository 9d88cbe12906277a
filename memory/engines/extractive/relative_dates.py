"""Dates in a note: relative dates are resolved against the message time
(``memory/engines/dates.py``) and written out ("yesterday" becomes "on Apr 27"), since a
note is read days later, when "yesterday" means something else."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memory.engines.base import SourceMessage
from memory.engines.dates import DateMention, find_dates
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
_ENDS_WITH_PREPOSITION = re.compile(
    r"\b(?:on|by|until|till|before|after|since|from|for|at|of|during|through|to)\s*$", re.I
)


def absolute_dates(sentence: Sentence, message: SourceMessage) -> tuple[str, datetime | None]:
    """The sentence with relative dates made absolute, and the first date it names.

    A note is read days later, when "yesterday" means something else: "yesterday" becomes
    "on Apr 27", "next week" "the week of May 4". Words for the message's own day
    ("today") are dropped where the sentence reads the same without them; the observation
    is dated that day anyway."""
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
        phrase = _absolute_phrase(mention, message, before)
        text = before + phrase + text[mention.end :]
    return " ".join(text.split()).replace(" ,", ",").replace(" .", "."), mentions[0].value


def _absolute_phrase(mention: DateMention, message: SourceMessage, before: str) -> str:
    day = mention.value.date()
    label = f"{day:%b} {day.day}"
    unit = _PERIOD_UNIT.search(mention.text)
    if unit and unit.group(0).lower() == "year":
        return f"in {day.year}"
    if unit and unit.group(0).lower() == "month":
        return f"in {day:%B}"
    if unit:
        return f"the {unit.group(0).lower()} of {label}"
    if not before.strip():
        return label  # "Tomorrow is my birthday" -> "Apr 28 is my birthday"
    if day == message.created_at.date():
        return ""
    if _ENDS_WITH_PREPOSITION.search(before):
        return label  # "by tomorrow" -> "by Apr 28", not "by on Apr 28"
    if mention.text.lower().startswith("within"):
        return f"by {label}"  # a deadline: "within 5 business days" -> "by Feb 17"
    return f"on {label}"
