"""Texts as the engine reads them: in pieces of bounded length, with the runs that cost
the most and can hold no personal data read as spaces.

Why. spaCy's tokenizer takes quadratic time on a long run of punctuation or emoji with
no space in it (16,000 "!" took 82 s, 16,000 emoji 94 s), and some recognizers' patterns
grow with the length of the line they search. One message of 20 KB of "!" held a worker
for 81 s; one of 2 MB of emoji never finished. Two bounds make the cost of a text grow
with its length, not with its square:

- a run of more than ``RUN_CHARS`` characters that are neither letters, digits nor
  spaces (``!!!!``, emoji, box drawing) is read as that many spaces. An e-mail address,
  a phone number, a name or an id always has letters or digits in far shorter runs, and
  offsets do not move (one character for one character);
- a text longer than ``PIECE_CHARS`` is read in pieces, each cut at the last paragraph
  break, line break, sentence end or space before the limit (at the limit when there is
  none), so no value is cut unless a piece holds no space at all. A name found in one
  piece is found again in another only if the engine finds it there too, or the
  workspace already holds its pseudonym.

The time a long text may take is bounded by its caller (``RedactionEngine.detect_within``):
its pieces are read a few at a time, and a text whose pieces are not all read in time is
reported as not read, never half read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The longest text read in one pass, in characters: above every ordinary message (most are
# under 2,000), so what people write is read whole, as before.
PIECE_CHARS = 5_000
RUN_CHARS = 16
_SYMBOL_RUN = re.compile(rf"[^\w\s]{{{RUN_CHARS + 1},}}|_{{{RUN_CHARS + 1},}}")
_SENTENCE_END = re.compile(r"[.!?][\"'’”)\]]*\s")


@dataclass(frozen=True)
class Piece:
    """``text`` (as the engine reads it) starts at ``offset`` in the whole text."""

    offset: int
    text: str


def readable(text: str) -> str:
    """``text`` with each run of more than ``RUN_CHARS`` symbols (no letter, digit or
    space) replaced by as many spaces: same length, same offsets."""
    return _SYMBOL_RUN.sub(lambda run: " " * len(run.group()), text)


def pieces(text: str, limit: int = PIECE_CHARS) -> list[Piece]:
    """``text`` as ``readable`` pieces of at most ``limit`` characters, in order, that
    put together are the whole text."""
    text = readable(text)
    found: list[Piece] = []
    start = 0
    while len(text) - start > limit:
        end = _break(text, start + limit // 2, start + limit)
        found.append(Piece(start, text[start:end]))
        start = end
    found.append(Piece(start, text[start:]))
    return found


def _break(text: str, low: int, high: int) -> int:
    """Where to end a piece in ``text[low:high]``: after the last paragraph break, else
    line break, else sentence end, else space; ``high`` when there is none."""
    for mark in ("\n\n", "\n"):
        at = text.rfind(mark, low, high)
        if at >= 0:
            return at + len(mark)
    ends = [m.end() for m in _SENTENCE_END.finditer(text, low, high)]
    if ends:
        return ends[-1]
    at = max(text.rfind(" ", low, high), text.rfind("\t", low, high))
    return at + 1 if at >= 0 else high
