"""Why a new note waits for a person, and what a reflection drops of its sources.

Under the ``flagged`` mode a reflection waits when its grounding is below the threshold
(``MEMDESK_GROUNDING_THRESHOLD``), when it drops what a high-priority source held (its
numbers, names, pseudonyms), when it drops a date its sources held, or when a
personal-data finding in its sources awaits review; an observation the Observer writes
waits when its grounding is below the threshold. Under ``reflections`` every new
reflection waits. The reasons are words a reviewer reads, kept on the note.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

from memory.approval.policy import FLAGGED, REFLECTIONS
from memory.grounding import dates_in, key_terms_missing
from memory.models import Priority, is_weakly_grounded

DROPPED_SHOWN = 6  # terms named per reason; the review page shows the sources whole


@dataclass(frozen=True)
class Source:
    """A source observation as the checks read it."""

    id: str
    text: str
    priority: str
    referenced_at: datetime | None


@dataclass(frozen=True)
class Drops:
    """What a reflection drops of its sources."""

    # Terms of high-priority sources the reflection does not hold, by source id.
    high_priority: dict[str, list[str]]
    # Dates the sources wrote out or were about that the reflection does not hold.
    dates: list[str]

    @property
    def any(self) -> bool:
        return bool(self.high_priority or self.dates)


def _holds_date(text: str, referenced_at: datetime | None, day: str) -> bool:
    return day.casefold() in text.casefold() or (
        referenced_at is not None and referenced_at.date().isoformat() == day
    )


def what_it_drops(text: str, referenced_at: datetime | None, sources: Sequence[Source]) -> Drops:
    high = {}
    for source in sources:
        if source.priority == Priority.HIGH:
            missing = key_terms_missing(text, source.text)
            if missing:
                high[source.id] = missing
    dates: list[str] = []
    for source in sources:
        written = dates_in(source.text)
        if source.referenced_at is not None:
            written.append(source.referenced_at.date().isoformat())
        for day in written:
            if not _holds_date(text, referenced_at, day) and day not in dates:
                dates.append(day)
    return Drops(high, dates)


def _named(terms: list[str]) -> str:
    shown = ", ".join(terms[:DROPPED_SHOWN])
    return shown + (f" and {len(terms) - DROPPED_SHOWN} more" if len(terms) > DROPPED_SHOWN else "")


def _weakly_grounded(grounding: float | None, of: str) -> str:
    return f"Only {round((grounding or 0) * 100)}% of its names, numbers and words are in {of}."


def observation_waits_for(modes: Collection[str], *, grounding: float | None) -> list[str]:
    """Why a new observation the Observer wrote waits, in words; [] when it is served."""
    if FLAGGED in modes and is_weakly_grounded(grounding):
        return [_weakly_grounded(grounding, "the messages it was written from")]
    return []


def waits_for(
    modes: Collection[str],
    *,
    text: str,
    referenced_at: datetime | None,
    grounding: float | None,
    sources: Sequence[Source],
    pending_review: bool,
) -> list[str]:
    """Why a new reflection waits, in words; [] when it is served at once."""
    if not modes:
        return []
    reasons = []
    if REFLECTIONS in modes:
        reasons.append("Every new reflection waits for approval here.")
    if FLAGGED in modes:
        if is_weakly_grounded(grounding):
            reasons.append(_weakly_grounded(grounding, "its sources"))
        drops = what_it_drops(text, referenced_at, sources)
        dropped_high = [t for terms in drops.high_priority.values() for t in terms]
        if dropped_high:
            reasons.append(f"It drops what a high-priority source held: {_named(dropped_high)}.")
        if drops.dates:
            reasons.append(f"It drops a date its sources held: {_named(drops.dates)}.")
        if pending_review:
            reasons.append("A personal-data finding in its sources awaits review.")
    return reasons
