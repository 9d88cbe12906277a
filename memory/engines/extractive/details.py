"""Details asked and given: an agent asks for the customer's name, e-mail and order number,
and the customer answers with the bare values ("Crystal Minh", "3348917502"). A value
alone tells a later reader nothing; with the question it is "User's order ID is
3348917502". A login name, a password or a PIN is for signing in, not a fact about anyone:
it is never kept. A bare identifier nobody asked about is not kept either, since nobody
could tell what it identifies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory.engines.extractive.pseudonyms import placeholder_kind
from memory.engines.extractive.speech import without_disfluencies
from memory.engines.extractive.vocabulary import STOPWORDS, wordset

MAX_DETAIL_WORDS = 3  # "membership level", "order ID", "date of birth"
MAX_REPLY_WORDS = 6  # a longer reply is a sentence, read as one

# "may I have your username, email address and order ID please?", "What is your
# membership level?", "I'd just need your phone number", "give me the order ID and email".
_ASK = re.compile(
    r"\b(?:(?:have|get|give\s+me|provide|send\s+me|share|tell\s+me|need)"
    r"\s+(?:(?:also|just|please|again|first)\s+)*(?:your|the)|"
    r"what(?:'s|\s+is|\s+are|\s+was)\s+your)\s+(?P<details>[^?!.;]+)",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"\s*(?:,|/|&|\band\b|\bor\b|\balso\b)\s*")
_OWNER = re.compile(r"^(?:your|the|my)\s+", re.IGNORECASE)
_ACRONYMS = wordset("ID ZIP PIN IBAN SSN VIN CVV")
# Words that end the list of what was asked: "your order ID please", "your order is
# correct": a detail is named by nouns.
_LIST_END = (STOPWORDS - {"of"}) | wordset(
    """please too again first thanks thank now look looks looking correct right okay ok
    good fine"""
)
# Details for signing in: given to prove who one is, not something to remember.
_LOGIN = re.compile(
    r"\b(?:user\s?name|login|log-in|handle|password|passcode|pin|security\s+(?:code|answer)|"
    r"cvv|one-time\s+code|otp|verification\s+code)\b",
    re.IGNORECASE,
)
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_PHONE = re.compile(r"^\+?[\d\s().-]{7,}$")
# "Order ID: 3348917502", "Username: cminh730".
_LABELLED = re.compile(r"^(?P<label>[A-Za-z][A-Za-z ]{1,24}?)\s*[:=]\s*(?P<value>\S.*)$")
# What a reply says before its value: "Sure, it's ...", "I'm a bronze", "my email is ...".
_REPLY_OPENING = re.compile(
    r"^(?:(?:sure|yes|yeah|yep|ok(?:ay)?|of\s+course|certainly|no\s+problem)\b[\s,!.:-]*)?"
    r"(?:(?:it's|it\s+is|that's|that\s+is|that\s+would\s+be|its|i'm|i\s+am|my\s+[\w\s]{1,20}?"
    r"\s+is)(?:\s+an?\b)?\s*)?",
    re.IGNORECASE,
)
_ENDING = re.compile(r"[\s,;.!]+$|[\s,]+(?:thanks|thank\s+you|please)[\s.!]*$", re.IGNORECASE)


@dataclass
class AskedDetails:
    """The details the last question of the other side asked for, not given yet."""

    pending: list[str] = field(default_factory=list)

    def ask(self, question: str) -> None:
        if "your" not in question and "the" not in question:
            return
        question = without_disfluencies(question)
        asked = [d for match in _ASK.finditer(question) for d in _details(match.group("details"))]
        if asked:
            self.pending = list(dict.fromkeys(asked))

    def clear(self) -> None:
        self.pending = []


def _details(phrase: str) -> list[str]:
    """ "username, email address and order ID please" -> username, email address, order ID."""
    details: list[str] = []
    for part in _SEPARATOR.split(phrase.strip()):
        part = _OWNER.sub("", part)  # "the order number and your email"
        words: list[str] = []
        ended = False
        for word in part.split():
            plain = word.isalpha() and word.islower()
            if word.lower() in _LIST_END or not (plain or word in _ACRONYMS):
                ended = True  # "please", or a name the question ends with
                break
            words.append(word)
        while words and words[-1] == "of":
            words.pop()  # "the date of" lost what it was of
        if words and len(words) <= MAX_DETAIL_WORDS:
            details.append(" ".join(words))
        if ended or len(words) > MAX_DETAIL_WORDS:
            break
    return details


def _is_label(label: str) -> bool:
    words = label.lower().split()
    return len(words) <= MAX_DETAIL_WORDS and not any(
        w in STOPWORDS or w in _AGREEMENT for w in words
    )


def is_login(detail: str) -> bool:
    return _LOGIN.search(detail) is not None


def _is_email(value: str) -> bool:
    return _EMAIL.match(value) is not None or placeholder_kind(value) == "EMAIL_ADDRESS"


def _is_phone(value: str) -> bool:
    digits = sum(c.isdigit() for c in value)
    return (_PHONE.match(value) is not None and digits >= 7) or (
        placeholder_kind(value) == "PHONE_NUMBER"
    )


def _pick(pending: list[str], value: str) -> str | None:
    """The asked detail this value gives: an e-mail for the e-mail, a phone number for the
    phone, anything else (or a number when no phone was asked) for the first other detail
    still open."""
    if _is_email(value):
        wanted = [d for d in pending if "mail" in d.lower()]
        return wanted[0] if wanted else None
    phones = [d for d in pending if _PHONE_DETAIL.search(d)]
    if _is_phone(value) and phones:
        return phones[0]
    others = [d for d in pending if "mail" not in d.lower() and not _PHONE_DETAIL.search(d)]
    return others[0] if others else None


# "That looks right", "you got it", "all good": a reply that agrees gives nothing.
_AGREEMENT = wordset(
    """right correct perfect fine good great okay ok yes yup yeah yep sure exactly absolutely
    accurate clear got does do"""
)


def _looks_like_value(value: str) -> bool:
    """A number, an e-mail, a pseudonym, a name ("Crystal Minh"), or a word or two that
    are neither function words nor agreement ("bronze", "gold member")."""
    if any(c.isdigit() for c in value) or "@" in value:
        return True
    if len(value) < 3:
        return False  # "f", "W": a word cut off
    words = [w.strip(".,!'’") for w in value.split()]
    if any(placeholder_kind(w) for w in words):
        return True
    lower = [w.lower() for w in words]
    if any(w in STOPWORDS or w in _AGREEMENT or "'" in w or "’" in w for w in lower):
        return False
    return all(w[:1].isupper() for w in words) or len(words) <= 2


_PHONE_DETAIL = re.compile(r"phone|mobile|cell", re.IGNORECASE)
_FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'll|i'd|me|my|we|our)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Given:
    """A detail given in a reply: what it is and its value (None: a login, not kept)."""

    detail: str
    value: str | None


def given_detail(reply: str, asked: AskedDetails | None) -> Given | None:
    """What a short reply gives, when it answers a question for details (``asked``; None
    when nobody asked) or labels its own value ("Order ID: 3348917502"); None when it is
    a sentence to read as one."""
    if reply.count(" ") > MAX_REPLY_WORDS + 2:
        return None
    if (asked is None or not asked.pending) and ":" not in reply and "=" not in reply:
        return None  # nothing asked, no label: a short remark
    asked = asked if asked is not None else AskedDetails()
    text = _ENDING.sub("", without_disfluencies(reply.strip()))
    if not text or len(text.split()) > MAX_REPLY_WORDS or text.endswith("?"):
        return None
    labelled = _LABELLED.match(text)
    if labelled and _is_label(labelled.group("label")) and _looks_like_value(labelled["value"]):
        detail = labelled.group("label").strip()
        value = labelled.group("value").strip()
        detail = detail if detail.isupper() else detail[:1].lower() + detail[1:]
        asked.pending = [d for d in asked.pending if d.lower() != detail.lower()]
        return Given(detail, None if is_login(detail) else value)
    if not asked.pending:
        return None
    opening = _REPLY_OPENING.match(text)
    value = text[opening.end() if opening else 0 :].strip()
    if not value or value.lower() in ("no", "yes", "sure", "ok", "okay"):
        return None
    if _FIRST_PERSON.search(value) or not _looks_like_value(value):
        return None  # "I got the wrong size": a sentence about the writer, read as one
    detail = _pick(asked.pending, value)
    if detail is None:
        return None
    asked.pending.remove(detail)
    return Given(detail, None if is_login(detail) else value)


_ID_CHARACTER = re.compile(r"[\d@]|Zq[et]")  # a digit, an e-mail, or their pseudonyms
# A reply that is nothing but identifiers: "3348917502", "cminh730", "(977) 625-2661".
_IDENTIFIER = re.compile(r"^(?:[\w.+-]+@[\w.-]+|[\w-]*\d[\w-]*|[\d\s().+-]{4,})$")


def is_bare_identifier(sentence: str) -> bool:
    """Is this sentence only identifiers, with no word saying what they identify?"""
    if sentence.count(" ") > MAX_DETAIL_WORDS + 2 or _ID_CHARACTER.search(sentence) is None:
        return False
    words = sentence.strip(" .,;!").split()
    if not words or len(words) > MAX_DETAIL_WORDS:
        return False
    joined = " ".join(words)
    if _PHONE.match(joined) and sum(c.isdigit() for c in joined) >= 7:
        return True
    return all(_IDENTIFIER.match(w) or placeholder_kind(w) in ("EMAIL_ADDRESS", "PHONE_NUMBER")
               for w in words)  # fmt: skip
