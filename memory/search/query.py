"""A question as the recall index reads it, and where its words are in a text.

People and agents ask questions ("when does the refund reach Maria?"), not substrings.
``question_of`` keeps the words that carry the question: stop words go, accents and case
are folded, ``"quoted phrases"`` stay phrases and ``prefix*`` matches any ending. The
index matches any of them and ranks by relevance, so a hit need not hold every word.

``highlights`` finds the question's words in a hit's text (by the same folding and a
light stemming, so "refunds" marks "refund"), and ``snippet`` cuts a long text down to
the stretch around them.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memory.search.index import ACCENTED, PLAIN

MAX_QUERY_CHARS = 1000
MAX_TERMS = 32


def _words(words: str) -> frozenset[str]:
    # "aren't" is read as "aren" and "t" (an apostrophe splits a word in both indexes).
    return frozenset(w for word in words.split() for w in (word, word.partition("'")[0]))


# English function words and the verbs of asking: they say how a question is put, not
# what it is about ("what did she say about the refund" is about "refund").
STOP_WORDS = _words(
    """
    a about above after again against all also am an and any are aren't as at be
    because been before being below between both but by can can't cannot could
    couldn't did didn't do does doesn't doing don't down during each else ever few
    for from further had hadn't has hasn't have haven't having he he'd he'll he's
    her here here's hers herself him himself his how how's i i'd i'll i'm i've if in
    into is isn't it it's its itself just let's me more most mustn't my myself no
    nor not now of off on once only or other ought our ours ourselves out over own
    same shan't she she'd she'll she's should shouldn't so some such than that
    that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up very was wasn't
    we we'd we'll we're we've were weren't what what's when when's where where's
    which while who who's whom why why's will with won't would wouldn't you you'd
    you'll you're you've your yours yourself yourselves ask asked say said says tell
    told mention mentioned remember recall know knew anything something thing things
    please
    """
)

_PHRASE = re.compile(r'"([^"]*)"')
_WORD = re.compile(r"[0-9a-z]+(?:'[a-z]+)?\*?")


_LETTERS = str.maketrans(ACCENTED, PLAIN)


def fold(text: str) -> str:
    """Lower case without accents ("Crème" -> "creme", "Søren" -> "soren"), as both
    indexes read text."""
    decomposed = unicodedata.normalize("NFKD", text.lower().translate(_LETTERS))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _tokens(text: str) -> list[str]:
    # An apostrophe's ending is its own token in both indexes ("Maria's" -> maria, s);
    # the one-letter ending says nothing and goes.
    out: list[str] = []
    for raw in _WORD.findall(fold(text)):
        prefix = raw.endswith("*")
        word = raw.rstrip("*")
        head, _, tail = word.partition("'")
        for part in (head, tail):
            if len(part) > 1 or part.isdigit():
                out.append(part + ("*" if prefix and part == (tail or head) else ""))
    return out


@dataclass(frozen=True)
class Question:
    """What a search matches: any of ``words``, ``prefixes`` or ``phrases``.

    ``only_stop_words`` is set when the question held nothing else ("where did they say
    'the'"): its stop words are kept so that a substring search can still answer."""

    words: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    phrases: tuple[tuple[str, ...], ...] = ()
    only_stop_words: bool = False

    @property
    def empty(self) -> bool:
        return not (self.words or self.prefixes or self.phrases)

    @property
    def terms(self) -> tuple[str, ...]:
        """Every single word of the question, phrases' words included."""
        seen = dict.fromkeys([*self.words, *self.prefixes, *(w for p in self.phrases for w in p)])
        return tuple(seen)

    def fts5(self) -> str:
        """The question in FTS5's query syntax: any term, each quoted (so no word of the
        question is read as an operator), phrases as phrases, prefixes with ``*``."""
        parts = [f'"{w}"' for w in self.words]
        parts += [f'"{p}"*' for p in self.prefixes]
        parts += ['"' + " ".join(p) + '"' for p in self.phrases]
        return " OR ".join(parts)

    def tsquery(self) -> str:
        """The question for PostgreSQL's ``to_tsquery('english', ...)``: terms joined by
        ``|``, a phrase's words by ``<->``, a prefix as ``word:*``. Every token is
        ``[0-9a-z]`` only, so nothing of the question is read as an operator."""
        parts = list(self.words)
        parts += [f"{p}:*" for p in self.prefixes]
        parts += ["(" + " <-> ".join(p) + ")" for p in self.phrases]
        return " | ".join(parts)


def question_of(text: str) -> Question:
    """The question ``text`` asks of the index (see the module's docstring)."""
    text = (text or "")[:MAX_QUERY_CHARS]
    phrases: list[tuple[str, ...]] = []
    for quoted in _PHRASE.findall(text):
        phrase = tuple(t.rstrip("*") for t in _tokens(quoted))
        if len(phrase) == 1:
            text += f" {phrase[0]}"
        elif phrase:
            phrases.append(phrase)
    rest = _PHRASE.sub(" ", text)
    tokens = _tokens(rest)
    words: list[str] = []
    prefixes: list[str] = []
    for token in tokens:
        if token.endswith("*"):
            if len(token) > 2:  # "a*" would match half the index
                prefixes.append(token[:-1])
        elif token not in STOP_WORDS:
            words.append(token)
    words = list(dict.fromkeys(words))[:MAX_TERMS]
    prefixes = list(dict.fromkeys(prefixes))[:MAX_TERMS]
    if words or prefixes or phrases:
        return Question(tuple(words), tuple(prefixes), tuple(phrases[:MAX_TERMS]))
    stop_words = tuple(dict.fromkeys(t.rstrip("*") for t in tokens))[:MAX_TERMS]
    return Question(words=stop_words, only_stop_words=bool(stop_words))


# ---- where the question's words are in a text

_TEXT_WORD = re.compile(r"\w+", re.UNICODE)
_SUFFIXES = ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """A light stem, for marking words only (ranking is the database's): "refunds",
    "refunded" and "refunding" all read "refund"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def highlights(text: str, question: Question) -> list[tuple[int, int]]:
    """The character spans of ``text`` that hold a word of ``question``."""
    stems = {stem(t) for t in question.terms}
    prefixes = question.prefixes
    spans: list[tuple[int, int]] = []
    for match in _TEXT_WORD.finditer(text):
        word = fold(match.group())
        if stem(word) in stems or word in stems or any(word.startswith(p) for p in prefixes):
            spans.append(match.span())
    return spans


SNIPPET_CHARS = 240


def snippet(
    text: str, spans: list[tuple[int, int]], *, width: int = SNIPPET_CHARS
) -> tuple[str, list[tuple[int, int]]]:
    """``text`` cut to about ``width`` characters around the densest run of ``spans``,
    with "…" where it was cut, and the spans moved into the cut text."""
    if len(text) <= width:
        return text, spans
    start = 0
    if spans:
        # The window that holds the most marked words, starting at one of them.
        best = max(
            range(len(spans)),
            key=lambda i: sum(1 for s in spans[i:] if s[1] <= spans[i][0] + width * 2 // 3),
        )
        start = max(0, spans[best][0] - width // 3)
    end = min(len(text), start + width)
    start = max(0, end - width)
    # Whole words only.
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    if end < len(text):
        space = text.rfind(" ", end - 20, end)
        end = space if space > start else end
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    shift = len(head) - start
    moved = [(a + shift, b + shift) for a, b in spans if a >= start and b <= end]
    return head + text[start:end] + tail, moved
