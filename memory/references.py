"""Ticket, case and order ids named in a note, so memory can be found by them.

"Assistant opened ticket #452; refund for order ORD-7 in 5 business days" names
ticket 452 and order ORD-7: the note gets ``ticket_id`` "452" (a ticket or a case comes
before an order, since that is what support work is filed under) and the tags
``ticket:452`` and ``order:ORD-7``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUMBER_WORD = r"(?:no\.?|number|num|nr\.?|id|#)"
_ID = r"([A-Z]{0,6}-?\d[\w-]*\d|\d+)"
_PATTERNS = (
    ("ticket", re.compile(rf"\b(?:ticket|incident)\s+{_NUMBER_WORD}?\s*[:#]?\s*{_ID}", re.I)),
    ("case", re.compile(rf"\bcase\s+{_NUMBER_WORD}?\s*[:#]?\s*{_ID}", re.I)),
    ("order", re.compile(rf"\border\s+{_NUMBER_WORD}?\s*[:#]?\s*{_ID}", re.I)),
    ("ticket", re.compile(r"\b((?:TKT|TICKET|INC)-\d+)\b")),
    ("case", re.compile(r"\b(CASE-\d+)\b")),
    ("order", re.compile(r"\b(ORD-\d+)\b")),
)
_FILED_UNDER = ("ticket", "case", "order")
MIN_DIGITS = 2  # a bare number: "order 1" is a count, not an id; "ORD-7" is an id


@dataclass(frozen=True)
class References:
    ticket_id: str
    tags: list[str]


def references_in(text: str) -> References:
    found: dict[str, list[str]] = {kind: [] for kind in _FILED_UNDER}
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(1).rstrip("-")
            is_id = not value.isdigit() or len(value) >= MIN_DIGITS
            if is_id and value not in found[kind]:
                found[kind].append(value)
    first = next((ids[0] for kind in _FILED_UNDER if (ids := found[kind])), "")
    tags = [f"{kind}:{value}" for kind in _FILED_UNDER for value in found[kind]]
    return References(ticket_id=first, tags=tags)
