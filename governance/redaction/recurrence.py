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
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from presidio_analyzer import AnalysisExplanation, RecognizerResult
from spacy.lang.en.stop_words import STOP_WORDS

from governance.redaction.pseudonyms import normalise

# Types whose values are names of words: the ones a tagger finds by context, and so
# misses by context. Numbers, addresses and handles are found by their shape everywhere.
RECURRING_TYPES = ("PERSON", "LOCATION")
RECURRENCE = "Recurrence"
KNOWN_PSEUDONYM = "KnownPseudonym"
# A value the workspace holds a pseudonym for is as certain as a name after a cue.
KNOWN_SCORE = 0.85
# A capitalised word, not in capitals: "Maria", "O'Brien", "Jean-Luc", "José"; a
# possessive is not part of it ("Maria's").
_UPPER = "A-ZÀ-ÖØ-Þ"
_LOWER = "a-zß-öø-ÿ"
_WORD = rf"[{_UPPER}][{_LOWER}]+(?:-[{_UPPER}]?[{_LOWER}]+|['’](?!s\b)[{_UPPER}]?[{_LOWER}]+)*"
_RUN = re.compile(rf"(?<![\w'’-]){_WORD}(?:[ ]{_WORD}){{0,3}}(?![\w-])")
_SPACE = re.compile(r"\S+")
MAX_WORDS = 4


class KnownValues(Protocol):
    """What the workspace's pseudonym mapping answers: which (entity type, value) pairs
    it holds a pseudonym for (``WorkspacePseudonyms.held``)."""

    def held(self, candidates: Sequence[tuple[str, str]]) -> set[tuple[str, str]]: ...


Candidate = tuple[int, int, str]  # start, end, value


def candidates(text: str) -> list[Candidate]:
    """Every run of one to four capitalised words in ``text`` and each shorter run
    within it, longest first; not a word of the grammar alone ("The", "My"), which names
    no one however it was once tagged."""
    found: list[Candidate] = []
    for run in _RUN.finditer(text):
        words = [(run.start() + m.start(), run.start() + m.end()) for m in _SPACE.finditer(run[0])]
        for size in range(min(len(words), MAX_WORDS), 0, -1):
            for first in range(len(words) - size + 1):
                start, end = words[first][0], words[first + size - 1][1]
                if size == 1 and text[start:end].lower() in STOP_WORDS:
                    continue
                found.append((start, end, text[start:end]))
    found.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    return found


def _reads_as_name(tokens: Any, start: int, end: int) -> bool:
    """A single word that is also a word of the lexicon must be a proper noun to the
    tagger ("Will" in "Will you?" is not); one that is no word ("Emily", which the small
    pipeline tags as an adverb in "Now Emily, repeat after me") is a name as written. No
    word may be tagged as a date or a time ("May", "Winter")."""
    if tokens is None:
        return True
    inside = [t for t in tokens if start <= t.idx < end]
    if any(t.ent_type_ in ("DATE", "TIME") for t in inside):
        return False
    if len(inside) != 1 or inside[0].pos_ == "PROPN":
        return True
    from governance.redaction.name_recognizers import in_lexicon, lexicon

    return not in_lexicon(inside[0], lexicon())


def _result(entity_type: str, start: int, end: int, score: float, name: str) -> RecognizerResult:
    return RecognizerResult(
        entity_type,
        start,
        end,
        score,
        analysis_explanation=AnalysisExplanation(recognizer=name, original_score=score),
        recognition_metadata={RecognizerResult.RECOGNIZER_NAME_KEY: name},
    )


def recurrences(
    text: str,
    results: Sequence[RecognizerResult],
    *,
    found: Sequence[Candidate],
    tokens: Any = None,
    held: Mapping[str, str] | None = None,
) -> list[RecognizerResult]:
    """New results at the other places of the names in ``results`` (the same words,
    written the same way), and at the places of names the workspace holds (``held``:
    normalised value -> entity type), among ``found`` (``candidates(text)``), none
    overlapping another but on the very span of a less certain one. ``tokens`` (spaCy's)
    keep a capitalised word at a sentence's start from being taken for a name it spells
    ("Will", "Hope"). The caller puts them through the same context rules as the rest."""
    seen: dict[str, RecognizerResult] = {}
    for result in results:
        if result.entity_type in RECURRING_TYPES:
            value = " ".join(text[result.start : result.end].split())
            if value not in seen or result.score > seen[value].score:
                seen[value] = result
    held = held or {}
    if not seen and not held:
        return []
    taken = [(r.start, r.end) for r in results]
    scored = {(r.start, r.end): r.score for r in results if r.entity_type in RECURRING_TYPES}
    added: list[RecognizerResult] = []
    for start, end, value in found:
        origin = seen.get(value)
        known = held.get(normalise("PERSON", value))
        if known is not None and (origin is None or origin.score < KNOWN_SCORE):
            new = _result(known, start, end, KNOWN_SCORE, KNOWN_PSEUDONYM)
        elif origin is not None:
            new = _result(origin.entity_type, start, end, origin.score, RECURRENCE)
        else:
            continue
        # A name a recognizer was unsure of ("Emily" alone, 0.6: the review band) is found
        # for certain where the mapping knows it: added on the same span, it acts, as the
        # most certain of overlapping results does.
        surer = new.score > scored.get((start, end), 1.0)
        if not surer and any(start < e and s < end for s, e in taken):
            continue
        if _reads_as_name(tokens, start, end):
            added.append(new)
            taken.append((start, end))
    return added
