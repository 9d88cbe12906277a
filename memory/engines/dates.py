"""Resolve the day a date expression refers to, against the time the message was sent.

"next Tuesday" in a message sent on Tuesday 2026-02-10 is 2026-02-17; "3 days ago" in a
message sent on 2026-03-02 is 2026-02-27. The extractive engine stores the result as an
observation's ``referenced_at``.

Library choice: python-dateutil (Celery depends on it too) does the calendar
arithmetic (``relativedelta`` clamps "a month after January 31" to the end of February)
and parses ISO 8601 timestamps (``isoparse``). The expressions themselves are found by
one compiled regular expression. ``dateparser`` was measured and rejected: about 1 ms per
``parse`` and 3 ms per ``search_dates`` on one sentence, i.e. tens of milliseconds per
1,000 tokens of chat, against a budget of 5 ms per 1,000 tokens for the whole engine;
its import alone takes 200 ms and it wants a newer dateutil than Celery pins.

Conventions (day precision unless the text gives a clock time):
- Results are midnight of the resolved day in the message's time zone (UTC if the
  message time is naive). ISO timestamps with a time keep it, converted to that zone.
- "next Tuesday" is the first Tuesday strictly after the message day, "last Friday" the
  last Friday strictly before it. A bare weekday ("on Tuesday") looks back when the
  sentence is in the past tense, otherwise forward (today included). A weekday that means
  any such day ("every Tuesday", "or a Tuesday", "every Monday and Friday") or one
  counted from something else ("the Sunday before") is no date.
- A month and day without a year ("March 3") takes the year that puts it on the side of
  the message the tense points to, or the nearest one when the tense says nothing.
- "next week" / "last week" / "next month" / "next year" move the message day by one unit;
  weekends are the Saturday of the current, next or previous Monday-based week; "end of
  the month" is its last day, "end of the week" its Friday.
- "in 3 days", "3 days ago", "within 5 business days" (weekends skipped) count from the
  message day; "in 2 hours" counts from the message time and keeps the time. "after 3
  days" is a day only in a sentence about the future ("I'll call back after 3 days"):
  "codes expire after 7 days" states a rule.
- Slashed dates without a month name are accepted only when unambiguous: one part above
  12 ("13/04", "04/13") or both parts equal. Without a year they also need a preposition
  ("on 13/04"), so "24/7" and "3/4 cup" are not dates.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, tzinfo

from dateutil.parser import isoparse
from dateutil.relativedelta import relativedelta

__all__ = ["DateMention", "find_dates", "resolve_date", "sentence_tense"]

MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4,
    "april": 4, "may": 5, "jun": 6, "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8,
    "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10, "nov": 11,
    "november": 11, "dec": 12, "december": 12,
}  # fmt: skip
WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5,
    "sunday": 6,
}  # fmt: skip
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "fifteen": 15, "twenty": 20, "thirty": 30, "a couple of": 2, "couple of": 2,
}  # fmt: skip

# A month's name or its abbreviation, in lowercase (the patterns here read lowercased
# text; others compile it case-insensitively).
MONTH_PATTERN = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
    r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_AMOUNT = (
    r"(?:\d{1,3}|a\ couple\ of|couple\ of|an|a|one|two|three|four|five|six|seven|eight|"
    r"nine|ten|eleven|twelve|fifteen|twenty|thirty)"
)
_UNIT = r"(?:minute|hour|day|week|fortnight|month|year)s?"
_ORD = r"(?:st|nd|rd|th)?"
_ISO = (
    r"\b\d{4}-\d{1,2}-\d{1,2}"
    r"(?:[t\ ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?\b"
)
_SLASHED = (
    r"(?:\b(?P<sl_prep>on|by|until|till|before|after|from|since|due)\s+)?"
    r"\b(?P<sl_a>\d{1,2})(?P<sl_sep>[/.])(?P<sl_b>\d{1,2})"
    r"(?:(?P=sl_sep)(?P<sl_year>\d{4}|\d{2}))?\b(?![/.]\d)"
)

# "the 20th" alone is a day of the month only after a preposition of time ("before the
# 20th", "issued on the 3rd"), not "the 3rd time", "the 20th century". Lookbehinds, so
# the preposition stays in the sentence ("before Feb 20").
_TIME_PREPOSITIONS = ("on", "by", "until", "till", "before", "after", "from", "since")
_AFTER_A_PREPOSITION = "(?:" + "|".join(rf"(?<=\b{w}\s)" for w in _TIME_PREPOSITIONS) + ")"

# One alternative per kind of expression; the outer group's name says which handler
# resolves it. Longer phrases come first so "the day after tomorrow" wins over "tomorrow".
_PATTERN = re.compile(
    rf"""
    (?P<iso>{_ISO})
    |(?P<slashed>{_SLASHED})
    |(?P<day_month>\b(?:the\s+)?(?P<dm_day>\d{{1,2}}){_ORD}(?:\s+of)?\s+(?P<dm_month>{MONTH_PATTERN})\b\.?(?:,?\s+(?P<dm_year>\d{{4}})\b)?)
    |(?P<month_day>\b(?P<md_month>{MONTH_PATTERN})\.?\s+(?:the\s+)?(?P<md_day>\d{{1,2}}){_ORD}\b(?!:)(?:,?\s+(?P<md_year>\d{{4}})\b)?)
    |(?P<month_year>\b(?P<my_month>{MONTH_PATTERN})\s+(?P<my_year>\d{{4}})\b)
    |(?P<day_of_month>{_AFTER_A_PREPOSITION}the\s+(?P<dom_day>\d{{1,2}})(?:st|nd|rd|th)\b(?!\s+of\b))
    |(?P<two_days>\bthe\s+day\s+(?P<td_dir>after\s+tomorrow|before\s+yesterday)\b)
    |(?P<day_word>\b(?:today|tonight|tomorrow|yesterday|last\s+night|this\s+(?:morning|afternoon|evening))\b)
    |(?P<end_of>\b(?:the\s+)?end\s+of\s+(?:the\s+|this\s+)?(?P<eo_unit>week|month|year)\b)
    |(?P<ago>\b(?P<ago_n>{_AMOUNT})\s+(?P<ago_unit>{_UNIT})\s+(?P<ago_dir>ago|from\s+now|later)\b)
    |(?P<within>\b(?P<wi_kind>in|within|after)\s+(?:the\s+next\s+)?(?P<wi_n>{_AMOUNT})\s+(?P<wi_business>(?:business|working)\s+)?(?P<wi_unit>{_UNIT})\b)
    |(?P<weekday>\b(?:(?P<wd_mod>next|last|this|coming|past|previous|on)\s+)?(?P<wd_name>{_WEEKDAY})\b)
    |(?P<period>\b(?P<pe_mod>next|last|this|coming|past|previous)\s+(?P<pe_unit>week|weekend|month|year)\b)
    """,
    re.VERBOSE,  # matched against lowercased text: IGNORECASE doubles the cost
)

# Cheap tense cues. They only steer ambiguous expressions (a bare weekday, a day and month
# without a year); a wrong guess moves the date by a week or a year, never further.
_PAST_CUE = re.compile(
    r"\b(?:was|were|went|did|had|got|came|saw|made|bought|paid|met|told|said|took|gave|"
    r"sent|ran|ate|felt|left|found|spent|began|wrote|heard|knew|thought|\w{3,}ed|ago|"
    r"yesterday|last)\b"
)
_FUTURE_CUE = re.compile(
    r"\b(?:will|shall|gonna|going\s+to|plan|plans|planning|next|tomorrow|upcoming|"
    r"coming|until|by|due|\w+'ll)\b"
)
_CLAUSE_BOUNDARY = re.compile(r"[,;:]|\b(?:and|but)\b", re.IGNORECASE)
_LEADING_PREPOSITION = re.compile(r"^(?:on|by|at|until|till|before|after|from|since|due)\s+", re.I)


@dataclass(frozen=True)
class DateMention:
    text: str
    start: int
    end: int
    value: datetime


def sentence_tense(text: str) -> str | None:
    """'past', 'future', or None when the sentence gives no cue or both."""
    past = _PAST_CUE.search(text) is not None
    future = _FUTURE_CUE.search(text) is not None
    if past == future:
        return None
    return "past" if past else "future"


def find_dates(text: str, *, anchor: datetime) -> list[DateMention]:
    """Every date expression in ``text`` that resolves, in order of appearance."""
    lower = _lowered(text)
    mentions = []
    any_such_day_ended = -1  # where the last weekday meaning any such day ended
    for match in _PATTERN.finditer(lower):
        if _is_the_verb_may(match, text):
            continue
        if _any_such_day(match, lower, any_such_day_ended):
            any_such_day_ended = match.end()
            continue
        tense = sentence_tense(_clause_around(lower, match.start(), match.end()))
        value = _resolve_match(match, anchor=anchor, tense=tense)
        if value is not None:
            start, end = match.span()
            mentions.append(DateMention(text[start:end], start, end, value))
    return mentions


def resolve_date(expression: str, *, anchor: datetime, tense: str | None = None) -> datetime | None:
    """The moment ``expression`` (a date expression and nothing else) refers to."""
    whole = expression.strip().strip(".,;:!?")
    for candidate in (whole, _LEADING_PREPOSITION.sub("", whole)):
        match = _PATTERN.fullmatch(_lowered(candidate))
        if match is not None:
            if _is_the_verb_may(match, candidate):
                return None
            return _resolve_match(match, anchor=anchor, tense=tense)
    return None


def _lowered(text: str) -> str:
    """``text`` in lowercase with every character kept in place, so spans still match."""
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


def _is_the_verb_may(match: re.Match[str], original: str) -> bool:
    """ "you may 2 ..." is not May 2: the month must be capitalised."""
    for group in ("dm_month", "md_month", "my_month"):
        if match.group(group) == "may":
            start, end = match.span(group)
            return original[start:end] != "May"
    return False


# A bare weekday after one of these means any such day, or one the message does not
# date, not a day counted from the message: "every Tuesday", "or a Tuesday", "on a Sunday
# morning", "A Sunday on La Grande Jatte", "the Sunday before" (before what?).
_ANY_SUCH_DAY = re.compile(r"\b(?:a|an|the|every|each|any|another|some|one|no)\s+$")
# A weekday listed after one of those means the same: "every Wednesday and Saturday",
# "every Monday, Wednesday, Friday", "the Monday Tuesday Wednesday".
_LISTED = re.compile(r"\s*(?:,\s*(?:(?:and|or)\s+)?|(?:and|or)\s+|)$")


def _any_such_day(match: re.Match[str], lower: str, any_such_day_ended: int) -> bool:
    """Whether ``match`` is a bare weekday that names no one day (see ``_ANY_SUCH_DAY``)."""
    if match.lastgroup != "weekday" or match.group("wd_mod"):
        return False
    # Searched from a few characters back, in the whole text so that \b sees the word
    # before: "another " is the longest it can be.
    if _ANY_SUCH_DAY.search(lower, max(0, match.start() - 12), match.start()):
        return True
    between = lower[any_such_day_ended : match.start()]
    return any_such_day_ended >= 0 and _LISTED.fullmatch(between) is not None


def _clause_around(text: str, start: int, end: int) -> str:
    """The clause holding a mention: "went there on Friday, and will call next Tuesday"
    has one tense per clause, not one per sentence."""
    left = max((m.end() for m in _CLAUSE_BOUNDARY.finditer(text, 0, start)), default=0)
    right_match = _CLAUSE_BOUNDARY.search(text, end)
    right = right_match.start() if right_match else len(text)
    return text[left:right]


def _zone(anchor: datetime) -> tzinfo:
    return anchor.tzinfo or UTC


def _aware(anchor: datetime) -> datetime:
    return anchor if anchor.tzinfo else anchor.replace(tzinfo=UTC)


def _midnight(day: date, zone: tzinfo) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=zone)


def _resolve_match(match: re.Match[str], *, anchor: datetime, tense: str | None) -> datetime | None:
    kind = match.lastgroup
    handler = _HANDLERS.get(kind or "")
    if handler is None:
        return None
    anchor = _aware(anchor)
    try:
        day_or_moment = handler(match, anchor, tense)
        if day_or_moment is None:
            return None
        if isinstance(day_or_moment, datetime):
            return day_or_moment
        return _midnight(day_or_moment, _zone(anchor))
    except OverflowError:
        # "tomorrow" said on 9999-12-31, "in 5000 years": a date the calendar cannot
        # hold is no date at all, not a reason to fail the whole run.
        return None


def _amount(text: str) -> int | None:
    words = " ".join(text.lower().split())
    if words.isdigit():
        return int(words)
    return NUMBER_WORDS.get(words)


def _safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _as_the_tense_says(candidates: list[date], today: date, tense: str | None) -> date | None:
    """Of the days an expression may mean, the latest one not after today (past), the
    earliest one not before it (future), or the nearest (no tense)."""
    if tense == "past":
        return max((d for d in candidates if d <= today), default=None)
    if tense == "future":
        return min((d for d in candidates if d >= today), default=None)
    return min(candidates, key=lambda d: (abs((d - today).days), d), default=None)


def _year_for(month: int, day: int, today: date, tense: str | None) -> date | None:
    """The occurrence of month/day that the tense points to, or the nearest one."""
    candidates = [
        d for y in (today.year - 1, today.year, today.year + 1) if (d := _safe_date(y, month, day))
    ]
    return _as_the_tense_says(candidates, today, tense)


def _iso(match: re.Match[str], anchor: datetime, tense: str | None) -> date | datetime | None:
    text = match.group("iso")
    if len(text) <= 10:
        year, month, day = (int(part) for part in text.split("-"))
        return _safe_date(year, month, day)
    try:
        parsed = isoparse(text.upper())  # matched in lowercase; isoparse wants "T" and "Z"
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=_zone(anchor))
    return parsed.astimezone(_zone(anchor))


def _slashed(match: re.Match[str], anchor: datetime, tense: str | None) -> date | None:
    first, second = int(match.group("sl_a")), int(match.group("sl_b"))
    year_text = match.group("sl_year")
    if year_text is None and (match.group("sl_prep") is None or match.group("sl_sep") == "."):
        return None  # "24/7", "3/4 cup", "3.5": a number, not a date
    if first > 12 and second <= 12:
        day, month = first, second
    elif second > 12 and first <= 12:
        day, month = second, first
    elif first == second:
        day = month = first
    else:
        return None  # 03/04 is March 4 in the US and 3 April elsewhere
    if year_text is None:
        return _year_for(month, day, anchor.date(), tense)
    year = int(year_text)
    return _safe_date(year + 2000 if year < 100 else year, month, day)


def _month_name_date(
    month_text: str, day_text: str, year_text: str | None, today: date, tense: str | None
) -> date | None:
    month = MONTHS[month_text.lower().rstrip(".")]
    day = int(day_text)
    if year_text:
        return _safe_date(int(year_text), month, day)
    return _year_for(month, day, today, tense)


def _day_month(match: re.Match[str], anchor: datetime, tense: str | None) -> date | None:
    return _month_name_date(
        match.group("dm_month"), match.group("dm_day"), match.group("dm_year"), anchor.date(), tense
    )


def _month_day(match: re.Match[str], anchor: datetime, tense: str | None) -> date | None:
    return _month_name_date(
        match.group("md_month"), match.group("md_day"), match.group("md_year"), anchor.date(), tense
    )


def _month_year(match: re.Match[str], anchor: datetime, tense: str | None) -> date | None:
    return _month_name_date(
        match.group("my_month"), "1", match.group("my_year"), anchor.date(), tense
    )


def _day_of_month(match: re.Match[str], anchor: datetime, tense: str | None) -> date | None:
    """ "the 20th": that day of this month, the last or the next, as the tense says, or
    the nearest."""
    today, day = anchor.date(), int(match.group("dom_day"))
    months = [today + relativedelta(day=1, months=step) for step in (-1, 0, 1)]
    candidates = [d for m in months if (d := _safe_date(m.year, m.month, day))]
    return _as_the_tense_says(candidates, today, tense)


def _two_days(match: re.Match[str], anchor: datetime, tense: str | None) -> date:
    step = 2 if match.group("td_dir").lower().startswith("after") else -2
    return anchor.date() + timedelta(days=step)


def _day_word(match: re.Match[str], anchor: datetime, tense: str | None) -> date:
    word = match.group("day_word").lower()
    if word.startswith("tomorrow"):
        return anchor.date() + timedelta(days=1)
    if word.startswith(("yesterday", "last")):
        return anchor.date() - timedelta(days=1)
    return anchor.date()


def _end_of(match: re.Match[str], anchor: datetime, tense: str | None) -> date:
    today = anchor.date()
    unit = match.group("eo_unit").lower()
    if unit == "week":
        return max(today, today + timedelta(days=4 - today.weekday()))  # Friday, or today
    if unit == "month":
        return today + relativedelta(day=31)  # relativedelta clamps to the last day
    return date(today.year, 12, 31)


def _shift(moment: datetime, amount: int, unit: str) -> datetime | date:
    unit = unit.lower().rstrip("s")
    if unit in ("minute", "hour"):
        return moment + timedelta(**{f"{unit}s": amount})
    day = moment.date()
    if unit == "fortnight":
        return day + timedelta(days=14 * amount)
    if unit == "day":
        return day + timedelta(days=amount)
    if unit == "week":
        return day + timedelta(weeks=amount)
    if unit == "month":
        return day + relativedelta(months=amount)
    return day + relativedelta(years=amount)


def _add_business_days(day: date, count: int) -> date:
    step = 1 if count >= 0 else -1
    remaining = abs(count)
    while remaining:
        day += timedelta(days=step)
        if day.weekday() < 5:
            remaining -= 1
    return day


def _ago(match: re.Match[str], anchor: datetime, tense: str | None) -> date | datetime | None:
    amount = _amount(match.group("ago_n"))
    if amount is None:
        return None
    direction = -1 if match.group("ago_dir").lower() == "ago" else 1
    return _shift(anchor, direction * amount, match.group("ago_unit"))


def _within(match: re.Match[str], anchor: datetime, tense: str | None) -> date | datetime | None:
    amount = _amount(match.group("wi_n"))
    if amount is None:
        return None
    if match.group("wi_kind").lower() == "after" and tense != "future":
        return None  # "codes expire after 7 days" is a rule, not a day
    unit = match.group("wi_unit").lower().rstrip("s")
    if match.group("wi_business"):
        if unit != "day":
            return None
        return _add_business_days(anchor.date(), amount)
    return _shift(anchor, amount, unit)


def _weekday(match: re.Match[str], anchor: datetime, tense: str | None) -> date:
    target = WEEKDAYS[match.group("wd_name").lower()]
    modifier = (match.group("wd_mod") or "").lower()
    today = anchor.date()
    ahead = (target - today.weekday()) % 7
    behind = (today.weekday() - target) % 7
    if modifier == "next":
        return today + timedelta(days=ahead or 7)
    if modifier in ("last", "past", "previous") or (modifier != "this" and tense == "past"):
        return today - timedelta(days=behind or 7)
    return today + timedelta(days=ahead)


def _period(match: re.Match[str], anchor: datetime, tense: str | None) -> date:
    modifier = match.group("pe_mod").lower()
    unit = match.group("pe_unit").lower()
    step = {"next": 1, "coming": 1, "last": -1, "past": -1, "previous": -1}.get(modifier, 0)
    today = anchor.date()
    if unit == "weekend":
        this_saturday = today + timedelta(days=5 - today.weekday())
        return this_saturday + timedelta(weeks=step if modifier != "coming" else 0)
    if unit == "week":
        return today + timedelta(weeks=step)
    if unit == "month":
        return today + relativedelta(months=step)
    return today + relativedelta(years=step)


_HANDLERS = {
    "iso": _iso,
    "slashed": _slashed,
    "day_month": _day_month,
    "month_day": _month_day,
    "month_year": _month_year,
    "day_of_month": _day_of_month,
    "two_days": _two_days,
    "day_word": _day_word,
    "end_of": _end_of,
    "ago": _ago,
    "within": _within,
    "weekday": _weekday,
    "period": _period,
}
