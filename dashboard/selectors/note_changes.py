"""What changed in an observation or a reflection since a person opened a form on it:
who corrected it meanwhile, why, and the difference between the version they opened and
the one there is now. Read from the note's version history."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import datetime

from dashboard.selectors.users import user_labels
from memory import selectors as memory_selectors
from memory.models import Observation, Reflection


@dataclass(frozen=True)
class Correction:
    """One correction made since: it turned ``version`` into the next one."""

    version: int
    change: str  # "edit" or "revert"
    changed_by: str  # a username, or the API key's label
    changed_at: datetime
    reason: str


@dataclass(frozen=True)
class ChangesSince:
    opened_version: int
    current_version: int
    corrections: list[Correction]
    # What the note said at the version the form was opened at; None when the history
    # has no such version (a form sent with a version the note never had).
    opened_text: str | None
    opened_priority: str | None
    current_priority: str
    # The unified diff from the opened text to the current one, without its header.
    diff_lines: list[str]


def note_changes_since(item: Observation | Reflection, *, opened_version: int) -> ChangesSince:
    """``item`` as it now stands against the version a form was opened at."""
    history = (
        memory_selectors.observation_history(observation=item)
        if isinstance(item, Observation)
        else memory_selectors.reflection_history(reflection=item)
    )
    later = [change for change in history if change.version >= opened_version]
    names = user_labels({change.changed_by for change in later})
    opened = next((change for change in history if change.version == opened_version), None)
    diff = (
        difflib.unified_diff(opened.text.splitlines(), item.text.splitlines(), lineterm="")
        if opened is not None
        else iter(())
    )
    return ChangesSince(
        opened_version=opened_version,
        current_version=item.version,
        corrections=[
            Correction(
                version=change.version,
                change=change.change,
                changed_by=names.get(change.changed_by, change.changed_by),
                changed_at=change.changed_at,
                reason=change.reason,
            )
            for change in later
        ],
        opened_text=opened.text if opened is not None else None,
        opened_priority=opened.priority if opened is not None else None,
        current_priority=item.priority,
        diff_lines=list(diff)[2:],  # drop the ---/+++ header
    )
