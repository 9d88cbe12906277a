"""What memory is compared with at its own size, all made from the raw turns:

- ``first-k``: the first k words of each turn;
- ``salient-m``: each turn's capitalised words, numbers and words of 7+ letters, in
  order, at most m per turn;
- ``BM25``: the conversation's turns ranked against the question by Okapi BM25
  (``rank_bm25.BM25Okapi``, k1 1.5, b 0.75, over the bench's content words), taken in
  rank order until the memory's token count for that conversation is used; the turn
  that crosses the budget is cut to fit it. Ties keep the turns' order.

A named turn keeps its "Name: " in front of what first-k and salient-m take from it."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from bench.quality.datasets import Turn
from bench.quality.scoring import content_word_list


def first_words(turn: str, k: int) -> str:
    return " ".join(turn.split()[:k])


SALIENT = re.compile(r"^(?:[A-Z][\w'-]*|[\d$][\d.,$%:/-]*|[A-Za-z'-]{7,})$")


def salient_words(turn: str, m: int) -> str:
    picked = [w for w in (t.strip('.,;:!?"()[]*') for t in turn.split()) if w and SALIENT.match(w)]
    return " ".join(picked[:m])


def _named(turn: Turn, text: str) -> str:
    return f"{turn.name}: {text}" if turn.name else text


def first_k_text(turns: Sequence[Turn], k: int) -> str:
    return "\n".join(_named(t, first_words(t.content, k)) for t in turns)


def salient_m_text(turns: Sequence[Turn], m: int) -> str:
    return "\n".join(_named(t, salient_words(t.content, m)) for t in turns)


class Bm25Turns:
    """One conversation's turns, indexed once for all its questions."""

    def __init__(self, texts: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi  # type: ignore[import-untyped]

        self.texts = list(texts)
        documents = [content_word_list(text) for text in self.texts]
        # BM25Okapi divides by the mean document length: a conversation of empty turns
        # has nothing to rank.
        self._index = BM25Okapi(documents) if any(documents) else None
        self._ranked: dict[str, list[int]] = {}  # every variant asks the same questions
        self._counted: dict[str, int] = {}  # and counts the same turns

    def ranked(self, question: str) -> list[int]:
        """Turn indexes, best first; equal scores in the conversation's order."""
        if self._index is None:
            return list(range(len(self.texts)))
        if question not in self._ranked:
            scores = self._index.get_scores(content_word_list(question))
            self._ranked[question] = sorted(
                range(len(self.texts)), key=lambda i: (-float(scores[i]), i)
            )
        return self._ranked[question]

    def within_budget(
        self,
        question: str,
        budget: int,
        *,
        count: Callable[[str], int],
        cut: Callable[[str, int], str],
    ) -> str:
        def counted(text: str) -> int:
            if text not in self._counted:
                self._counted[text] = count(text)
            return self._counted[text]

        return take_within_budget(
            [self.texts[i] for i in self.ranked(question)], budget, count=counted, cut=cut
        )


def take_within_budget(
    ranked: Sequence[str],
    budget: int,
    *,
    count: Callable[[str], int],
    cut: Callable[[str, int], str],
) -> str:
    """The texts in the order given while their tokens (``count``, one more for the line
    break between two) fit ``budget``; the first that does not fit is cut to the tokens
    left (``cut``), and nothing after it is taken."""
    taken: list[str] = []
    left = budget
    for text in ranked:
        cost = count(text) + (1 if taken else 0)
        if cost <= left:
            taken.append(text)
            left -= cost
            continue
        room = left - (1 if taken else 0)
        if room > 0:
            taken.append(cut(text, room))
        break
    return "\n".join(taken)
