"""A name found once is found wherever it recurs.

- In the text: a person's or a place's name detected at one place is detected at its
  other places in the same text too. spaCy's labels depend on the sentence around a word
  ("Maria Lopez called" is found where "Later Maria Lopez wrote again" may not be), and
  a value left in one place is a value not redacted.
- In the workspace: a name the workspace already holds a pseudonym for is found again
  wherever it recurs, because the mapping knows it. The candidates are the text's runs
  of capitalised words, asked about by their keyed digests (``KnownValues``), so no
  stored value is read to find them.

Imported by ``governance.redaction.presidio`` when it detects (``detect``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from governance.redaction.presidio import Detection, PolicySpec
from governance.redaction.pseudonyms import normalise

# Types whose values are names of words: the ones a tagger finds by context, and so
# misses by context. Numbers, addresses and handles are found by their shape everywhere.
RECURRING_TYPES = ("PERSON", "LOCATION")
RECURRENCE = "Recurrence"
KNOWN_PSEUDONYM = "KnownPseudonym"
# A value the workspace holds a pseudonym for is as certain as a name after a cue.
KNOWN_SCORE = 0.85
# A capitalised word: "Maria", "O'Brien", "Jean-Luc", "José"; a possessive is not part
# of it ("Maria's").
_LETTER = r"[^\W\d_]"
_WORD = rf"[A-ZÀ-ÖØ-Þ]{_LETTER}*(?:-[A-ZÀ-ÖØ-Þ]?{_LETTER}+|['’](?!s\b)[A-ZÀ-ÖØ-Þ]?{_LETTER}+)*"
_RUN = re.compile(rf"(?<![\w'’-]){_WORD}(?:[ ]{_WORD}){{0,3}}(?![\w-])")
MAX_WORDS = 4


class KnownValues(Protocol):
    """What the workspace's pseudonym mapping answers: which (entity type, value) pairs
    it holds a pseudonym for (``WorkspacePseudonyms.held``)."""

    def held(self, candidates: Sequence[tuple[str, str]]) -> set[tuple[str, str]]: ...


Candidate = tuple[int, int, str]  # start, end, value


def candidates(text: str) -> list[Candidate]:
    """Every run of one to four capitalised words in ``text`` and each shorter run
    within it, longest first."""
    found: list[Candidate] = []
    for run in _RUN.finditer(text):
        words = [
            (m.start() + run.start(), m.end() + run.start())
            for m in re.finditer(r"\S+", run.group(0))
        ]
        for size in range(min(len(words), MAX_WORDS), 0, -1):
            for first in range(len(words) - size + 1):
                start, end = words[first][0], words[first + size - 1][1]
                found.append((start, end, text[start:end]))
    found.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    return found


def _reads_as_name(tokens: Any, start: int, end: int) -> bool:
    """A single word must be a proper noun to the tagger ("Will" in "Will you?" is not),
    and no word may be tagged as a date or a time ("May", "Winter")."""
    if tokens is None:
        return True
    inside = [t for t in tokens if start <= t.idx < end]
    if any(t.ent_type_ in ("DATE", "TIME") for t in inside):
        return False
    return len(inside) != 1 or inside[0].pos_ == "PROPN"


def recurrences(
    text: str,
    detections: Sequence[Detection],
    *,
    spec: PolicySpec,
    tokens: Any = None,
    held: set[tuple[str, str]] = frozenset(),  # type: ignore[assignment]
    found: Sequence[Candidate] | None = None,
) -> list[Detection]:
    """``detections`` with the other places of their names added, and the places of
    names the workspace holds (``held``: (entity type, value) pairs), in text order.
    ``tokens`` (spaCy's) keep a capitalised word at a sentence's start from being taken
    for a name it spells ("Will", "Hope"). ``found`` are ``candidates(text)`` when the
    caller has them."""
    analysed = set(spec.analysed_entities)
    seen: dict[str, Detection] = {}
    for detection in detections:
        if detection.entity_type in RECURRING_TYPES:
            value = normalise(detection.entity_type, text[detection.start : detection.end])
            best = seen.get(value)
            if best is None or detection.score > best.score:
                seen[value] = detection
    held_by_value = {
        normalise(entity_type, value): entity_type
        for entity_type, value in held
        if entity_type in analysed
    }
    if not seen and not held_by_value:
        return list(detections)
    taken = [(d.start, d.end) for d in detections]
    added: list[Detection] = []
    for start, end, value in candidates(text) if found is None else found:
        if any(start < e and s < end for s, e in taken):
            continue
        key = normalise("PERSON", value)
        origin = seen.get(key)
        if origin is not None and _reads_as_name(tokens, start, end):
            added.append(
                Detection(
                    entity_type=origin.entity_type,
                    start=start,
                    end=end,
                    score=origin.score,
                    recognizer=RECURRENCE,
                    operator=origin.operator,
                    status=origin.status,
                )
            )
        elif key in held_by_value and _reads_as_name(tokens, start, end):
            entity_type = held_by_value[key]
            operator = spec.operator_for(entity_type)
            status = spec.status_for(KNOWN_SCORE, operator)
            if status is None:
                continue
            added.append(
                Detection(
                    entity_type=entity_type,
                    start=start,
                    end=end,
                    score=KNOWN_SCORE,
                    recognizer=KNOWN_PSEUDONYM,
                    operator=operator,
                    status=status,
                )
            )
        else:
            continue
        taken.append((start, end))
    return sorted([*detections, *added], key=lambda d: (d.start, d.end))
