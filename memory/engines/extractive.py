"""The ``extractive`` engine: the default Observer and Reflector, offline, with no model.

Observer. Each sentence of a user, assistant or system message is kept only when it
carries something worth remembering (a fact about the user, a preference, a decision, a
plan, a commitment, a problem, a request, a new name or a number) and is rewritten in the
third person ("I prefer email" becomes "User prefers email"). Greetings, thanks,
acknowledgements and chit-chat are dropped. Each tool call becomes one line with the
salient values of its output; a later state of the same object replaces an earlier one,
and a line whose values another line of the window already holds is folded into it, as
is a user request that the tool calls after it carried out. Priorities are assigned by
rule; relative dates are resolved against the message time (``dates.py``) and written
out ("yesterday" becomes "on Apr 27"). A fact already in the previous observations is
not repeated.

Reflector. A later note about the same subject supersedes the earlier one ("User now
prefers SMS" replaces "User prefers email"), near-duplicates (token-set similarity) are
merged, and the older part of memory is compressed harder than the recent part: old
high-priority notes stay as they are, other old notes become one line per topic, and
background and completed ones are shortened on the way.

Everything here is deterministic: no clocks, no randomness, and output is never built by
iterating over an unordered set. The engine never touches the database; see ``base.py``.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from memory.engines.base import (
    MEMORY_BLOCK_HEADER,
    DraftObservation,
    DraftReflection,
    ObserverOutput,
    SourceMessage,
    SourceObservation,
)
from memory.engines.dates import DateMention, find_dates

HIGH, MEDIUM, LOW, COMPLETED = "high", "medium", "low", "completed"
# How strongly a priority holds its ground when two notes merge.
PRIORITY_STRENGTH = {HIGH: 3, MEDIUM: 2, COMPLETED: 1, LOW: 0}

MAX_CLAUSES_PER_MESSAGE = 12  # a pasted document must not become a hundred notes
MAX_SENTENCE_WORDS = 32
TRIM_CLAUSES_FROM_WORDS = 14  # longer sentences lose their clauses that carry no signal
MAX_TOOL_ITEMS = 12
MAX_LIST_ITEMS = 8
MAX_JSON_LEAVES = 20_000  # enough for any useful summary; bounds time on huge payloads
MAX_TEXT_LINES = 50_000
SHORT_TOOL_TEXT_WORDS = 40  # plain-text tool output up to this long is kept as it is
# Token-set Jaccard at which two notes say the same thing. Lower merges distinct events
# ("went to the park with a friend" / "went to the zoo with a friend" share 4 of 6).
DUPLICATE_SIMILARITY = 0.75
KNOWN_SIMILARITY = 0.8  # stricter: dropping a fact because it was said before
RECENT_SHARE = 0.25  # the newest quarter of observations is reflected verbatim
OLD_HIGH_WORDS = 60  # in practice no limit: old high-priority notes are kept whole
OLD_MEDIUM_WORDS = 18  # old medium notes keep about this many words each, no articles
OLD_BACKGROUND_WORDS = 10  # old low and completed notes, harder still
MAX_GROUP_ITEMS = 12
MAX_SUPERSEDE_CANDIDATES = 64  # per word: bounds a very long memory to linear time


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# --------------------------------------------------------------------------- vocabulary

STOPWORDS = _wordset(
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
VAGUE_WORDS = _wordset(
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
    friend friends"""
)
FILLER_WORDS = re.compile(
    r"\b(?:really|very|quite|actually|definitely|particularly|truly|totally|absolutely|"
    r"basically|literally|honestly|simply|certainly|just|super)\s+",
    re.IGNORECASE,
)
ADVERBS = _wordset(
    """really also just often usually always never mainly sometimes still especially actually
    recently mostly absolutely definitely only even already finally generally normally rarely
    truly now currently occasionally frequently ever"""
)
IRREGULAR_THIRD_PERSON = {
    "am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "were": "was",
    "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
}  # fmt: skip
# Words after a subject that must not take a third-person "s": modals, past forms, and
# words that are not verbs at all.
UNINFLECTED = _wordset(
    """was is has had did will would can could should might must may shall went made saw got
    came took gave told said left kept began wrote heard knew thought felt found bought paid
    met ran ate sat spent read won lost drove flew swam sang brought caught taught sought
    won't can't couldn't wouldn't shouldn't didn't wasn't isn't hasn't doesn't agreed"""
)
AUXILIARIES = _wordset("can could may might shall should will would do did does am was have had")
_SENTENCE_STARTERS = _wordset(
    """the it it's this that that's there there's these those a an some my our we they he
    she what what's how when where why which who is are was were do does did can could would
    should will in on at for if as so but and today yesterday tomorrow sometimes recently
    lately now then here every each all many most no not maybe perhaps"""
)
NOT_NAMES = _wordset(
    """I I'm I've I'll I'd AI OK Okay Hi Hello Hey Yes No The A An It This That My Your We
    You He She They What Which Who How When Where Why Do Does Did Can Could Would Should
    Will Is Are Was Were Thanks Thank Please Sorry Oh Well So But And Or If Then Also Sure
    Great Good Nice Dear Mr Mrs Ms Dr There Here Its Our Their His Her Let"""
)

_GREETING = re.compile(
    r"^(?:hi|hello|hey|greetings|howdy|good\s+(?:morning|afternoon|evening|night|day)|"
    r"bye|goodbye|good-bye|see\s+you|see\s+ya|talk\s+(?:to\s+you\s+)?(?:later|soon|tomorrow)|"
    r"nice\s+to\s+(?:meet|see|chat|talk)|sweet\s+dreams|take\s+care|cheers|welcome\s+back|"
    r"have\s+a\s+(?:nice|good|great|lovely|pleasant)|you'?re\s+welcome|my\s+pleasure|"
    r"no\s+problem|no\s+worries|good\s+luck|let's\s+(?:chat|talk)|it's\s+getting\s+late|"
    r"(?:talk|chat|see\s+you)\s+(?:again\s+)?(?:next\s+time|later|soon|tomorrow))\b",
    re.IGNORECASE,
)
# "Hi Jason," / "Hello there!" / "Hi, AI companion." - a greeting and who it greets. Only
# the greeting words ignore case: a vocative name must be capitalised.
_GREETING_PREFIX = re.compile(
    r"^(?i:hi|hello|hey|dear|greetings|good\s+(?:morning|afternoon|evening))\b"
    r"(?:[\s,]+(?i:my\s+)?(?i:dear\s+)?(?:(?i:friend|there|everyone|all|buddy)|"
    r"(?!I\b|I')[A-Z][\w']*)(?:\s+[A-Za-z][\w']*)?(?=\s*[,!.:]))?\s*[,!.:-]*\s*"
)
_THANKS = re.compile(
    r"\b(?:thank(?:s|\s+you)(?:\s+(?:so|very)\s+much)?(?:\s+for\s+[^,.;!?]*)?|"
    r"(?:i\s+)?appreciate\s+(?:it|that|your\s+[^,.;!?]*))",
    re.IGNORECASE,
)
_DISCOURSE_PREFIX = re.compile(
    # Phrases before the single words they start with: "no problem" before "no".
    r"^(?:(?:no\s+problem|by\s+the\s+way|speaking\s+of\s+which|all\s+right|in\s+addition|"
    r"well|so|oh|ah|aha|haha+|hehe|hmm+|um+|yes|yeah|yep|no|nope|ok(?:ay)?|sure|actually|"
    r"anyway|honestly|alright|great|cool|wow|indeed|also|and|but|then|besides|however|"
    r"additionally|firstly|secondly|finally)\b[\s,!.:;-]*)+",
    re.IGNORECASE,
)
_TRAILING_VOCATIVE = re.compile(
    r",\s*(?:my\s+)?(?:dear\s+)?(?:friend|buddy|pal)\s*(?=[.!?]*$)", re.I
)
_FIRST_CLAUSE_END = re.compile(r",\s|;|\s+(?:and|but|so)\s|[.!?]")
_LEADING_TIME = re.compile(
    r"^(?P<time>today|yesterday|tonight|this\s+(?:morning|afternoon|evening|week)|"
    r"last\s+(?:night|week|weekend)|recently|lately|these\s+days|earlier\s+today)\s*,?\s+"
    r"(?=(?:i|we|my)\b)",
    re.IGNORECASE,
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


@dataclass(frozen=True)
class Cue:
    """A pattern over the lowercase sentence, tried only when one of its gate words is
    present: a set test costs far less than scanning with a large alternation, and most
    sentences fail it. Without a pattern, the gate alone decides."""

    gate: frozenset[str]
    pattern: re.Pattern[str] | None = None

    def found(self, sentence: Sentence) -> bool:
        if self.gate.isdisjoint(sentence.words):
            return False
        return self.pattern is None or self.pattern.search(sentence.lower) is not None


def _cue(gate: str, pattern: str | None = None) -> Cue:
    return Cue(_wordset(gate), re.compile(pattern) if pattern else None)


# Questions about the assistant itself ("Do you like music?", "Have you seen it?"), as
# opposed to requests addressed to it ("Do you know any good hiking trails?").
SMALL_TALK_QUESTION = _cue(
    "you your",
    r"\b(?:how\s+are\s+you|how\s+have\s+you\s+been|what\s+about\s+you|and\s+you|"
    r"how\s+(?:was|is)\s+your|what\s+do\s+you\s+(?:think|usually|like)|don't\s+you\s+think|"
    r"what(?:'s|\s+is)\s+your\s+favou?rite|(?:are|were)\s+you|"
    r"(?:do|does|did)\s+you\s+(?:like|enjoy|love|prefer|think|feel|usually|ever|remember|"
    r"know\s+that|have\s+(?:any\s+)?(?:hobbies|feelings|friends|a\s+favou?rite))|"
    r"(?:have|had)\s+you\s+(?:ever|heard|seen|been|tried|read|watched)|"
    r"can\s+you\s+(?:taste|eat|feel|go|come|dream|travel))\b",
)
EXPLICIT_REQUEST = _cue(
    "please can could would will may i i'd help remind let",
    r"^(?:please\b|(?:can|could|would|will)\s+(?:you|i|we)\b|may\s+i\b|"
    r"i(?:'d|\s+would)\s+like\b|i\s+(?:need|want)\s+(?!to\b)|help\s+me\b|remind\s+me\b|"
    r"let\s+me\s+(?:know|have|get)\b)|\bplease\s*[.!]?$",
)
IMPERATIVE_VERBS = _wordset(
    "give send book order cancel check find show tell add remove change make get reset update "
    "schedule call email refund replace fix explain remind list"
)
PREFERENCE = _cue(
    "like love enjoy prefer hate dislike adore stand likes loves enjoys prefers favorite "
    "favourite preferred rather into fan fond allergic vegetarian vegan",
    r"\b(?:(?:i|we)\s+(?:\w+\s+){0,2}?(?:like|love|enjoy|prefer|hate|dislike|adore|"
    r"can'?t\s+stand)|(?:likes?|loves?|enjoys?|prefers?|favou?rite|preferred|rather)\b|"
    r"i'?m\s+(?:really\s+)?(?:into|a\s+fan\s+of|fond\s+of|allergic\s+to|vegetarian|vegan))",
)
IDENTITY = _cue(
    "name called call live work study grew teach am i'm years my",
    r"\b(?:my\s+name\s+is|i'?m\s+called|call\s+me|i\s+(?:live|work|study|grew\s+up|teach)|"
    r"i\s+am\s+(?:a|an)\b|i'?m\s+(?:a|an)\b|i'?m\s+\d+|years\s+old|my\s+(?:job|work|wife|"
    r"husband|partner|son|daughter|kids?|children|mom|mother|dad|father|parents|family|"
    r"friends?|boss|team|company|address|email|phone|birthday|age|dog|cat|pet|teacher|"
    r"school|university|major|account|order|card|plan|subscription))\b",
)
HABIT = _cue(
    "usually often always normally regularly sometimes never mainly mostly",
    r"\bi\s+(?:usually|often|always|normally|regularly|sometimes|never|mainly|mostly)\b",
)
PLAN = _cue(
    "i'll we'll will going plan planning intend decided chose want would i'd hope need "
    "registered signed booked enrolled",
    r"\b(?:i|we)(?:'ll|\s+will|\s+am\s+going\s+to|'m\s+going\s+to|\s+plan|\s+am\s+planning|"
    r"'m\s+planning|\s+intend|\s+decided|\s+have\s+decided|'ve\s+decided|\s+chose|"
    r"\s+want\s+to|\s+would\s+like\s+to|'d\s+like\s+to|\s+hope\s+to|\s+need\s+to|"
    r"(?:\s+just)?\s+(?:registered|signed\s+up|booked|enrolled))\b",
)
EVENT = _cue(
    "went visited made bought saw met tried learned learnt started joined watched cooked ran "
    "climbed played finished moved traveled travelled had took attended read wrote won lost "
    "received ordered paid called sent found been passed got",
    r"\b(?:i|we)\s+(?:\w+\s+)?(?:went|visited|made|bought|saw|met|tried|learned|learnt|"
    r"started|joined|watched|cooked|ran|climbed|played|finished|moved|traveled|travelled|"
    r"had|took|attended|read|wrote|won|lost|received|ordered|paid|called|sent|found|passed|got|"
    r"(?:have|'ve)\s+been)\b",
)
PROBLEM = _cue(
    "problem problems issue issues error errors bug bugs broken fail failed fails failing "
    "failure crash crashed crashes crashing working work twice can't cannot unable wrong "
    "missing lost late delay delayed overcharged complain complained complaint complaints "
    "frustrated frustrating frustration angry upset stress stressed stressful anxious anxiety "
    "worried lonely sick ill pain hurt injured injury depressed depression overwhelmed "
    "confused struggle struggling struggled scared afraid nervous declined refused denied "
    "down low blue sad tired exhausted bored unhappy agitated well unwell difficulty "
    "difficulties difficult",
    r"\b(?:(?<!no\s)problems?|issues?|errors?|bugs?|broken|fail(?:ed|s|ing|ure)?|crash\w*|"
    r"not\s+working|doesn'?t\s+work|won'?t\s+work|can'?t|cannot|unable|wrong|missing|"
    r"lost|(?<!getting\s)late|delay(?:ed)?|overcharged|charged\s+twice|complain\w*|frustrat\w*|angry|"
    r"upset|stress(?:ed|ful)?|anxious|anxiety|worried|lonely|sick|ill|pain|hurt|injur\w*|"
    r"depress\w*|overwhelmed|confused|struggl\w*|scared|afraid|nervous|declined|refused|"
    r"denied|sad|exhausted|unhappy|agitated|unwell|difficult(?:y|ies)?|"
    r"not\s+feeling\s+(?:very\s+|so\s+|too\s+)?well|(?:feel|feeling|felt|am|i'm)\s+(?:a\s+bit\s+|so\s+|"
    r"really\s+|very\s+|quite\s+|a\s+little\s+)?(?:down|low|blue|tired|bored))\b",
)
URGENT = _cue(
    "urgent urgently asap immediately right must deadline due later critical emergency",
    r"\b(?:urgent\w*|asap|immediately|right\s+away|(?:i|we)\s+must|must\s+(?!be\b)|deadline|"
    r"due|no\s+later\s+than|critical|emergency)\b",
)
COMMITMENT = _cue(
    "i'll we'll will shall promise guarantee going you'll",
    r"\b(?:(?:i|we)(?:'ll|\s+will|\s+shall|\s+promise|\s+guarantee|\s+am\s+going\s+to|"
    r"'m\s+going\s+to)|will\s+be\s+(?:sent|issued|refunded|delivered|processed|shipped|"
    r"credited|fixed|resolved)|you(?:'ll|\s+will)\s+(?:receive|get|see))\b",
)
# A promise worth holding the agent to names a concrete action (or a date or an amount).
CONCRETE_ACTION = _cue(
    "send sends sending refund refunds refunded refunding email emailing emailed call calling "
    "ship shipping shipped deliver delivering delivered delivery fix fixing fixed process "
    "processing processed book booking booked schedule scheduled scheduling cancel cancelling "
    "canceling cancelled canceled cancellation credit credited crediting reset escalate "
    "escalating escalated follow update updating updated remind reminder transfer "
    "transferring transferred issue issuing issued arrange arranging contact contacting "
    "replace replacing replacement investigate investigating resolve resolving resolved "
    "waive upgrade upgrading reimburse reimbursement notify notifying receive"
)
COMPLETION = _cue(
    "done complete completed finished resolved fixed solved issued refunded delivered shipped "
    "paid processed cancelled canceled closed sorted submitted confirmed approved"
)
RECOMMENDATION = _cue(
    "recommend recommends recommended recommendation recommendations suggest suggests "
    "suggested suggestion suggestions try consider check choice choices worth might",
    r"\b(?:recommend\w*|suggest\w*|try|consider|check\s+out|good\s+choices?|worth|"
    r"might\s+(?:want|like|enjoy))\b",
)
DATE_WORDS = _wordset(
    "today tonight tomorrow yesterday ago next last morning afternoon evening week weekend "
    "month year monday tuesday wednesday thursday friday saturday sunday jan feb mar apr may "
    "jun jul aug sep sept oct nov dec january february march april june july august "
    "september october november december days weeks months years within end"
)
NEGATION_WORDS = _wordset(
    "not never yet don't doesn't didn't isn't wasn't aren't weren't can't couldn't won't "
    "wouldn't shouldn't haven't hasn't hadn't"
)
_NEGATION = re.compile(r"\b(?:not|never|yet|no\s+longer|\w+n't)\b|\bn't\b", re.IGNORECASE)
# "I'll send it off": a promise about "it" is routine, not something to hold anyone to.
_VAGUE_OBJECT = re.compile(
    r"\b(?:send|sending|process|processing|book|booking|update|updating|arrange|ship)"
    r"\s+(?:it|this|that|them|one)\b"
)
# "I'm Gary", "My name is Gary", "Call me Gary".
_INTRODUCTION = re.compile(
    r"(?:^I'm|^I am|\b[Mm]y name is|\b[Cc]all me)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*)"
)
ACKNOWLEDGED_ADVICE = _cue(
    "these those them it that this your you",
    r"\b(?:i|we)(?:'ll|\s+will|\s+am\s+going\s+to|'m\s+going\s+to)\s+(?:\w+\s+){0,5}?"
    r"(?:these|those|them|it|that|your|you|this(?!\s+(?:morning|afternoon|evening|week|"
    r"weekend|month|year|summer|winter|spring|autumn|fall)))\b|"
    r"\byou\s+(?:recommended|suggested|mentioned|said)\b",
)
# "I want to talk to you about ...": an announcement of a topic, not a fact.
META_TALK = _cue(
    "talk chat share ask discuss",
    r"\b(?:want(?:ed)?\s+to|would\s+like\s+to|'d\s+like\s+to|let's|here\s+to|back\s+to)\s+"
    r"(?:talk|chat|share|ask|discuss)\b",
)
_SPECIFIC_NUMBER = re.compile(r"[$€£¥]\s?\d|\b[A-Z]{2,}-?\d+|\d+(?:[.,:]\d+)?\s?(?:%|[a-zA-Z]+)?")
_MONEY_OR_REFERENCE = re.compile(r"[$€£¥]\s?\d|\b[A-Z]{2,}-?\d+")
_QUOTED = re.compile(r"\"([^\"]{2,80})\"|“([^”]{2,80})”")
_CAPITALISED_RUN = re.compile(r"\b[A-Z][\w'&-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z][\w'&-]*)*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|\n+")
_AFTER_QUOTE_SPLIT = re.compile(r"(?<=[\"”])\s+(?=[A-Z])")  # 'a movie, "Up" Have you seen it?'
_CLAUSE_SPLIT = re.compile(
    r",\s+(?=(?:and|but|so|which|because|while|although|though|as)\b)|;\s+|\s+because\s+"
)
_WORD = re.compile(r"[a-z0-9$€£]+(?:['.,/-][a-z0-9]+)*")
_SEGMENT = re.compile(r"[A-Za-z']+|[^A-Za-z']+")


# --------------------------------------------------------------------------- small helpers


@lru_cache(maxsize=16_384)
def content_tokens(text: str) -> frozenset[str]:
    """The words that carry meaning, lightly stemmed, for similarity tests.

    Cached: the previous observations handed to every Observer run repeat from run to run."""
    tokens = set()
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        tokens.add(word)
    return frozenset(tokens)


@lru_cache(maxsize=16_384)
def _cached_numbers(tokens: frozenset[str]) -> frozenset[str]:
    return numbers_in(tokens)


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)


def numbers_in(tokens: Iterable[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if not t.isalpha() and _DIGIT.search(t))


def has_substance(text: str) -> bool:
    """At least one word that is neither a stopword, a pronoun nor vague."""
    return any(t not in VAGUE_WORDS for t in content_tokens(text))


def shorten(text: str, limit: int) -> str:
    words = text.split()
    if len(words) <= limit:
        return text
    return " ".join(words[:limit]).rstrip(",;:") + "…"


def _strongest(priorities: Iterable[str]) -> str:
    return max(priorities, key=lambda p: PRIORITY_STRENGTH.get(p, 0))


def _is_memory_block(message: SourceMessage) -> bool:
    return message.role == "system" and message.content.lstrip().startswith(MEMORY_BLOCK_HEADER)


def _lower_first(text: str) -> str:
    """Lowercase a sentence's first word after "User said", unless it is a name."""
    first = text.split(" ", 1)[0]
    if first.lower() in _SENTENCE_STARTERS:
        return text[:1].lower() + text[1:]
    return text


# --------------------------------------------------------------------------- third person


def _third_person_s(verb: str) -> str:
    lower = verb.lower()
    if lower in IRREGULAR_THIRD_PERSON:
        return IRREGULAR_THIRD_PERSON[lower]
    past = lower.endswith("ed") and not lower.endswith("eed")  # "need" is not a past form
    if lower in UNINFLECTED or past or lower.endswith(("s", "n't")) or not lower.isalpha():
        return verb
    if lower.endswith(("sh", "ch", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def speaker_names(role: str) -> tuple[str, str]:
    """(who speaks, who is spoken to) for a message of this role."""
    if role == "assistant":
        return "Assistant", "User"
    if role == "system":
        return "System", "Assistant"
    return "User", "Assistant"


# Contractions come first so that "I'm" is not read as "I" + "'m".
# Matched against the lowercased sentence (same length, same spans): IGNORECASE is slow.
_PERSON = re.compile(
    r"\b(?:i'm|i am|i've|i have|i'd|i'll|i was|i|my|mine|me|myself|"
    r"you're|you are|you've|you have|you'll|you'd|you were|your|yours|yourself|you)\b"
)
CLAUSE_OPENERS = _wordset("and but so that if when because as")


def third_person(text: str, role: str) -> str:
    """Name the parties instead of "I" and "you": "I love my dog" becomes "User loves
    User's dog" in a user message. A verb after a rewritten subject agrees with it."""
    speaker, listener = speaker_names(role)
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    pieces: list[str] = []
    position = 0
    conjugate_next = False
    lower = text.lower()
    if len(lower) != len(text):
        lower = text  # a character whose lowercase is longer: match the text as it is
    for match in _PERSON.finditer(lower):
        if any(start <= match.start() < end for start, end in quoted):
            continue  # a title is quoted as it is: "You Shook Me All Night Long"
        before = text[position : match.start()]
        pieces.append(_conjugate_first_verb(before) if conjugate_next else before)
        word = text[match.start() : match.end()]
        replacement, conjugate_next = _replace_person(word, speaker, listener, before)
        pieces.append(replacement)
        position = match.end()
    rest = text[position:]
    pieces.append(_conjugate_first_verb(rest) if conjugate_next else rest)
    return "".join(pieces)


def _replace_person(word: str, speaker: str, listener: str, context: str) -> tuple[str, bool]:
    lower = word.lower().replace("’", "'")
    first = {
        "i'm": f"{speaker} is", "i am": f"{speaker} is", "i've": f"{speaker} has",
        "i have": f"{speaker} has", "i'd": f"{speaker} would", "i'll": f"{speaker} will",
        "i was": f"{speaker} was", "my": f"{speaker}'s", "mine": f"{speaker}'s",
        "me": speaker, "myself": speaker,
    }  # fmt: skip
    second = {
        "you're": f"{listener} is", "you are": f"{listener} is", "you've": f"{listener} has",
        "you have": f"{listener} has", "you'll": f"{listener} will", "you'd": f"{listener} would",
        "you were": f"{listener} was", "your": f"{listener}'s", "yours": f"{listener}'s",
        "yourself": listener,
    }  # fmt: skip
    tail = context.rstrip()
    previous_word = tail.rsplit(None, 1)[-1].lower() if tail else ""
    # After an auxiliary ("can I get", "do you have") the verb keeps its base form.
    inverted = previous_word in AUXILIARIES
    if inverted and " " in lower:
        name = speaker if lower.startswith("i") else listener
        return f"{name} {word.split()[1]}", False
    if lower in first:
        return first[lower], False
    if lower in second:
        return second[lower], False
    if lower == "i":
        return speaker, not inverted
    # "you" only governs the verb when it is the subject: not in "I'll send you".
    opens_clause = not tail or tail[-1] in ",;:.!?" or previous_word in CLAUSE_OPENERS
    return listener, not inverted and opens_clause


def _conjugate_first_verb(segment: str) -> str:
    parts = _SEGMENT.findall(segment)
    for index, part in enumerate(parts):
        if not part[0].isalpha():
            if part.strip():
                return segment  # punctuation before any verb: nothing to conjugate
            continue
        if part.lower() in ADVERBS:
            continue
        parts[index] = _third_person_s(part)
        return "".join(parts)
    return segment


# --------------------------------------------------------------------------- sentences


def split_sentences(text: str) -> list[str]:
    parts = _SENTENCE_SPLIT.split(text)
    if '" ' in text or "” " in text:
        parts = [piece for part in parts for piece in _AFTER_QUOTE_SPLIT.split(part)]
    return [s.strip() for s in parts if s and s.strip()]


_OPENERS = _wordset(
    """well so oh ah aha hehe yes yeah yep no nope ok okay sure actually anyway by speaking
    honestly alright all great cool wow indeed also and but then besides however in
    additionally firstly secondly finally hi hello hey dear greetings good"""
)


def _opens_with_filler(sentence: str) -> bool:
    words = sentence.lstrip("\"'“ ").split(None, 1)
    head = words[0].lower().strip(",.!:;-") if words else ""
    return head in _OPENERS or head.startswith(("haha", "hmm", "um"))


def clean_sentence(raw: str) -> str | None:
    """The sentence without greetings, vocatives and discourse markers ("Well, hi Anna,
    I moved" -> "I moved"), or None when nothing but pleasantries is left."""
    sentence = raw.strip().replace("’", "'")
    while _opens_with_filler(sentence):
        shorter = _GREETING_PREFIX.sub("", _DISCOURSE_PREFIX.sub("", sentence)).strip()
        if shorter == sentence:
            break
        sentence = shorter
    if not sentence or _GREETING.match(sentence):
        return None
    lower = sentence.lower()
    if ("thank" in lower or "appreciate" in lower) and _THANKS.search(sentence):
        sentence = _THANKS.sub("", sentence).strip(" ,;.!")
        if not has_substance(sentence):
            return None
    sentence = _TRAILING_VOCATIVE.sub("", sentence)
    time = _LEADING_TIME.match(sentence)
    if time:
        # "Today I went to the park, and ..." reads better as "I went to the park today,
        # and ..."; the time stays in the first clause, the one it dates.
        body = sentence[time.end() :]
        boundary = _FIRST_CLAUSE_END.search(body)
        cut = boundary.start() if boundary else len(body.rstrip(" .!"))
        sentence = f"{body[:cut]} {time.group('time').lower()}{body[cut:]}"
    return sentence[:1].upper() + sentence[1:]


def names_in(sentence: str) -> list[str]:
    """Quoted titles and runs of capitalised words that do not merely open a sentence."""
    quoted_spans = [m.span() for m in _QUOTED.finditer(sentence)]
    names = [a or b for a, b in _QUOTED.findall(sentence)]
    for match in _CAPITALISED_RUN.finditer(sentence):
        if any(start <= match.start() < end for start, end in quoted_spans):
            continue
        words = match.group(0).split()
        if match.start() == 0 or sentence[: match.start()].rstrip()[-1:] in ".!?":
            words = words[1:]  # capitalised because it opens the sentence, not a name
        words = [w for w in words if w not in NOT_NAMES]
        if words:
            names.append(" ".join(words))
    return names


# --------------------------------------------------------------------------- clauses


@dataclass
class Clause:
    """One kept sentence, rewritten, with what the Observer decided about it."""

    text: str
    priority: str
    kind: str
    message: SourceMessage
    referenced_at: datetime | None
    tokens: frozenset[str] = frozenset()

    @property
    def is_request(self) -> bool:
        return self.kind == "request"


class WindowState:
    """What memory already holds (previous observations, notes made so far in this
    window), so that a name the user mentioned before is not news."""

    def __init__(self, previous: Sequence[str]) -> None:
        self._known: list[str] = [text.lower() for text in previous]
        self._joined: str | None = None

    def remember(self, text: str) -> None:
        self._known.append(text.lower())
        self._joined = None

    def fresh_names(self, sentence: str) -> list[str]:
        names = names_in(sentence)
        if not names:
            return []
        if self._joined is None:
            self._joined = "\n".join(self._known)
        return [n for n in names if n.lower() not in self._joined]


def _introduces_someone(sentence: Sentence) -> bool:
    """A cheap test before the introduction pattern: most sentences name nobody."""
    words = sentence.words
    return "name" in words or "call" in words or sentence.lower.startswith(("i'm ", "i am "))


FIRST_PERSON = _wordset("i i'm i've i'll i'd me my mine we we're our us")
_ABOUT_THE_LISTENER = re.compile(r"^(?:you|you're|you've|you'll|you'd|your)\b")
_OPINION = re.compile(
    r"^(?:i\s+(?:think|believe|guess|suppose)(?!\s+(?:i|i'll|i'm|i'd|my|we)\b)|"
    r"(?:it|that|this)?\s*sounds?)\b"
)


def _is_small_talk_statement(sentence: Sentence) -> bool:
    """ "You are a smart companion", "I think that's a great way to relax", "That sounds
    difficult": remarks about the assistant or the advice, not about the user."""
    if _ABOUT_THE_LISTENER.match(sentence.lower):
        # "You can watch "Home Cooking" on CCTV" passes on names worth keeping.
        return FIRST_PERSON.isdisjoint(sentence.words) and not names_in(sentence.text)
    if _OPINION.match(sentence.lower):
        return "my" not in sentence.words
    return False


def _is_request(sentence: Sentence) -> bool:
    if sentence.is_question:
        return not SMALL_TALK_QUESTION.found(sentence) or "recommend" in sentence.lower
    first_word = sentence.lower.split(None, 1)[0] if sentence.lower else ""
    return EXPLICIT_REQUEST.found(sentence) or first_word in IMPERATIVE_VERBS


def _is_negated(sentence: Sentence) -> bool:
    return not NEGATION_WORDS.isdisjoint(sentence.words) or "no longer" in sentence.lower


# Any fixed moment will do: the question is only whether a date expression resolves.
_PROBE_ANCHOR = datetime(2000, 1, 3, tzinfo=UTC)


def _has_date(sentence: Sentence) -> bool:
    if DATE_WORDS.isdisjoint(sentence.words) and not sentence.has_digit:
        return False
    return bool(find_dates(sentence.text, anchor=_PROBE_ANCHOR))


def classify(sentence: Sentence, role: str, state: WindowState) -> tuple[str, str] | None:
    """(kind, priority) of a sentence worth keeping, or None to drop it."""
    if role == "assistant":
        return _classify_assistant(sentence, state)
    if _introduces_someone(sentence) and _INTRODUCTION.search(sentence.text):
        return "introduction", MEDIUM
    if _is_small_talk_statement(sentence):
        return None
    if sentence.is_question:
        if _is_request(sentence):
            return "request", LOW
        # "Do you know that I like photography?" still tells something about the user.
        if FIRST_PERSON.isdisjoint(sentence.words) or not PREFERENCE.found(sentence):
            return None
        return "preference", MEDIUM
    completed = COMPLETION.found(sentence)
    negated = _is_negated(sentence)
    if completed and not negated and not PLAN.found(sentence):
        return "completed", COMPLETED
    if PROBLEM.found(sentence) or URGENT.found(sentence) or (completed and negated):
        return "problem", HIGH
    if _is_request(sentence):
        return "request", LOW  # raised to high later if nothing in the window answers it
    if META_TALK.found(sentence):
        return None
    if PREFERENCE.found(sentence):
        return "preference", MEDIUM
    if IDENTITY.found(sentence) or HABIT.found(sentence):
        return "fact", MEDIUM
    if PLAN.found(sentence):
        # "I'll check those out": agreeing to advice, not a plan anyone needs to recall.
        return None if ACKNOWLEDGED_ADVICE.found(sentence) else ("plan", MEDIUM)
    if EVENT.found(sentence):
        return "event", LOW
    if (sentence.has_digit and _SPECIFIC_NUMBER.search(sentence.text)) or state.fresh_names(
        sentence.text
    ):
        return "fact", LOW
    return None


def _classify_assistant(sentence: Sentence, state: WindowState) -> tuple[str, str] | None:
    if sentence.is_question:
        return None
    specific = bool(_MONEY_OR_REFERENCE.search(sentence.text)) or _has_date(sentence)
    concrete = CONCRETE_ACTION.found(sentence) and not _VAGUE_OBJECT.search(sentence.lower)
    if COMMITMENT.found(sentence) and (concrete or specific):
        return "commitment", HIGH
    done = COMPLETION.found(sentence) and not _is_negated(sentence)
    if done and (specific or "your" in sentence.words):
        return "completed", COMPLETED
    if RECOMMENDATION.found(sentence) and state.fresh_names(sentence.text):
        return "recommendation", LOW
    if _QUOTED.search(sentence.text) and state.fresh_names(sentence.text):
        return "recommendation", LOW
    if _MONEY_OR_REFERENCE.search(sentence.text):
        return "fact", LOW  # money and reference numbers the user may need later
    return None


def _trim_long(sentence: Sentence, role: str, state: WindowState) -> Sentence:
    """Keep only the clauses of a long sentence that carry a signal of their own."""
    if len(sentence.words) <= TRIM_CLAUSES_FROM_WORDS:
        return sentence
    parts = [p.strip(" ,;") for p in _CLAUSE_SPLIT.split(sentence.text) if p.strip(" ,;")]
    kept = [p for i, p in enumerate(parts) if i == 0 or classify(Sentence.of(p), role, state)]
    return Sentence.of(shorten("; ".join(kept), MAX_SENTENCE_WORDS))


def _commitment_clause(text: str) -> str:
    """ "Please confirm the order and I'll send it off" -> the part with the promise."""
    parts = re.split(r",\s*|\s+and\s+|;\s*", text)
    promised = [p for p in parts if COMMITMENT.found(Sentence.of(p))]
    return promised[0] if promised else text


_REQUEST_FOR = re.compile(
    r"\b(?:any|some)\s+(?:good\s+|other\s+|more\s+)?([\w\s-]{1,40}?)\s*"
    r"(recommendations?|suggestions?|tips|advice|ideas)\b",
    re.IGNORECASE,
)
_ASK_TO = re.compile(r"^(?:can|could|would|will)\s+you\s+(?:please\s+)?(.+)$", re.IGNORECASE)
_ASK_FOR_ITEM = re.compile(
    r"^(?:(?:can|could|may)\s+(?:i|we)\s+(?:please\s+)?(?:get|have|order|grab|buy)|"
    r"i(?:'d|\s+would)\s+(?:like|love)(?:\s+to\s+(?:get|have|order|grab|buy)|(?!\s+to\b))|"
    r"i\s+(?:need|want)(?!\s+to\b)|(?:do|does)\s+you\s+(?:have|know|sell)\s+(?:any|some))"
    r"\s+(.+)$",
    re.IGNORECASE,
)
_PLEASE = re.compile(r"\bplease\b,?\s*", re.IGNORECASE)


def _rewrite_request(text: str, role: str) -> str:
    speaker, _ = speaker_names(role)
    body = _PLEASE.sub("", text.rstrip(" ?.!")).strip(" ,")
    wanted = _REQUEST_FOR.search(body)
    if wanted:
        topic = " ".join(f"{wanted.group(1)} {wanted.group(2)}".split())
        return f"{speaker} asked for {third_person(topic, role)}"
    item = _ASK_FOR_ITEM.match(body)
    if item:
        verb = "asked for" if body.lower().startswith(("do ", "does ")) else "requested"
        return f"{speaker} {verb} {third_person(item.group(1), role)}"
    ask = _ASK_TO.match(body)
    if ask:
        return f"{speaker} asked Assistant to {third_person(ask.group(1), role)}"
    rewritten = third_person(body, role)
    if rewritten.startswith(speaker):
        return rewritten
    first_word = body.lower().split(None, 1)[0] if body else ""
    if first_word in IMPERATIVE_VERBS:
        return f"{speaker} asked to {_lower_first(rewritten)}"
    if text.rstrip().endswith("?"):
        return f"{speaker} asked {_lower_first(rewritten)}"
    return f"{speaker} requested {_lower_first(rewritten)}"


def _rewrite_recommendation(text: str, state: WindowState) -> str:
    quoted = {a or b for a, b in _QUOTED.findall(text)}
    names = list(dict.fromkeys(state.fresh_names(text)))
    listed = ", ".join(f'"{n}"' if n in quoted else n for n in names)
    return f"Assistant recommended {listed}"


def _rewrite_statement(text: str, role: str) -> str:
    speaker, _ = speaker_names(role)
    rewritten = third_person(text.rstrip(" .!"), role)
    if rewritten.startswith(speaker):
        return rewritten
    return f"{speaker} said {_lower_first(rewritten)}"


def rewrite(text: str, kind: str, role: str, state: WindowState) -> str:
    text = FILLER_WORDS.sub("", text)
    introduction = _INTRODUCTION.search(text) if kind == "introduction" else None
    if kind == "introduction" and introduction:
        return f"{speaker_names(role)[0]}'s name is {introduction.group(1)}"
    if kind == "request":
        return _rewrite_request(text, role)
    if kind == "recommendation":
        return _rewrite_recommendation(text, state)
    if kind == "commitment":
        return _rewrite_statement(_commitment_clause(text), role)
    return _rewrite_statement(text, role)


_ABSOLUTE_DATE = re.compile(
    r"\d{4}|\d{1,2}/\d{1,2}|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d",
    re.IGNORECASE,
)
_PERIOD_UNIT = re.compile(r"\b(?:weekend|week|month|year)\b", re.IGNORECASE)
_ENDS_WITH_PREPOSITION = re.compile(
    r"\b(?:on|by|until|till|before|after|since|from|for|at|of|during|through|to)\s*$", re.I
)


def _absolute_dates(sentence: Sentence, message: SourceMessage) -> tuple[str, datetime | None]:
    """The sentence with relative dates made absolute, and the first date it names.

    A note is read days later, when "yesterday" means something else: "yesterday" becomes
    "on Apr 27", "next week" "the week of May 4". Words for the message's own day
    ("today") are dropped where the sentence reads the same without them; the observation
    is dated that day anyway."""
    if DATE_WORDS.isdisjoint(sentence.words) and not sentence.has_digit:
        return sentence.text, None
    mentions = find_dates(sentence.text, anchor=message.created_at)
    if not mentions:
        return sentence.text, None
    text = sentence.text
    for mention in reversed(mentions):
        if _ABSOLUTE_DATE.search(mention.text):
            continue
        before = text[: mention.start]
        phrase = _absolute_phrase(mention, message, before)
        text = before + phrase + text[mention.end :]
    return " ".join(text.split()).replace(" ,", ",").replace(" .", "."), mentions[0].value


def _absolute_phrase(mention: DateMention, message: SourceMessage, before: str) -> str:
    day = mention.value.date()
    label = f"{day:%b} {day.day}"
    unit = _PERIOD_UNIT.search(mention.text)
    if unit and unit.group(0).lower() == "year":
        return f"in {day.year}"
    if unit and unit.group(0).lower() == "month":
        return f"in {day:%B}"
    if unit:
        return f"the {unit.group(0).lower()} of {label}"
    if not before.strip():
        return label  # "Tomorrow is my birthday" -> "Apr 28 is my birthday"
    if day == message.created_at.date():
        return ""
    if _ENDS_WITH_PREPOSITION.search(before):
        return label  # "by tomorrow" -> "by Apr 28", not "by on Apr 28"
    if mention.text.lower().startswith("within"):
        return f"by {label}"  # a deadline: "within 5 business days" -> "by Feb 17"
    return f"on {label}"


def _is_vague(text: str, kind: str) -> bool:
    tokens = content_tokens(text) - VAGUE_WORDS
    if kind == "request":
        tokens -= {"requested"}
    return not tokens


def _split_question(text: str) -> list[str]:
    """ "I'm struggling with Chinese, can you help?" holds a fact and a question; each is
    judged on its own."""
    cut = text.rfind(", ")
    if not text.endswith("?") or cut < 0 or len(text[:cut].split()) < 3:
        return [text]
    tail = text[cut + 2 :]
    return [text[:cut] + ".", tail[:1].upper() + tail[1:]]


def _clause(text: str, message: SourceMessage, state: WindowState) -> Clause | None:
    sentence = _trim_long(Sentence.of(text), message.role, state)
    verdict = classify(sentence, message.role, state)
    if verdict is None:
        return None
    kind, priority = verdict
    dated_text, referenced_at = _absolute_dates(sentence, message)
    rewritten = rewrite(dated_text, kind, message.role, state)
    if _is_vague(rewritten, kind):
        return None
    state.remember(rewritten)
    return Clause(
        text=rewritten,
        priority=priority,
        kind=kind,
        message=message,
        referenced_at=referenced_at,
        tokens=content_tokens(rewritten),
    )


_ASSISTANT_CUE = re.compile(
    r"\b(?:"
    + "|".join(sorted(COMMITMENT.gate | COMPLETION.gate | RECOMMENDATION.gate, key=len)[::-1])
    + r")\b"
)


def _assistant_may_matter(content: str) -> bool:
    """Most assistant turns advise or ask; only promises, completed actions, money,
    references and names are kept, and a turn with none of their cues is skipped whole."""
    if _ASSISTANT_CUE.search(content.lower()):
        return True
    return bool(_QUOTED.search(content) or _MONEY_OR_REFERENCE.search(content))


def message_clauses(message: SourceMessage, state: WindowState) -> list[Clause]:
    """The sentences of one conversational message worth keeping, rewritten."""
    clauses: list[Clause] = []
    if message.role == "assistant" and not _assistant_may_matter(message.content):
        return clauses
    for raw in split_sentences(message.content):
        cleaned = clean_sentence(raw)
        if cleaned is None:
            continue
        for part in _split_question(cleaned):
            clause = _clause(part, message, state)
            if clause is not None:
                clauses.append(clause)
    return _cap_clauses(clauses)


def _cap_clauses(clauses: list[Clause]) -> list[Clause]:
    if len(clauses) <= MAX_CLAUSES_PER_MESSAGE:
        return clauses
    ranked = sorted(range(len(clauses)), key=lambda i: (-PRIORITY_STRENGTH[clauses[i].priority], i))
    keep = sorted(ranked[:MAX_CLAUSES_PER_MESSAGE])
    return [clauses[i] for i in keep]


# --------------------------------------------------------------------------- tool output

_ID_KEY = re.compile(r"(?:^|_)(?:id|uuid|number|no|ref|reference|code|sku|tracking\w*)$|Id$", re.I)
_NAME_KEY = re.compile(
    r"(?:^|_)(?:name|title|label|description|type|category|option|item|product|plan|"
    r"method|carrier|city|country|email|phone|notes?|comments?|instructions)$",
    re.IGNORECASE,
)
_AMOUNT_KEY = re.compile(
    r"(?:^|_)(?:price|amount|total|cost|fee|balance|quantity|qty|count|size|currency|"
    r"discount|tax|refund|credit|points|rating|score)$",
    re.IGNORECASE,
)
_DATE_KEY = re.compile(
    r"(?:^|_)(?:date|time|at|on|eta|due|deadline|created|updated|expires|expiry|start|end)$",
    re.IGNORECASE,
)
_STATUS_KEY = re.compile(
    r"^(?:status|state|success|ok|result|outcome|error|errors|message|reason)$", re.I
)
_PAIR_LABEL_KEYS = ("attribute_name", "name", "label", "key", "field", "title")
_PAIR_VALUE_KEYS = ("option", "options", "value", "values", "selected", "choice")
_DONE_STATUS = re.compile(
    r"^(?:delivered|completed?|done|closed|resolved|refunded|paid|cancell?ed|"
    r"succeeded|success|approved|fulfilled|finished|confirmed)$",
    re.IGNORECASE,
)
_FAILED_STATUS = re.compile(r"^(?:fail\w*|error|declined|rejected|denied|timeout|timed.out)$", re.I)
_FINISHING_TOOL = re.compile(
    r"(?:finish|complete|submit|confirm|place|cancel|refund|pay|send|book|close|checkout)", re.I
)
_ERROR_LINE = re.compile(
    r"\b(?:error|exception|fail\w*|fatal|traceback|denied|timeout|refused)\b", re.I
)
_KEY_VALUE_LINE = re.compile(r"^\s*([A-Za-z][\w .-]{0,30}?)\s*[:=]\s*(\S.{0,60})$")
_DIGITS = re.compile(r"\d+")


@dataclass
class ToolFold:
    """One tool call as one line, with the values it shows and every value it saw."""

    text: str
    priority: str
    shown: frozenset[str]
    options: frozenset[str]
    all_values: frozenset[str]
    primary_id: str | None
    referenced_at: datetime | None

    @property
    def tokens(self) -> frozenset[str]:
        return content_tokens(self.text)

    @property
    def visible_values(self) -> frozenset[str]:
        return self.all_values | self.shown


@dataclass
class _JsonScan:
    items: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)
    options: set[str] = field(default_factory=set)
    all_values: set[str] = field(default_factory=set)
    ids: list[str] = field(default_factory=list)
    dates: list[str] = field(default_factory=list)
    status: list[str] = field(default_factory=list)
    failed: bool = False
    succeeded: bool = False
    leaves: int = 0

    def add(self, item: str, *values: str) -> None:
        if len(self.items) >= MAX_TOOL_ITEMS or item in self.items:
            return
        self.items.append(item)
        self.shown.update(comparable(v) for v in values if v)


def _scalar_text(value: Any) -> str:
    return " ".join(str(value).split())


def comparable(value: str) -> str:
    """ "Sugar-Free Vanilla" and "sugar free vanilla" are the same value."""
    return " ".join(value.lower().replace("-", " ").replace("_", " ").split())


def _humanise_key(key: str) -> str:
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key)
    key = re.sub(r"(?:^|_)(?:id|uuid|number|no)$", "", key, flags=re.IGNORECASE) or key
    return key.replace("_", " ").replace("-", " ").strip().lower()


def _collect_values(node: Any, scan: _JsonScan) -> None:
    """Every scalar of the payload, so that a later line can show it covers this one."""
    stack = [node]
    while stack and scan.leaves < MAX_JSON_LEAVES:
        current = stack.pop()
        if isinstance(current, dict):
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
        elif current is not None and not isinstance(current, bool):
            scan.leaves += 1
            scan.all_values.add(comparable(_scalar_text(current)))


TOGGLE_ON = _wordset("add added yes true on selected included")
TOGGLE_OFF = _wordset("no none false off remove removed excluded")
_SLUG_SUFFIX = re.compile(r"[-_]\d+$")


def _pair_label(node: dict[str, Any]) -> tuple[str, bool] | None:
    """The name of a {name: ..., option: ...} pair, or failing that its slug id
    ("sugar-free-vanilla-568" -> "sugar free vanilla"), and whether it is a slug."""
    for key in _PAIR_LABEL_KEYS:
        if isinstance(node.get(key), str):
            return _scalar_text(node[key]), False
    for key, value in node.items():
        if _ID_KEY.search(key) and isinstance(value, str) and "-" in value:
            return comparable(_SLUG_SUFFIX.sub("", value)), True
    return None


def _scan_pair(node: dict[str, Any], scan: _JsonScan) -> bool:
    """{"attribute_name": "Milk", "options": [...]} reads best as "Milk: Oat Milk, ...";
    an add-on switched on reads best as its name alone."""
    value_key = next((k for k in _PAIR_VALUE_KEYS if k in node), None)
    labelled = _pair_label(node) if value_key else None
    if labelled is None or value_key is None:
        return False
    label, from_slug = labelled
    raw = node[value_key]
    values = [_scalar_text(v) for v in (raw if isinstance(raw, list) else [raw])]
    values = [v for v in values if v]
    if not values:
        return False
    toggles = {comparable(v) for v in values}
    if toggles <= TOGGLE_ON | TOGGLE_OFF:
        if isinstance(raw, list):  # an add-on on offer
            scan.add(label, label)
            scan.options.update({comparable(label)})
        elif toggles <= TOGGLE_ON:  # an add-on chosen
            scan.add(label, label)
        return True
    if isinstance(raw, list):
        shown = values[:MAX_LIST_ITEMS]
        more = f" +{len(values) - len(shown)} more" if len(values) > len(shown) else ""
        scan.add(f"{label}: {', '.join(shown)}{more}", *shown)
        scan.options.update(comparable(v) for v in shown)
    elif from_slug:
        scan.add(values[0], values[0])  # "milk options: Oat Milk" says no more than "Oat Milk"
    else:
        scan.add(f"{label}: {values[0]}", values[0])
    return True


def _scan_scalar(key: str, value: Any, depth: int, scan: _JsonScan) -> None:
    if isinstance(value, bool):
        if key.lower() in ("success", "ok"):
            scan.succeeded = scan.succeeded or value
            scan.failed = scan.failed or not value
            scan.status.append("success" if value else "failed")
        return
    text = _scalar_text(value) if value is not None else ""
    if not text:
        return
    if _STATUS_KEY.match(key):
        if key.lower() in ("error", "errors"):
            scan.failed = True
            scan.add(f"error {shorten(text, 12)}", text)
            return
        scan.failed = scan.failed or bool(_FAILED_STATUS.match(text))
        scan.succeeded = scan.succeeded or bool(_DONE_STATUS.match(text))
        scan.status.append(text)
        scan.add(f"{key.lower()} {shorten(text, 12)}", text)
    elif _ID_KEY.search(key):
        if depth <= 1 and len(scan.ids) < 3:
            scan.ids.append(text)
            scan.add(f"{_humanise_key(key)} {text}", text)
    elif _DATE_KEY.search(key):
        scan.dates.append(text)
        scan.add(f"{_humanise_key(key)} {text}", text)
    elif _AMOUNT_KEY.search(key):
        scan.add(f"{_humanise_key(key)} {text}", text)
    elif _NAME_KEY.search(key):
        scan.add(shorten(text, 12), text)
    elif depth == 0 and len(text) <= 40:
        scan.add(f"{_humanise_key(key)} {text}", text)


def _scan_json(node: Any, scan: _JsonScan, depth: int = 0, key: str = "") -> None:
    if scan.leaves >= MAX_JSON_LEAVES or len(scan.items) >= MAX_TOOL_ITEMS:
        return
    if isinstance(node, list):
        _scan_list(node, scan, depth, key)
        return
    if not isinstance(node, dict):
        scan.add(shorten(_scalar_text(node), 12), _scalar_text(node))
        return
    if _scan_pair(node, scan):
        return
    has_name = any(_NAME_KEY.search(k) for k in node)
    for key, value in node.items():
        if isinstance(value, dict | list):
            continue
        if has_name and depth > 1 and _ID_KEY.search(key):
            continue  # a nested item's internal id next to its name is noise
        _scan_scalar(key, value, depth, scan)
    for key, value in node.items():
        if isinstance(value, dict | list):
            _scan_json(value, scan, depth + 1, key)


def _scan_list(node: list[Any], scan: _JsonScan, depth: int, key: str) -> None:
    scalars = [v for v in node if not isinstance(v, dict | list)]
    if scalars:
        shown = [_scalar_text(v) for v in scalars[:MAX_LIST_ITEMS]]
        more = f" +{len(scalars) - len(shown)} more" if len(scalars) > len(shown) else ""
        scan.add(", ".join(shown) + more, *shown)
    records = [v for v in node if isinstance(v, dict)]
    if len(records) > MAX_LIST_ITEMS:
        _scan_many_records(records, scan, key)
        return
    for child in node[:MAX_LIST_ITEMS]:
        if isinstance(child, dict | list):
            _scan_json(child, scan, depth + 1)


def _scan_many_records(records: list[dict[str, Any]], scan: _JsonScan, key: str) -> None:
    """A long list of records: how many, the first one in full, how their states spread."""
    scan.add(f"{len(records)} {_humanise_key(key) or 'records'}")
    _scan_json(records[0], scan, depth=1)  # shown like a top-level object, id included
    sample = records[:MAX_JSON_LEAVES]
    for field_name, value in records[0].items():
        if not (_STATUS_KEY.match(field_name) and isinstance(value, str)):
            continue
        spread = Counter(str(r.get(field_name)) for r in sample)
        if len(spread) > 1:
            counts = ", ".join(f"{state} {count}" for state, count in spread.most_common(3))
            scan.add(f"{field_name}: {counts}")


def _json_fold(tool: str, payload: Any, message: SourceMessage) -> ToolFold:
    scan = _JsonScan()
    _scan_json(payload, scan)
    _collect_values(payload, scan)
    if scan.failed:
        priority = HIGH
    elif scan.succeeded and (_FINISHING_TOOL.search(tool) or scan.status != ["success"]):
        priority = COMPLETED
    elif scan.ids:
        priority = MEDIUM
    else:
        priority = LOW
    items = scan.items or ["no data"]
    if scan.status == ["success"] or scan.status == ["failed"]:
        items = [*items, scan.status[0]] if scan.items else [scan.status[0]]
    referenced_at = None
    for raw_date in scan.dates:
        mentions = find_dates(raw_date, anchor=message.created_at)
        if mentions:
            referenced_at = mentions[0].value
            break
    return ToolFold(
        text=f"Tool {tool}: {', '.join(items)}",
        priority=priority,
        shown=frozenset(scan.shown),
        options=frozenset(scan.options),
        all_values=frozenset(scan.all_values),
        primary_id=scan.ids[0] if scan.ids else None,
        referenced_at=referenced_at,
    )


def _short_text_fold(tool: str, content: str, message: SourceMessage) -> ToolFold:
    """A short plain-text result is its own summary."""
    text = "; ".join(line.strip() for line in content.splitlines() if line.strip()) or "no output"
    sentence = Sentence.of(text)
    if _ERROR_LINE.search(text):
        priority = HIGH
    elif COMPLETION.found(sentence) and not _is_negated(sentence):
        priority = COMPLETED
    else:
        priority = LOW
    mentions = find_dates(text, anchor=message.created_at) if _has_date(sentence) else []
    values = frozenset([comparable(text)])
    return ToolFold(
        text=f"Tool {tool}: {text}",
        priority=priority,
        shown=values,
        options=frozenset(),
        all_values=values,
        primary_id=None,
        referenced_at=mentions[0].value if mentions else None,
    )


def _text_fold(tool: str, content: str) -> ToolFold:
    """Plain-text output (logs, listings): counts, error lines, salient key: value lines."""
    lines = [line.strip() for line in content.splitlines()[:MAX_TEXT_LINES] if line.strip()]
    repeats: Counter[str] = Counter()
    first_example: dict[str, str] = {}
    for line in lines:
        pattern = _DIGITS.sub("#", line)
        repeats[pattern] += 1
        first_example.setdefault(pattern, line)
    errors: list[str] = []
    pairs: list[str] = []
    for pattern, example in first_example.items():
        if _ERROR_LINE.search(example):
            if len(errors) < 2:
                count = f" (x{repeats[pattern]})" if repeats[pattern] > 1 else ""
                errors.append(f"{shorten(example, 15)}{count}")
        elif len(pairs) < 6 and (pair := _KEY_VALUE_LINE.match(example)):
            key, value = pair.group(1).strip(), pair.group(2).strip()
            if _is_salient_key(key):
                pairs.append(f"{key.lower()} {value}")
    summary = [f"{len(lines)} lines ({len(repeats)} distinct)", shorten(lines[0], 15), *pairs]
    if errors:
        summary.append("errors: " + "; ".join(errors))
    values = frozenset(s.lower() for s in pairs)
    return ToolFold(
        text=f"Tool {tool}: " + ", ".join(summary),
        priority=HIGH if errors else LOW,
        shown=values,
        options=frozenset(),
        all_values=values,
        primary_id=None,
        referenced_at=None,
    )


def _is_salient_key(key: str) -> bool:
    patterns = (_ID_KEY, _STATUS_KEY, _AMOUNT_KEY, _DATE_KEY, _NAME_KEY)
    return any(p.search(key.strip()) for p in patterns)


def fold_tool_output(message: SourceMessage) -> ToolFold:
    tool = message.tool_name or "call"
    content = message.content.strip()
    if content[:1] in ("{", "["):
        try:
            payload = json.loads(content)
        except ValueError:
            payload = None
        if payload is not None:
            return _json_fold(tool, payload, message)
    if len(content.split()) <= SHORT_TOOL_TEXT_WORDS:
        return _short_text_fold(tool, content, message)
    return _text_fold(tool, content)


# --------------------------------------------------------------------------- window notes


@dataclass
class Note:
    """A future observation: text, priority and the messages it came from."""

    text: str
    priority: str
    messages: dict[str, SourceMessage]  # by id; put in seq order when drafted
    referenced_at: datetime | None
    kind: str
    tool: str = ""
    fold: ToolFold | None = None
    first_seq: int = field(init=False)
    last_seq: int = field(init=False)

    def __post_init__(self) -> None:
        self.first_seq = min(m.seq for m in self.messages.values())
        self.last_seq = max(m.seq for m in self.messages.values())

    @classmethod
    def of(cls, message: SourceMessage, **fields: Any) -> Note:
        return cls(messages={message.id: message}, **fields)

    def absorb(self, other: Note) -> None:
        # The smaller set goes into the larger one: a tool polled a thousand times for the
        # same object stays linear.
        small, large = sorted((self.messages, other.messages), key=len)
        large.update(small)
        self.messages = large
        self.first_seq = min(self.first_seq, other.first_seq)
        self.last_seq = max(self.last_seq, other.last_seq)
        self.referenced_at = self.referenced_at or other.referenced_at

    def absorb_message(self, message: SourceMessage) -> None:
        self.messages[message.id] = message
        self.first_seq = min(self.first_seq, message.seq)
        self.last_seq = max(self.last_seq, message.seq)

    @property
    def source_message_ids(self) -> list[str]:
        return [m.id for m in sorted(self.messages.values(), key=lambda m: m.seq)]


def _tool_note(message: SourceMessage) -> Note:
    fold = fold_tool_output(message)
    return Note.of(
        message,
        text=fold.text,
        priority=fold.priority,
        referenced_at=fold.referenced_at,
        kind="tool",
        tool=message.tool_name or "call",
        fold=fold,
    )


def _replace_earlier_states(notes: list[Note]) -> set[int]:
    """The same tool reporting on the same object again: only the latest state counts."""
    replaced: set[int] = set()
    latest: dict[tuple[str, str], Note] = {}
    for note in notes:
        if note.fold is None or note.fold.primary_id is None or note.priority == HIGH:
            continue
        key = (note.tool, note.fold.primary_id)
        if key in latest:
            note.absorb(latest[key])
            replaced.add(id(latest[key]))
        latest[key] = note
    return replaced


def _covering_note(note: Note, holders: dict[str, list[Note]], dropped: set[int]) -> Note | None:
    """Another line of the window that already shows everything this one shows, or that
    shows the option picked from the list this one offered. ``holders`` maps a value to
    the lines holding it, so that a window of a thousand calls is not searched a thousand
    times over."""
    assert note.fold is not None
    shown = note.fold.shown - {"success"}
    if shown:
        rarest = min(shown, key=lambda value: (len(holders[value]), value))
        for other in reversed(holders[rarest]):
            if other is note or id(other) in dropped or other.fold is None:
                continue
            values = other.fold.visible_values
            if shown <= values and len(values) > len(shown):
                return other
    if note.fold.options:
        offered = sorted(note.fold.options)
        choosers = {id(o): o for value in offered for o in holders[value] if o is not note}
        later = [
            o for o in choosers.values() if id(o) not in dropped and o.last_seq > note.first_seq
        ]
        if later:
            return max(later, key=lambda o: (o.last_seq, o.first_seq))
    return None


def _attach_bare_success(notes: list[Note], dropped: set[int]) -> None:
    """ "Tool finish_order: success" names no object; when the window touched exactly one
    object, the success is that object's, and its line becomes a completed one."""
    live = [n for n in notes if id(n) not in dropped and n.fold is not None]
    objects = [n for n in live if n.fold is not None and n.fold.primary_id]
    if len(objects) != 1:
        return
    target = objects[0]
    for note in live:
        fold = note.fold
        bare = fold is not None and fold.primary_id is None and fold.shown <= {"success"}
        if bare and note.priority == COMPLETED and note.last_seq > target.first_seq:
            target.text = f"{target.text}; {note.tool}: success"
            target.priority = COMPLETED
            target.absorb(note)
            dropped.add(id(note))


def fold_tool_notes(notes: list[Note]) -> list[Note]:
    """One line per call, then: a later state of the same object replaces the earlier one,
    and a line that another line of the window covers is folded into it."""
    tool_notes = [n for n in notes if n.fold is not None]
    dropped = _replace_earlier_states(tool_notes)
    live = [n for n in tool_notes if id(n) not in dropped]
    holders: dict[str, list[Note]] = defaultdict(list)
    for note in live:
        assert note.fold is not None
        for value in note.fold.visible_values:
            holders[value].append(note)
    for note in live:
        if note.priority in (HIGH, COMPLETED):
            continue
        covering = _covering_note(note, holders, dropped)
        if covering is not None:
            covering.absorb(note)
            dropped.add(id(note))
    _attach_bare_success(tool_notes, dropped)
    return [n for n in notes if id(n) not in dropped]


def fold_fulfilled_requests(
    clauses: list[Clause], tool_notes: list[Note], messages: Sequence[SourceMessage]
) -> list[Clause]:
    """ "User requested an oat milk latte" next to the tool line of the order that holds
    "Latte, Oat Milk": the request was carried out and the line says it all. Only the
    tool lines between the request and the user's next turn are candidates."""
    user_turns = sorted(m.seq for m in messages if m.role == "user")
    by_end = sorted((n for n in tool_notes if n.fold is not None), key=lambda n: n.last_seq)
    ends = [n.last_seq for n in by_end]
    kept = []
    for clause in clauses:
        wanted = clause.tokens - VAGUE_WORDS - {"requested", "asked"}
        fulfilled = None
        if clause.is_request and clause.priority == LOW and wanted:
            seq = clause.message.seq
            next_turn = next((s for s in user_turns[bisect_right(user_turns, seq) :]), None)
            for note in by_end[bisect_right(ends, seq) :]:
                if next_turn is not None and note.first_seq > next_turn:
                    break  # later lines answer later turns
                assert note.fold is not None
                shown = note.fold.tokens
                if quantities_in(wanted) <= shown and len(wanted & shown) * 3 >= len(wanted) * 2:
                    fulfilled = note
                    break
        if fulfilled is None:
            kept.append(clause)
        else:
            fulfilled.absorb_message(clause.message)
            fulfilled.referenced_at = fulfilled.referenced_at or clause.referenced_at
    return kept


QUANTITY_WORDS = _wordset("two three four five six seven eight nine ten eleven twelve dozen")


def quantities_in(tokens: frozenset[str]) -> frozenset[str]:
    """ "two lattes": a line that does not say "two" did not say it all."""
    return numbers_in(tokens) | (tokens & QUANTITY_WORDS)


def group_clauses(clauses: list[Clause]) -> list[Note]:
    """One note per message and priority: "User likes tea; lives in Oslo"."""
    notes: list[Note] = []
    by_key: dict[tuple[str, str], Note] = {}
    for clause in clauses:
        key = (clause.message.id, clause.priority)
        note = by_key.get(key)
        if note is None:
            note = Note.of(
                clause.message,
                text=clause.text,
                priority=clause.priority,
                referenced_at=clause.referenced_at,
                kind=clause.kind,
            )
            by_key[key] = note
            notes.append(note)
            continue
        speaker, _ = speaker_names(clause.message.role)
        continuation = clause.text
        if continuation.startswith(f"{speaker} ") and note.text.startswith(f"{speaker} "):
            continuation = continuation[len(speaker) + 1 :]
        note.text = f"{note.text}; {continuation}"
        note.referenced_at = note.referenced_at or clause.referenced_at
    return notes


class KnownFacts:
    """Token sets of what memory already says, indexed for quick near-duplicate tests."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._sizes: list[int] = []
        self._numbers: list[frozenset[str]] = []
        self._index: dict[str, list[int]] = defaultdict(list)
        for text in texts:
            self.add(content_tokens(text))

    def add(self, tokens: frozenset[str]) -> None:
        if not tokens:
            return
        position = len(self._sizes)
        self._sizes.append(len(tokens))
        self._numbers.append(_cached_numbers(tokens))
        for token in tokens:
            self._index[token].append(position)

    def knows(self, tokens: frozenset[str], *, contained_counts: bool = True) -> bool:
        """Is there a known note that nearly equals these tokens, or (``contained_counts``)
        contains them all?"""
        if not tokens:
            return False
        shared: Counter[int] = Counter()
        for token in tokens:
            shared.update(self._index.get(token, ()))
        new_numbers = numbers_in(tokens)
        for position, count in shared.items():
            contained = contained_counts and count == len(tokens) >= 2
            similar = count / (len(tokens) + self._sizes[position] - count) >= KNOWN_SIMILARITY
            if (contained or similar) and not new_numbers - self._numbers[position]:
                return True  # a new number would have been a new fact
        return False


_EXCLUSIVE_CHOICE = re.compile(
    r"\b(?:prefer\w*|rather|favou?rite|instead|switch\w*|chose|choose\w*)\b"
)


def _drop_known_clauses(clauses: list[Clause], known: KnownFacts) -> list[Clause]:
    kept = []
    for clause in clauses:
        # A dated event that happens again is news, even in the same words; a request is
        # a new request.
        repeatable = clause.referenced_at is not None or clause.is_request
        # "User prefers SMS" is inside "User prefers email over SMS" and says the opposite.
        plain = _EXCLUSIVE_CHOICE.search(clause.text) is None
        if not repeatable and known.knows(clause.tokens, contained_counts=plain):
            continue
        known.add(clause.tokens)
        kept.append(clause)
    return kept


def _drop_known_tool_notes(notes: list[Note], previous: Sequence[str]) -> list[Note]:
    """A tool line identical to an earlier observation, object id included, says nothing
    new. A line without an id ("Tool finish_order: success") may concern another object."""
    seen = set(previous)
    kept = []
    for note in notes:
        if note.fold is not None and note.fold.primary_id and note.text in seen:
            continue
        seen.add(note.text)
        kept.append(note)
    return kept


def _raise_unanswered_requests(clauses: list[Clause], messages: Sequence[SourceMessage]) -> None:
    """A request that nothing in the window answered is pending: high priority."""
    last_answer = max((m.seq for m in messages if m.role in ("assistant", "tool")), default=-1)
    for clause in clauses:
        if clause.is_request and clause.message.seq > last_answer:
            clause.priority = HIGH


def _current_task(clauses: list[Clause]) -> tuple[str | None, str | None]:
    pending = [c for c in clauses if c.is_request and c.priority == HIGH]
    if pending:
        request = pending[-1].text
        return request, f"Answer the open request: {request}"
    promises = [c for c in clauses if c.kind == "commitment"]
    if promises:
        return None, f"Follow up on: {promises[-1].text}"
    return None, None


def _draft(note: Note, now: datetime) -> DraftObservation:
    return DraftObservation(
        text=note.text,
        priority=note.priority,
        observed_at=now,
        referenced_at=note.referenced_at,
        source_message_ids=note.source_message_ids,
        tags=["tool"] if note.fold is not None else [note.kind],
        topics=[note.tool] if note.tool else [],
    )


# --------------------------------------------------------------------------- reflection


@dataclass
class _Item:
    """An observation on its way into a reflection."""

    order: int
    text: str
    priority: str
    observed_at: datetime
    referenced_at: datetime | None
    ids: dict[str, int]  # observation id -> its place in time, for ordered output
    tokens: frozenset[str]
    numbers: frozenset[str]
    actor: str
    topic: str
    remainder: str
    subject: tuple[str, ...] | None
    alive: bool = True

    @property
    def event_day(self) -> datetime:
        return self.referenced_at or self.observed_at

    def absorb(self, other: _Item) -> None:
        # The smaller set goes into the larger one: a long run of duplicates stays linear.
        small, large = sorted((self.ids, other.ids), key=len)
        large.update(small)
        self.ids = large
        other.ids = {}
        other.alive = False


def _ids_in_order(items: Iterable[_Item]) -> list[str]:
    merged: dict[str, int] = {}
    for item in items:
        merged.update(item.ids)
    return sorted(merged, key=merged.__getitem__)


_ATTRIBUTE = re.compile(
    r"^(?P<actor>User|Assistant|System)'s\s+(?P<attribute>[\w-]+(?:\s+[\w-]+)?)\s+"
    r"(?:is|are|was|were)\s+"
)
_ACTOR_VERB = re.compile(
    r"^(?P<actor>User|Assistant|System)\s+(?:(?:" + "|".join(sorted(ADVERBS)) + r")\s+)*"
    r"(?P<verb>[\w'-]+)\s*"
)
_TOOL_LINE = re.compile(r"^Tool\s+(?P<tool>[\w.:-]+):\s*")
_TOOL_OBJECT = re.compile(r"^[a-z ]{2,20} ([A-Z]*-?\d[\w-]*)")
_CHANGE_MARKER = re.compile(
    r"\b(?:now|no\s+longer|anymore|instead|switched|changed|actually)\b", re.IGNORECASE
)
_EXCLUSIVE_VERB = re.compile(
    r"^(?:prefers?|wants?|needs?|chose|chooses|picked|switched|uses?)$", re.IGNORECASE
)
_POLAR_VERB = re.compile(
    r"^(?:likes?|loves?|enjoys?|prefers?|hates?|dislikes?|doesn't|does|no|is|isn't)$", re.I
)
_TELEGRAPHIC_DROP = _wordset("a an the that which who very really just some quite also so")


def topic_of(text: str) -> tuple[str, str, str, tuple[str, ...] | None]:
    """(actor, topic, remainder, subject) of a note.

    The topic is what a summary line groups by ("User likes", "Tool lookup_order:"); the
    subject names what a later note replaces ("User's email is ...", an order's state)."""
    tool = _TOOL_LINE.match(text)
    if tool:
        rest = text[tool.end() :]
        obj = _TOOL_OBJECT.match(rest)
        subject = ("tool", tool.group("tool"), obj.group(1)) if obj else None
        return "Tool", text[: tool.end()].strip(), rest, subject
    attribute = _ATTRIBUTE.match(text)
    if attribute:
        actor = attribute.group("actor")
        subject = (actor, attribute.group("attribute").lower())
        return actor, text[: attribute.end()].strip(), text[attribute.end() :], subject
    statement = _ACTOR_VERB.match(text)
    if statement:
        actor = statement.group("actor")
        return actor, f"{actor} {statement.group('verb')}", text[statement.end() :], None
    actor = text.split("'", 1)[0] if text.startswith(("User'", "Assistant'")) else ""
    return actor, "", text, None


def _make_items(observations: Sequence[SourceObservation]) -> list[_Item]:
    indexed = sorted(enumerate(observations), key=lambda pair: (pair[1].observed_at, pair[0]))
    items = []
    for order, (_, observation) in enumerate(indexed):
        actor, topic, remainder, subject = topic_of(observation.text)
        tokens = content_tokens(observation.text)
        items.append(
            _Item(
                order=order,
                text=observation.text,
                priority=observation.priority,
                observed_at=observation.observed_at,
                referenced_at=observation.referenced_at,
                ids={observation.id: order},
                tokens=tokens,
                numbers=numbers_in(tokens),
                actor=actor,
                topic=topic,
                remainder=remainder,
                subject=subject,
            )
        )
    return items


def _is_preference_like(item: _Item) -> bool:
    verb = item.topic.split()[-1] if item.topic else ""
    return bool(
        _EXCLUSIVE_VERB.match(verb) or _POLAR_VERB.match(verb) or _CHANGE_MARKER.search(item.text)
    )


def _replaces(later: _Item, earlier: _Item) -> bool:
    """Does a later preference-like statement overturn an earlier one?"""
    if earlier.actor != later.actor:
        return False
    shared = (content_tokens(later.remainder) & content_tokens(earlier.remainder)) - VAGUE_WORDS
    if not shared:
        return False
    flipped = (_NEGATION.search(later.text) is None) != (_NEGATION.search(earlier.text) is None)
    if _CHANGE_MARKER.search(later.text) or flipped:
        return True
    verb = later.topic.split()[-1] if later.topic else ""
    return earlier.topic == later.topic and _EXCLUSIVE_VERB.match(verb) is not None


def supersede(items: list[_Item]) -> None:
    """A later note about the same subject replaces the earlier one: a changed attribute,
    a new state of the same tool object, a changed or reversed preference."""
    latest_by_subject: dict[tuple[str, ...], _Item] = {}
    # Preference-like notes by the words of what they are about: only notes that share
    # one can overturn each other, and the index keeps a long memory from going quadratic.
    by_object_word: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        if item.subject is not None:
            earlier = latest_by_subject.get(item.subject)
            if earlier is not None and earlier.alive:
                item.absorb(earlier)
            latest_by_subject[item.subject] = item
            continue
        if not _is_preference_like(item):
            continue
        object_words = sorted(content_tokens(item.remainder) - VAGUE_WORDS)
        candidates: dict[int, _Item] = {}
        for word in object_words:
            alive = [e for e in by_object_word[word] if e.alive]
            by_object_word[word] = alive
            # The latest few statements about a word are the ones a new one can overturn.
            candidates.update((e.order, e) for e in alive[-MAX_SUPERSEDE_CANDIDATES:])
        for order in sorted(candidates):
            earlier = candidates[order]
            if earlier.alive and _replaces(item, earlier):
                item.absorb(earlier)
        for word in object_words:
            by_object_word[word].append(item)


def merge_near_duplicates(items: list[_Item]) -> None:
    """Fold notes that say the same thing into the later one.

    Prefix filtering keeps this near-linear: two token sets with Jaccard >= t must share
    one of the len - ceil(t * len) + 1 rarest tokens of each."""
    frequency: Counter[str] = Counter(t for item in items if item.alive for t in item.tokens)
    index: dict[str, list[_Item]] = defaultdict(list)
    for item in items:
        if not item.alive or not item.tokens:
            continue
        ranked = sorted(item.tokens, key=lambda t: (frequency[t], t))
        prefix = ranked[: len(ranked) - math.ceil(DUPLICATE_SIMILARITY * len(ranked)) + 1]
        candidates: dict[int, _Item] = {}
        for token in prefix:
            # Absorbed notes leave the index as they are met, so that a long run of
            # repeats does not make every later note walk past all of them.
            index[token] = [other for other in index[token] if other.alive]
            for other in index[token]:
                candidates[other.order] = other
        for order in sorted(candidates):
            other = candidates[order]
            if other.actor != item.actor or other.numbers != item.numbers:
                continue  # a different amount or id is a different fact
            if _different_days(item.referenced_at, other.referenced_at):
                continue  # the same thing on another day is another event
            if jaccard(item.tokens, other.tokens) >= DUPLICATE_SIMILARITY:
                if len(other.tokens) > len(item.tokens):
                    item.text, item.remainder = other.text, other.remainder
                item.priority = _merged_priority(other.priority, item.priority)
                item.referenced_at = item.referenced_at or other.referenced_at
                item.absorb(other)
        for token in prefix:
            index[token].append(item)


def _different_days(left: datetime | None, right: datetime | None) -> bool:
    return left is not None and right is not None and left.date() != right.date()


def _merged_priority(earlier: str, later: str) -> str:
    if later == COMPLETED:
        return COMPLETED  # the same task, now finished
    return _strongest([earlier, later])


def telegraphic(text: str, limit: int) -> str:
    """Drop articles and fillers; past the word limit keep only names and numbers."""
    words = [w for w in text.split() if w.lower() not in _TELEGRAPHIC_DROP]
    if len(words) <= limit:
        return " ".join(words)
    head = words[:limit]
    specifics = [
        w for w in words[limit:] if w[:1].isupper() or w[:1] == '"' or any(c.isdigit() for c in w)
    ]
    tail = " ".join(specifics[:4])
    return " ".join(head).rstrip(",;:") + (f" … {tail}" if tail else "…")


def _summary_line(topic: str, group: list[_Item], words_per_item: int, dated: bool) -> str:
    """One line for a topic: "User went to park (Jan 1); zoo (Jan 3) with a friend"."""
    recent = group[-MAX_GROUP_ITEMS:]
    parts: list[str] = []
    days: list[datetime] = []
    for item in recent:
        part = telegraphic(item.remainder if topic else item.text, words_per_item).rstrip(" .;")
        if parts and part.lower() == parts[-1].lower() and item.event_day.date() == days[-1].date():
            continue
        parts.append(part)
        days.append(item.event_day)
    head, middles, tail = _factor_common_words(parts)
    if dated and len({d.date() for d in days}) > 1:
        middles = [_with_day(m, d, i + 1 == len(days) or days[i + 1].date() != d.date())
                   for i, (m, d) in enumerate(zip(middles, days, strict=True))]  # fmt: skip
    earlier = len(group) - len(recent)
    body = "; ".join(m for m in middles if m) + (f"; +{earlier} earlier" if earlier else "")
    return " ".join(piece for piece in (topic, head, body, tail) if piece)


def _with_day(part: str, day: datetime, last_of_day: bool) -> str:
    label = f"{day:%b} {day.day}"
    return f"{part} ({label})" if last_of_day and label not in part else part


def _factor_common_words(parts: list[str]) -> tuple[str, list[str], str]:
    """Words every part starts or ends with, said once: "to park with a friend", "to zoo
    with a friend" -> ("to", ["park", "zoo"], "with a friend")."""
    if len(parts) < 3:
        return "", parts, ""
    split = [p.split() for p in parts]
    shortest = min(len(words) for words in split)
    lead = 0
    while lead < shortest - 1 and len({words[lead].lower() for words in split}) == 1:
        lead += 1
    trail = 0
    while trail < shortest - lead - 1 and len({words[-1 - trail].lower() for words in split}) == 1:
        trail += 1
    if trail < 2:
        trail = 0  # one shared last word is usually chance, not a pattern
    head = " ".join(split[0][:lead])
    tail = " ".join(split[0][len(split[0]) - trail :]) if trail else ""
    middles = [" ".join(words[lead : len(words) - trail]) for words in split]
    return head, middles, tail


def _summarise(
    items: list[_Item], words_per_item: int, now: datetime, *, dated: bool
) -> list[tuple[int, DraftReflection]]:
    """One line per priority and topic, each note shortened to about ``words_per_item``."""
    groups: dict[tuple[str, str], list[_Item]] = {}
    for item in items:
        groups.setdefault((item.priority, item.topic or item.text), []).append(item)
    drafts = []
    for (priority, _), group in groups.items():
        topic = group[0].topic
        text = _summary_line(topic, group, words_per_item, dated)
        referenced = [i.referenced_at for i in group if i.referenced_at is not None]
        draft = DraftReflection(
            text=text,
            priority=priority,
            observed_at=now,
            referenced_at=max(referenced) if referenced else group[-1].observed_at,
            source_observation_ids=_ids_in_order(group),
            tags=["summary"] if len(group) > 1 else [],
            topics=[topic] if topic else [],
        )
        drafts.append((group[0].order, draft))
    return drafts


def _keep(item: _Item, now: datetime, *, words: int | None = None) -> tuple[int, DraftReflection]:
    return item.order, DraftReflection(
        text=telegraphic(item.text, words) if words else item.text,
        priority=item.priority,
        observed_at=now,
        # Once the observation is gone, the day it was written is the best date an
        # undated event has.
        referenced_at=item.event_day,
        source_observation_ids=_ids_in_order([item]),
        topics=[item.topic] if item.topic else [],
    )


# --------------------------------------------------------------------------- the engine


class ExtractiveEngine:
    name = "extractive"
    model = ""
    prompt_version = ""

    def observe(
        self,
        messages: Sequence[SourceMessage],
        *,
        previous_observations: Sequence[str],
        now: datetime,
    ) -> ObserverOutput:
        ordered = sorted(messages, key=lambda m: m.seq)
        visible = [m for m in ordered if not _is_memory_block(m)]
        state = WindowState(previous_observations)
        clauses: list[Clause] = []
        tool_notes: list[Note] = []
        for message in visible:
            if message.role == "tool":
                tool_notes.append(_tool_note(message))
            elif message.content.strip():
                clauses.extend(message_clauses(message, state))
        _raise_unanswered_requests(clauses, visible)
        clauses = _drop_known_clauses(clauses, KnownFacts(previous_observations))
        tool_notes = _drop_known_tool_notes(fold_tool_notes(tool_notes), previous_observations)
        clauses = fold_fulfilled_requests(clauses, tool_notes, visible)
        notes = sorted(group_clauses(clauses) + tool_notes, key=lambda n: n.first_seq)
        current_task, suggested_response = _current_task(clauses)
        return ObserverOutput(
            observations=[_draft(note, now) for note in notes],
            current_task=current_task,
            suggested_response=suggested_response,
        )

    def reflect(
        self, observations: Sequence[SourceObservation], *, now: datetime
    ) -> list[DraftReflection]:
        if not observations:
            return []
        items = _make_items(observations)
        supersede(items)
        merge_near_duplicates(items)
        alive = [i for i in items if i.alive]
        recent_count = max(1, math.ceil(len(alive) * RECENT_SHARE))
        old, recent = alive[:-recent_count], alive[-recent_count:]
        drafts: list[tuple[int, DraftReflection]] = []
        # Old high-priority notes keep every fact; they only lose articles and fillers.
        drafts.extend(_keep(i, now, words=OLD_HIGH_WORDS) for i in old if i.priority == HIGH)
        relevant = [i for i in old if i.priority == MEDIUM]
        drafts.extend(_summarise(relevant, OLD_MEDIUM_WORDS, now, dated=False))
        background = [i for i in old if i.priority in (LOW, COMPLETED)]
        drafts.extend(_summarise(background, OLD_BACKGROUND_WORDS, now, dated=True))
        drafts.extend(_keep(i, now) for i in recent)
        if not drafts:  # cannot happen (the newest note always survives); never return []
            drafts.append(_keep(items[-1], now))
        drafts.sort(key=lambda pair: pair[0])
        return [draft for _, draft in drafts]
