"""SQLite's rank inside a scope: BM25 weighed by the scope's own rows, not the whole index.

FTS5's ``bm25()`` weighs each word of a question by how many rows of the whole index hold
it (its IDF), and to know that it reads the word's every row: a long question of common
words costs as much as the index is large (at 1M messages, p99 25.8 ms against 1.3 ms
unranked: docs/benchmarks/2026-12-05-issue23-session2.md). A search in a conversation,
or in an end user's few, only needs the words weighed among the rows it can return. So,
for each part of the question (a word, a prefix, a phrase), FTS5 is asked which rows of
the scope hold it: an AND with the conversations' ids, which FTS5 answers without reading
past them. The rows that hold any part are the candidates; how many hold each part is its
document frequency in the scope. Each candidate is scored by Okapi BM25 with FTS5's
constants (k1 1.2, b 0.75, IDF floored at 1e-6), its length from FTS5's own ``docsize``
table, and how often a row says a word counted in its text as the hit's marks are found
(``query.stem``; a phrase counts once): FTS5 does not give its own count outside
``bm25()``. On the coverage bench it ranks as well as ``bm25()`` or better, in the same
run order (docs/benchmarks.md, "Recall").

``ranked.search`` uses it for a scope of conversations on SQLite; a scope it cannot
bound (the whole workspace) stays with ``bm25()``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memory.search.index import SQLITE_FTS
from memory.search.query import _SUFFIXES, _TEXT_WORD, Question, fold, stem

K1 = 1.2
B = 0.75
# More candidates than this and the scope is not small: ``bm25()`` ranks instead.
MAX_CANDIDATES = 5_000


def question_parts(question: Question) -> list[tuple[str, str]]:
    """Each part of the question: (``word``, w), (``prefix``, p) or (``phrase``, "a b")."""
    return [
        *(("word", w) for w in question.words),
        *(("prefix", p) for p in question.prefixes),
        *(("phrase", " ".join(p)) for p in question.phrases),
    ]


def _fts5(kind: str, value: str) -> str:
    """A part in FTS5's syntax, quoted as ``Question.fts5`` quotes it."""
    return f'"{value}"*' if kind == "prefix" else f'"{value}"'


def _forms(kind: str, value: str) -> frozenset[str]:
    """The words a row may say a word part as: the word, its light stem, the stem plus
    an ending it takes off. (A prefix or a phrase is counted otherwise.)"""
    if kind != "word":
        return frozenset()
    root = stem(value)
    return frozenset({value, root, *(root + ending for ending in _SUFFIXES)})


def _varints(blob: bytes) -> list[int]:
    """FTS5's ``docsize`` record: one varint (SQLite's encoding) per column."""
    values, value, index = [], 0, 0
    while index < len(blob):
        byte = blob[index]
        index += 1
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values


@dataclass(frozen=True)
class Weighed:
    """What scoring the scope's candidates needs: which parts each holds, each part's
    weight, the rows' lengths."""

    parts: list[tuple[str, str]]  # question_parts
    forms: list[frozenset[str]]  # per part, _forms
    holding: dict[int, list[int]]  # FTS5 rowid -> the parts it holds
    idf: list[float]
    lengths: dict[int, int]
    average: float

    def score(self, rowid: int, text: str, speaker: str) -> float:
        said = f"{speaker} {text}"
        words = Counter(_TEXT_WORD.findall(said.lower() if said.isascii() else fold(said)))
        norm = K1 * (1 - B + B * self.lengths.get(rowid, self.average) / self.average)
        total = 0.0
        for number in self.holding.get(rowid, ()):
            kind, value = self.parts[number]
            if kind == "word":
                tf = sum(words[form] for form in self.forms[number])
            elif kind == "prefix":
                tf = sum(n for word, n in words.items() if word.startswith(value))
            else:  # a phrase
                tf = 1
            tf = max(tf, 1)  # FTS5 found it (its Porter stems reach further than ``stem``)
            total += self.idf[number] * tf * (K1 + 1) / (tf + norm)
        return total


def weigh(cursor: Any, question: Question, scope_filter: str) -> Weighed | None:
    """The scope's candidates and their weights, or None when the scope holds more
    candidates than ``MAX_CANDIDATES``. ``scope_filter`` is the FTS5 filter on the
    conversations' ids (``ranked._fts_scope``), ending in ``AND``."""
    parts = question_parts(question)
    holding: dict[int, list[int]] = defaultdict(list)
    frequencies: list[int] = []
    for number, (kind, value) in enumerate(parts):
        cursor.execute(
            f"SELECT rowid FROM {SQLITE_FTS} WHERE {SQLITE_FTS} MATCH %s",
            [f"{scope_filter}{{text speaker}} : ({_fts5(kind, value)})"],
        )
        rows = [row[0] for row in cursor.fetchall()]
        frequencies.append(len(rows))
        for rowid in rows:
            holding[rowid].append(number)
        if len(holding) > MAX_CANDIDATES:
            return None
    forms = [_forms(kind, value) for kind, value in parts]
    if not holding:
        return Weighed(parts, forms, {}, [], {}, 1.0)
    cursor.execute(
        f"SELECT count(*) FROM {SQLITE_FTS} WHERE {SQLITE_FTS} MATCH %s",
        [scope_filter.removesuffix(" AND ")],
    )
    rows_in_scope = max(cursor.fetchone()[0], 1)
    lengths = _lengths(cursor, list(holding))
    average = _average_length(cursor) or sum(lengths.values()) / max(len(lengths), 1) or 1.0
    idf = [max(math.log((rows_in_scope - n + 0.5) / (n + 0.5)), 1e-6) for n in frequencies]
    return Weighed(parts, forms, dict(holding), idf, lengths, average)


def _lengths(cursor: Any, rowids: Sequence[int]) -> dict[int, int]:
    """Each row's tokens in its words and speaker columns, as FTS5 counted them."""
    lengths: dict[int, int] = {}
    for start in range(0, len(rowids), 500):
        chunk = rowids[start : start + 500]
        marks = ", ".join(["%s"] * len(chunk))
        cursor.execute(f"SELECT id, sz FROM {SQLITE_FTS}_docsize WHERE id IN ({marks})", chunk)
        for rowid, size in cursor.fetchall():
            columns = _varints(bytes(size))
            lengths[rowid] = sum(columns[:2])
    return lengths


def _average_length(cursor: Any) -> float:
    """The index's mean row length in its words and speaker columns, as ``bm25()`` reads
    it: FTS5's averages record (rowid 1 of its data table: the row count, then each
    column's total tokens)."""
    cursor.execute(f"SELECT block FROM {SQLITE_FTS}_data WHERE id = 1")
    found = cursor.fetchone()
    if not found:
        return 0.0
    values = _varints(bytes(found[0]))
    rows, totals = values[0], values[1:3]
    return sum(totals) / rows if rows else 0.0
