"""What an assistant's turn decides. A long answer is advice: only its promises, finished
tasks, money and references are kept as clauses (its lists and names make the answer note,
``answers.py``). A short one (``SHORT_TURN_WORDS``) is a support answer, read for what it
decides: a refusal and its reason ("we cannot accept the return because it has been more
than 90 days"), a promise someone else keeps ("a courier will call you tomorrow"), the
agent's finished action ("I have escalated it"), a state ("being processed"), what a rule
grants ("covered by the warranty"), a duration or an amount ("less than a week", "all
promo codes expire after 7 days")."""

from __future__ import annotations

import re

from memory.engines.extractive.cues import (
    COMMITMENT,
    COMPLETION,
    CONCRETE_ACTION,
    DECISIVE_QUANTITY,
    DIAGNOSIS,
    DONE_BY_SPEAKER,
    FUTURE,
    POLICY,
    REFUSAL,
    SELF_DESCRIPTION,
    STATE,
    UNFINISHED,
    WORKAROUND,
    is_negated,
)
from memory.engines.extractive.relative_dates import has_date
from memory.engines.extractive.vocabulary import COMPLETED, HIGH, LOW, MEDIUM, Sentence, wordset

# An assistant turn this short is a support answer, read for what it decides (a refusal, a
# state, a duration, an amount); a longer one is advice, read for its promises and names.
SHORT_TURN_WORDS = 50

# "I'll send it off": a promise about "it" is routine, not something to hold anyone to.
_VAGUE_OBJECT = re.compile(
    r"\b(?:send|sending|process|processing|book|booking|update|updating|arrange|ship)"
    r"\s+(?:it|this|that|them|one)\b"
)

MONEY_OR_REFERENCE = re.compile(r"[$€£¥]\s?\d|\b[A-Z]{2,}-?\d+")

# "I hope the choices you make will ...": a wish, not a promise.
_WISH = re.compile(r"^(?:i\s+|we\s+)?(?:hope|wish|think|believe|guess|bet|trust)\b")


def classify_answer(
    sentence: Sentence, short: bool, *, asked: bool = True
) -> tuple[str, str] | None:
    """(kind, priority) of a sentence of an assistant's turn worth keeping, or None.
    ``asked``: the user's turn before it asked something, so a state is an answer."""
    if sentence.is_question:
        return None
    lower = sentence.lower
    promise = COMMITMENT.found(sentence)
    future = short and FUTURE.search(lower) is not None and _WISH.match(lower) is None
    unfinished = UNFINISHED.search(lower) is not None
    done = COMPLETION.found(sentence) and not is_negated(sentence) and not unfinished
    reference = MONEY_OR_REFERENCE.search(sentence.text) is not None
    decisive = short and DECISIVE_QUANTITY.search(sentence.text) is not None
    # Finding a date is the costly test: only a promise or a finished task needs it.
    specific = (promise or future or done) and (reference or has_date(sentence))
    concrete = CONCRETE_ACTION.found(sentence) and not _VAGUE_OBJECT.search(lower)
    if promise and (concrete or specific):
        return "commitment", HIGH
    if short and REFUSAL.found(sentence) and not SELF_DESCRIPTION.search(lower):
        return "refusal", HIGH  # "we cannot accept the return because ...": with its reason
    if future and (concrete or specific or decisive):
        return "commitment", HIGH  # "a courier will call you tomorrow"
    if done and (specific or "your" in sentence.words):
        return "completed", COMPLETED
    if short and concrete and DONE_BY_SPEAKER.search(lower) and not unfinished:
        return "completed", COMPLETED  # "I have escalated it"
    if reference:
        return "fact", LOW  # money and reference numbers the user may need later
    if short and asked and _PROPOSAL.match(lower):
        return "fact", LOW  # "a mushroom wellington would serve eight": what was offered
    if short and POLICY.search(lower):
        return "fact", LOW  # "a broken zip is covered by the warranty": what a rule grants
    if short and (DIAGNOSIS.search(lower) or WORKAROUND.match(lower)):
        return "fact", MEDIUM  # "a known bug in 4.2.1"; "until then, turn off ...": the fix
    if decisive or (short and asked and STATE.search(lower)):
        # "less than a week", "all promo codes expire after 7 days", "it is in progress":
        # low, so that it shares the line of the question it answers.
        return "fact", LOW
    return None


# A short answer that puts something forward for what was asked: "A mushroom wellington
# would serve eight", "the blue model should fit".
_PUT_FORWARD = (
    r"(?:an?|the|our|this|that|one|some)\s+[^,.;:!?]{3,60}?\s+(?:would|could|should|will|can)"
    r"\s+(?:serve|suit|fit|feed|work|do|cover|match|go)\b"
)
_PROPOSAL = re.compile("^" + _PUT_FORWARD)  # a sentence that is one
_PROPOSED = re.compile(r"(?:^|[.!?]\s+)" + _PUT_FORWARD)  # a turn with one of its sentences


def promised_part(text: str) -> str:
    """ "Please confirm the order and I'll send it off" -> the part with the promise; "I
    have escalated it; a courier will call you" -> both parts: what was done and what
    will be. A promise keeps the condition it is made on, as said: "if it's still there
    on Monday, reply to this thread and we'll reverse it"."""
    bounds = [0, *(i for m in _PROMISE_SPLIT.finditer(text) for i in m.span()), len(text)]
    parts = [
        (bounds[i], bounds[i + 1])
        for i in range(0, len(bounds), 2)
        if text[bounds[i] : bounds[i + 1]].strip()
    ]
    promised = [n for n, (a, b) in enumerate(parts) if _promises(Sentence.of(text[a:b]))]
    if not promised or len(promised) == len(parts):
        return text
    runs: list[tuple[int, int]] = []  # (first part, last part) of each kept stretch
    for n in promised:
        runs.append((_condition_of(text, parts, n, runs[-1][1] if runs else -1), n))
    return "; ".join(_LEADING_AND.sub("", text[parts[a][0] : parts[b][1]]) for a, b in runs)


_LEADING_AND = re.compile(r"^(?:and|but|so)\s+", re.IGNORECASE)  # ", and I'll chase it"


def _condition_of(text: str, parts: list[tuple[int, int]], n: int, kept_to: int) -> int:
    """The first part of the promise in part ``n`` with its condition: the nearest part
    after ``kept_to`` that opens with one ("if it's still there on Monday, reply ... and
    we'll ..."), or the part just before it that asks the customer to do something
    ("call us back and we'll send a technician"); ``n`` itself without either."""
    for earlier in range(n - 1, kept_to, -1):
        if _CONDITION.match(text, parts[earlier][0]):
            return earlier
    asked = n - 1
    if asked > kept_to and "and" in text[parts[asked][1] : parts[n][0]]:
        return asked if _ASKED_OF_THEM.match(text, parts[asked][0]) else n
    return n


# What a promise may be made on: "if it's still there on Monday", "once it arrives".
_CONDITION = re.compile(r"(?:if|unless|once|as\s+soon\s+as|when|after|until)\b", re.IGNORECASE)

# What an agent asks the customer to do before a promise ("call us back and we'll ...").
_ASKED_OF_THEM = re.compile(
    r"(?:call|reply|respond|write|send|e-?mail|contact|bring|return|click|restart|reinstall|"
    r"try|upload|fill|sign|confirm|visit|keep)\b",
    re.IGNORECASE,
)


# Clauses of a sentence: "and" splits only where a new subject follows, so that "will be
# made and delivered" stays whole.
_PROMISE_SPLIT = re.compile(
    r",\s*|;\s*|\s+and\s+(?=(?:i|we|you|they|he|she|it|the|your|my|our|this|that)\b)",
    re.IGNORECASE,
)


def _promises(part: Sentence) -> bool:
    """A promise, or what the speaker already did about it ("I have let my manager know")."""
    return bool(
        COMMITMENT.found(part) or FUTURE.search(part.lower) or DONE_BY_SPEAKER.search(part.lower)
    )


# "because it has been more than 90 days we cannot accept the return": the refusal first,
# then its reason.
_REASON_FIRST = re.compile(
    r"^(?P<before>(?:\w+,?\s+)?)because\s+(?P<reason>.+?),?\s+"
    r"(?P<main>(?:we|i|you|they|it|this|that|the\s+\w+)\s+(?:cannot|can't|can\s+not|won't|"
    r"will\s+not|couldn't|could\s+not|are|is|am|'re|'m|don't|do\s+not|doesn't|does\s+not)\b.*)$",
    re.IGNORECASE,
)


# "I'm so sorry but", "Unfortunately,": what a refusal says before the refusal itself.
_APOLOGY = re.compile(
    r"^(?:(?:(?:i'?m|i\s+am|we'?re|we\s+are)\s+)?(?:so\s+|very\s+|really\s+)?sorry(?:,?\s+but)?|"
    r"unfortunately)\b[\s,]*",
    re.IGNORECASE,
)


def reason_last(text: str) -> str:
    """A refusal without its apology, its reason after it."""
    text = _APOLOGY.sub("", text)
    match = _REASON_FIRST.match(text)
    if match is None:
        return text
    main = match.group("main").rstrip(" .!")
    return f"{match.group('before')}{main} because {match.group('reason')}"


# A refusal names what it refuses: "we don't offer that" says nothing on its own.
REFUSAL_WORDS = wordset(
    "can't cannot don't won't unable able offer sell carry accept find help see do allow"
)


_ASSISTANT_CUE = re.compile(
    r"\b(?:" + "|".join(sorted(COMMITMENT.gate | COMPLETION.gate, key=len)[::-1]) + r")\b"
)


def answer_may_matter(content: str) -> bool:
    """Most assistant sentences advise or ask; only promises, completed actions, money and
    references are kept as clauses, and a turn with none of their cues is not read
    sentence by sentence (its names and lists still make its answer note)."""
    if _ASSISTANT_CUE.search(content.lower()):
        return True
    return bool(MONEY_OR_REFERENCE.search(content))


# Words without which a short answer refuses nothing (``REFUSAL``).
_REFUSAL_GATE = wordset("cannot can't unable couldn't won't unfortunately afraid don't not")


def short_answer_may_matter(content: str) -> bool:
    """Could ``classify_answer`` keep a sentence of this short turn? Most short turns are
    chat ("Sounds fun! Enjoy your walk"), and reading them sentence by sentence costs."""
    if answer_may_matter(content):
        return True
    sentence = Sentence.of(content)
    if not _REFUSAL_GATE.isdisjoint(sentence.words):
        return True
    if STATE.search(sentence.lower) or POLICY.search(sentence.lower):
        return True
    if DIAGNOSIS.search(sentence.lower) or WORKAROUND.search(sentence.lower):
        return True
    if DECISIVE_QUANTITY.search(content):
        return True
    if _PROPOSED.search(sentence.lower):
        return True
    acts = not CONCRETE_ACTION.gate.isdisjoint(sentence.words)
    return acts and bool(FUTURE.search(sentence.lower) or DONE_BY_SPEAKER.search(sentence.lower))
