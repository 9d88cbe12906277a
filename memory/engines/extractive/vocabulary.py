"""Words every part of the extractive engine shares: the priorities, the word lists, and
how a text becomes the word sets that cues and similarity tests compare."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

HIGH, MEDIUM, LOW, COMPLETED = "high", "medium", "low", "completed"
# How strongly a priority holds its ground when two notes merge.
PRIORITY_STRENGTH = {HIGH: 3, MEDIUM: 2, COMPLETED: 1, LOW: 0}


def wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


STOPWORDS = wordset(
    """a an the and or but if so of to in on at by for with from as into about over under
    is are was were be been being am do does did have has had having it its this that these
    those there here then than too very really just also i me my we us our you your he him
    his she her they them their user assistant tool system said asked what which who whom
    how when where why can could would should will shall may might must not no yes some any
    all each every more most much many few other such own same only both either neither
    up down out off again further once s t don't i'm it's that's i've i'll i'd user's
    assistant's"""
)
# Words too general to make a clause worth keeping on their own ("User will take a look").
VAGUE_WORDS = wordset(
    """try tries tried do doing get gets got go goes going went make makes made think thinks
    thought feel feels felt know knows knew see sees saw say says want wants like likes
    let lets keep keeps give gives take takes come comes thing things something anything
    everything stuff lot lots way ways well good great nice fine okay ok sure right idea
    ideas one ones time today now look looks share chat talk ask question questions help
    best sound sounds beautiful wonderful amazing interesting fun happy glad excited small
    love loves enjoy enjoyed back again soon later tomorrow yesterday tonight day lovely
    advice advise suggestion suggestions recommendation recommendations tip tips other else
    useful practical helpful ever also pleasant sweet dream check consider considering mind
    heart seriously implement practice follow suggested recommended methods words hard
    important future own decision decide chance hopefully maybe much many them those these
    friend friends nicely kindly politely sorry unfortunately huh hm hmm eh ooh ohh whoa wow
    hey yeah yep nope"""
)
ADVERBS = wordset(
    """really also just often usually always never mainly sometimes still especially actually
    recently mostly absolutely definitely only even already finally generally normally rarely
    truly now currently occasionally frequently ever kinda sorta totally probably simply
    alone too again instead first once"""
)
_TOKEN = re.compile(r"[a-z0-9']+")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Sentence:
    """A sentence with its lowercase form and word set, computed once for all the cues."""

    text: str
    lower: str
    words: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Sentence:
        lower = text.lower().replace("’", "'")
        return cls(text, lower, frozenset(_TOKEN.findall(lower)))

    @property
    def is_question(self) -> bool:
        return self.text.rstrip().endswith("?")

    @property
    def has_digit(self) -> bool:
        return _DIGIT.search(self.text) is not None


_WORD = re.compile(r"[a-z0-9$€£]+(?:['.,/-][a-z0-9]+)*")


@lru_cache(maxsize=16_384)
def content_tokens(text: str) -> frozenset[str]:
    """The words that carry meaning, lightly stemmed, for similarity tests.

    Cached for the length of a run (``observer.forget_texts``): a run compares each
    clause with every previous observation."""
    tokens = set()
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        tokens.add(word)
    return frozenset(tokens)


def numbers_in(tokens: Iterable[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if not t.isalpha() and _DIGIT.search(t))


def shorten(text: str, limit: int) -> str:
    words = text.split()
    if len(words) <= limit:
        return text
    return " ".join(words[:limit]).rstrip(",;:") + "…"
