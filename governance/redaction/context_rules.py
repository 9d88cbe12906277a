"""The context rules that lower a score where the words around a value say it is
something else: a record's id taken for a phone number, a field label taken for a name.

Imported by ``governance.redaction.presidio`` only when the engine loads (it imports
Presidio). What each rule changed is measured in docs/benchmarks/2026-11-30.md
("Redaction", "Quality: both PII datasets, against stock Presidio").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from presidio_analyzer import RecognizerResult

from governance.redaction.recognizers import (
    ACCOUNT_NUMBER,
    ADDRESS,
    ID_WORDS,
    PHONE_WORDS,
    name_lists,
    words_before,
    wordset,
)

# Types whose value is a bare number that an id word before it explains away.
_NUMBER_TYPES = frozenset(
    {
        "PHONE_NUMBER",
        "CREDIT_CARD",
        "US_BANK_NUMBER",
        "UK_NHS",
        "US_DRIVER_LICENSE",
        "US_PASSPORT",
        "US_ITIN",
        "US_SSN",
        "MEDICAL_LICENSE",
        ACCOUNT_NUMBER,
    }
)
# Words that name the value itself: nearer than an id word, they win ("policy account
# 1234567890", "order questions? call 555-123-4567").
_VALUE_WORDS = PHONE_WORDS | wordset("account acct card iban passport licence license ssn")
_PRODUCT_WORDS = wordset(
    "order product item model sku plan version ticket case question step option"
)
_NHS_WORDS = wordset("nhs health patient")


_CODE = re.compile(r"[^\W\d_]\d|\d[^\W\d_]")
_ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.){2,}$")
_ACRONYM = re.compile(r"^[A-Z]{2,5}$")


def _known_name(value: str) -> bool:
    first_names, surnames = name_lists()
    return any(word in first_names or word in surnames for word in value.split())


# A programmer's name for a field ("order_id", "customerName" stays a possible name):
# lower case words joined by underscores. No person is written so; tool output's JSON
# keys are, and the tagger takes some of them for names.
_IDENTIFIER = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")


def rescore(text: str, results: Sequence[RecognizerResult]) -> list[RecognizerResult]:
    """Lower (never raise) scores where the text says a value is something else:
    - a number whose nearest cue word before it is an order, ticket, case, invoice or
      tracking word ("order 5551234567", "Ticket #48213") is that record's id, not a
      phone, card, bank or licence number: dropped (a card number only to the review
      band: a person looks);
    - a UK NHS number with no NHS word near it: Presidio's checksum passes one number in
      eleven, so most ten-digit phone numbers would otherwise come out as NHS numbers;
    - a person's name with a digit in it ("question4"), right after an order or product
      word, or written as a field name ("order_id") is a label, not a name."""
    kept: list[RecognizerResult] = []
    for result in results:
        kind = result.entity_type
        before = words_before(text, result.start)
        if kind in _NUMBER_TYPES:
            cue = next((w for w in reversed(before) if w in ID_WORDS or w in _VALUE_WORDS), None)
            if cue in ID_WORDS:
                if kind != "CREDIT_CARD":
                    continue
                result.score = min(result.score, 0.45)
            if kind == "PHONE_NUMBER" and before[-1:] == ["#"]:
                continue  # "#5551234": numbered like a record, never how a phone is written
        if kind == "UK_NHS" and _NHS_WORDS.isdisjoint(words_before(text, result.start, 8)):
            continue
        value = text[result.start : result.end]
        label = text[result.end : result.end + 1] == ":"
        if kind == "LOCATION" and (
            _CODE.search(value) or value.islower() or _ABBREVIATION.match(value) or label
        ):
            continue  # "ACC987654321", "’s", "B.S.", "Nurse:": not places
        if kind == "PERSON" and label and not _known_name(value):
            continue  # "Email: dana@example.com": a form's field, not a person
        if kind == "PERSON" and (
            text[result.start - 1 : result.start] == "#"
            or _ACRONYM.match(value)
            or any(ch.isdigit() for ch in value)
            or (before and before[-1] in _PRODUCT_WORDS)
            or _IDENTIFIER.fullmatch(value)
        ):
            continue  # "#TravelGoals", "RSVP", "question4", "order Jasper", "order_id"
        kept.append(result)
    # A town the tagger found inside a street address, or a street named after a person
    # ("Nelson Mandela Drive"), is part of that address.
    addresses = [r for r in kept if r.entity_type == ADDRESS]
    return [
        r
        for r in kept
        if r.entity_type not in ("LOCATION", "PERSON")
        or not any(a.start <= r.start and r.end <= a.end for a in addresses)
    ]
