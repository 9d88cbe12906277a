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

``read_in_pieces`` reads texts so: those of one piece (every ordinary message) together
in one batch, a longer one alone, ``PIECES_PER_ROUND`` pieces at a time, until all are
read or its time is up; a text whose pieces are not all read in time is reported as not
read, never half read.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from governance.redaction.presidio import Detection

# How one batch of texts is read: (texts, processes) -> detections per text.
Reader = Callable[[list[str], int], list[list["Detection"]]]

# The longest text read in one pass, in characters: above every ordinary message (most are
# under 2,000), so what people write is read whole, as before.
PIECE_CHARS = 5_000
RUN_CHARS = 16
# The pieces of a long text read in one round, between two looks at its time.
PIECES_PER_ROUND = 4
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


def read_in_pieces(
    texts: Sequence[str], read: Reader, *, seconds: float | None, n_process: int = 1
) -> list[list[Detection] | None]:
    """``read`` over ``texts`` in pieces: detections per text, placed in the whole
    text, in order; None for a text whose last round had not begun after ``seconds``."""
    cut = [pieces(text) for text in texts]
    found: list[list[Detection] | None] = [[] for _ in texts]
    whole = [index for index, parts in enumerate(cut) if len(parts) == 1]
    read_whole = read([cut[index][0].text for index in whole], n_process) if whole else []
    for index, detections in zip(whole, read_whole, strict=True):
        found[index] = detections
    for index, parts in enumerate(cut):
        if len(parts) > 1:
            found[index] = _read_long(parts, read, seconds)
    return found


def _read_long(
    parts: Sequence[Piece], read: Reader, seconds: float | None
) -> list[Detection] | None:
    started = time.monotonic()
    detections: list[Detection] = []
    for first in range(0, len(parts), PIECES_PER_ROUND):
        if seconds is not None and time.monotonic() - started >= seconds:
            return None
        round_ = parts[first : first + PIECES_PER_ROUND]
        for piece, found in zip(round_, read([p.text for p in round_], 1), strict=True):
            detections += [
                replace(d, start=d.start + piece.offset, end=d.end + piece.offset) for d in found
            ]
    return detections
