"""The recall estimate: the share of the names, numbers and ids said in a conversation
that its memory (pins, reflections, served observations) still holds.

The terms come from a deterministic extractor: regular expressions for ids (ORD-123456,
INC-88, #4521), amounts (€42, 42 EUR, $1,200.50), numbers with units (3 kg, 20%), dates
(2026-03-10, 10/03/2026, 10 March 2026) and other numbers of three or more digits, and a
capitalised-word heuristic for names (a capitalised word that does not open a sentence).
spaCy's entity recogniser (loaded for redaction) would find names better, but costs
tens of milliseconds a message against microseconds here, and a metric that is computed
over whole conversations on a page load must stay cheap. The figure is an estimate:
a name that opens a sentence is not counted, a common word written with a capital
mid-sentence is.

Only what the user and the assistant said is counted: tool output is bulk data the
Observer deliberately folds to its salient values, and system messages include the
memory the service itself injected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.core.cache import cache

from memory.context.tiers import Reidentifies, reidentify_items
from memory.models import Conversation, Message
from memory.selectors import active_reflections, pin_list, served_observations
from tenancy.models import Workspace

CACHE_SECONDS = 24 * 3600
# Characters of messages read per conversation: the newest ones, so a conversation of
# millions of characters costs one bounded read.
MAX_MESSAGE_CHARS = 2_000_000

CURRENCY_CODES = {"€": "EUR", "$": "USD", "£": "GBP", "¥": "JPY", "₹": "INR"}
_CODES = "EUR|USD|GBP|JPY|CHF|INR|CAD|AUD"
_NUMBER = r"\d{1,3}(?:[,\u202f ]\d{3})+(?:\.\d+)?|\d+(?:[.,]\d+)?"
_UNITS = (
    "kg|g|mg|lb|lbs|km|m|cm|mm|mi|GB|MB|TB|KB|ms|s|sec|min|mins|minutes|h|hrs|hours|"
    "days?|weeks?|months?|years?|%|percent|pcs|items?|units?|seats?|users?"
)
_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|"
    "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)

# Not a pseudonym label (<PERSON_12>): a message redacted at ingest holds those.
ID = re.compile(r"(?<!<)\b[A-Z][A-Z0-9]{1,9}[-_]\d{2,}\b|\b[A-Z]{2,5}\d{3,}\b|#\d{3,}\b")
AMOUNT_BEFORE = re.compile(rf"([€$£¥₹]|\b(?:{_CODES})\s?)({_NUMBER})")
AMOUNT_AFTER = re.compile(rf"\b({_NUMBER})\s?(€|\b(?:{_CODES})\b)")
WITH_UNIT = re.compile(rf"\b({_NUMBER})\s?({_UNITS})(?![A-Za-z])")
ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
NUMERIC_DATE = re.compile(r"\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b")
WORD_DATE = re.compile(rf"\b(\d{{1,2}})\s(?:of\s)?({_MONTHS})\b|\b({_MONTHS})\s(\d{{1,2}})\b")
LONG_NUMBER = re.compile(r"(?<![\w.,])\d{3,}(?![\w.,]\d)")
NAME = re.compile(r"(?<![\w<])[A-Z][a-z]+(?:[-'][A-Z][a-z]+)?\b")
SENTENCE_END = re.compile(r"(?:^|[.!?:;\n]\s*|[\"“(]\s*)$")
# Capitalised mid-sentence without being names.
NOT_NAMES = frozenset(
    {
        *("I", "Mr", "Mrs", "Ms", "Dr", "OK", "Okay", "Thanks", "Hi", "Hello"),
        *("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
        *("January", "February", "March", "April", "May", "June", "July", "August"),
        *("September", "October", "November", "December"),
    }
)


@dataclass(frozen=True)
class Recall:
    held: int
    terms: int

    @property
    def share(self) -> float | None:
        return round(self.held / self.terms, 3) if self.terms else None

    def to_wire(self) -> dict[str, Any]:
        return {"share": self.share, "held": self.held, "terms": self.terms}


def _number(raw: str) -> str:
    digits = re.sub(r"[,\u202f ]", "", raw) if re.search(r"[,\u202f ]\d{3}", raw) else raw
    try:
        return format(Decimal(digits.replace(",", ".")).normalize(), "f")
    except InvalidOperation:
        return raw


def _currency(raw: str) -> str:
    raw = raw.strip()
    return CURRENCY_CODES.get(raw, raw.upper())


def terms_in(text: str) -> set[str]:
    """The ids, amounts, numbers with units, dates and names in ``text``, each in one
    normal form so that "€42", "42 EUR" and "EUR 42.00" are the same term."""
    found: set[str] = set()
    taken: list[tuple[int, int]] = []

    def add(term: str, match: re.Match[str]) -> None:
        found.add(term)
        taken.append(match.span())

    for match in ID.finditer(text):
        add("id:" + match.group(0).upper(), match)
    for match in AMOUNT_BEFORE.finditer(text):
        add(f"amount:{_currency(match.group(1))} {_number(match.group(2))}", match)
    for match in AMOUNT_AFTER.finditer(text):
        add(f"amount:{_currency(match.group(2))} {_number(match.group(1))}", match)
    for match in WITH_UNIT.finditer(text):
        if not any(s <= match.start() < e for s, e in taken):
            unit = match.group(2).lower().rstrip("s") if len(match.group(2)) > 2 else match.group(2)
            add(f"quantity:{_number(match.group(1))} {unit}", match)
    for pattern in (ISO_DATE, NUMERIC_DATE):
        for match in pattern.finditer(text):
            add("date:" + match.group(0), match)
    for match in WORD_DATE.finditer(text):
        day = match.group(1) or match.group(4)
        month = (match.group(2) or match.group(3))[:3].lower()
        add(f"date:{int(day)} {month}", match)
    for match in LONG_NUMBER.finditer(text):
        if not any(s <= match.start() < e for s, e in taken):
            found.add("number:" + match.group(0))
    for match in NAME.finditer(text):
        word = match.group(0)
        if word in NOT_NAMES or SENTENCE_END.search(
            text[max(0, match.start() - 3) : match.start()]
        ):
            continue
        found.add("name:" + word.lower())
    return found


def _held(term: str, memory_terms: set[str], memory_text: str) -> bool:
    if term in memory_terms:
        return True
    # A name memory holds where the extractor did not take it for one (it opens a
    # sentence of memory: "Berlin office confirmed ...").
    kind, _, value = term.partition(":")
    return kind == "name" and re.search(rf"\b{re.escape(value)}\b", memory_text) is not None


def _memory_texts(conversation: Conversation, reidentifier: Reidentifies | None) -> list[str]:
    items: list[Any] = [
        *pin_list(conversation=conversation),
        *active_reflections(conversation=conversation),
        *served_observations(conversation=conversation),
    ]
    if reidentifier is not None:
        reidentify_items(reidentifier, items)
    return [item.text for item in items]


def _message_terms(conversation: Conversation) -> set[str]:
    terms: set[str] = set()
    budget = MAX_MESSAGE_CHARS
    contents = (
        Message.objects.filter(
            conversation=conversation, role__in=[Message.Role.USER, Message.Role.ASSISTANT]
        )
        .order_by("-seq")
        .values_list("content", flat=True)
        .iterator(chunk_size=500)
    )
    for content in contents:
        terms |= terms_in(content)
        budget -= len(content)
        if budget <= 0:
            break
    return terms


def _cache_key(conversation: Conversation) -> str:
    return f"memdesk:recall:{conversation.pk}:{conversation.memory_version}:{conversation.last_seq}"


def recall_for_conversation(
    *, conversation: Conversation, reidentifier: Reidentifies | None = None
) -> Recall:
    """The recall estimate of one conversation, cached until a message or memory changes
    (``last_seq``, ``memory_version``). With ``reidentifier``, memory's pseudonyms are put
    back in memory only, so a name memory holds as ``<PERSON_1>`` counts as held."""
    key = _cache_key(conversation)
    cached: Recall | None = cache.get(key)
    if cached is not None:
        return cached
    memory_texts = _memory_texts(conversation, reidentifier)
    memory_text = "\n".join(memory_texts).lower()
    memory_terms: set[str] = set()
    for text in memory_texts:
        memory_terms |= terms_in(text)
    terms = _message_terms(conversation)
    held = sum(_held(term, memory_terms, memory_text) for term in terms)
    recall = Recall(held=held, terms=len(terms))
    cache.set(key, recall, CACHE_SECONDS)
    return recall


def recall_for_workspace(
    *, workspace: Workspace, reidentifier: Reidentifies | None = None
) -> dict[str, Any]:
    """The average recall of the workspace's most recently updated conversations (those
    that have terms to hold), each from its cache when it has not changed."""
    limit = settings.MEMDESK_METRICS_CONVERSATIONS
    conversations = list(
        Conversation.objects.filter(workspace=workspace).order_by("-updated_at", "-id")[:limit]
    )
    cached = cache.get_many([_cache_key(c) for c in conversations])
    shares: list[float] = []
    for conversation in conversations:
        recall = cached.get(_cache_key(conversation)) or recall_for_conversation(
            conversation=conversation, reidentifier=reidentifier
        )
        if recall.share is not None:
            shares.append(recall.share)
    return {
        "share": round(sum(shares) / len(shares), 3) if shares else None,
        "conversations": len(shares),
        "ofMostRecent": limit,
    }
