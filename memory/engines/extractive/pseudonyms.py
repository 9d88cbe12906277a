"""Pseudonyms as one word: a label such as ``<PERSON_12>`` or ``<EMAIL_ADDRESS_3>`` (or the
``<PERSON>`` a replace operator writes) reaches memory exactly as it was written.

The Observer's rules read words: they strip markup (``_``), take ``<`` and ``>`` for code,
split runs of capitals, re-case and conjugate. Rather than teach each rule about labels,
the Observer reads a window with every label swapped for a placeholder that every rule
takes for an unknown proper name (a capitalised word of ASCII letters, no digit, no
underscore), and swaps the labels back into what it writes. A person's label reads as a
person's name ("Zqpbv: I moved" is that person speaking); the others as names of things.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# The label a redaction operator writes: ``<TYPE_n>`` (pseudonymise) or ``<TYPE>``.
LABEL = re.compile(r"<[A-Z][A-Z0-9_]{0,49}>")
# A pseudonym: the label of one person or one value, ``<TYPE_n>`` (a ``<TYPE>`` mask names
# no one).
PSEUDONYM = re.compile(r"<[A-Z]+(?:_[A-Z]+)*_\d+>")
# "Zq", a letter for what the label stands for (``KINDS``), the label's index written with
# the letters a-j for the digits 0-9, and "v". Matched in any case: a rule that lower-cased
# a word still gives the label back.
KINDS = {"PERSON": "p", "EMAIL_ADDRESS": "e", "PHONE_NUMBER": "t", "LOCATION": "l"}
OTHER_KIND = "o"
PLACEHOLDER = re.compile(r"Zq[pelto][a-j]+v", re.IGNORECASE)
# What ``Pseudonyms.hide`` swaps: any label or look-alike, looked up in the window's table.
# One pattern for every window: an alternation of the window's own words was compiled
# again for each window, a tenth of the Observer's time.
_HIDEABLE = re.compile(f"{LABEL.pattern}|(?i:{PLACEHOLDER.pattern})")
_DIGIT_LETTERS = str.maketrans("0123456789", "abcdefghij")


def is_pseudonym(word: str) -> bool:
    return PSEUDONYM.fullmatch(word) is not None


def placeholder_kind(word: str) -> str | None:
    """The entity type a placeholder stands for (``PERSON``, ``EMAIL_ADDRESS``, ...,
    ``OTHER`` for the rest), or None when the word is no placeholder."""
    if PLACEHOLDER.fullmatch(word) is None:
        return None
    letter = word[2].lower()
    return next((kind for kind, code in KINDS.items() if code == letter), "OTHER")


def is_person_placeholder(word: str) -> bool:
    """Does this word stand for a person's pseudonym?"""
    return placeholder_kind(word) == "PERSON"


def is_placeholder(word: str) -> bool:
    return PLACEHOLDER.fullmatch(word) is not None


def _kind_letter(label: str) -> str:
    entity_type = label[1:-1].rstrip("0123456789").rstrip("_") if "_" in label else label[1:-1]
    return KINDS.get(entity_type, OTHER_KIND)


class Pseudonyms:
    """The labels of one window and their placeholders, both ways. A word of the text that
    already looks like a placeholder gets one of its own, so that it comes back as it was
    written and never as a label."""

    def __init__(self, texts: Iterable[str]) -> None:
        texts = list(texts)
        labels = {m.group(0) for text in texts if "<" in text for m in LABEL.finditer(text)}
        self._placeholders: dict[str, str] = {}
        self._originals: dict[str, str] = {}
        self._lookalikes = False
        if not labels:
            return
        lookalikes = {m.group(0) for text in texts for m in PLACEHOLDER.finditer(text)}
        self._lookalikes = bool(lookalikes)
        # Sorted, so that a window's placeholders do not depend on the order of a set.
        for index, original in enumerate(sorted(labels | lookalikes)):
            kind = _kind_letter(original) if original in labels else OTHER_KIND
            placeholder = f"Zq{kind}{str(index).translate(_DIGIT_LETTERS)}v"
            self._placeholders[original] = placeholder
            self._originals[placeholder.lower()] = original

    def __bool__(self) -> bool:
        return bool(self._placeholders)

    def hide(self, text: str) -> str:
        """The text with each label as its placeholder, set apart from a word it was glued
        to ("<PERSON_3>Joyner", where a redaction span ended inside a name): the engine
        reads it as a word of its own, and the note shows a label a reader can reveal."""
        if not self._placeholders or ("<" not in text and not self._lookalikes):
            return text  # no label, and no look-alike has a placeholder
        return _HIDEABLE.sub(self._placeholder_of, text)

    def _placeholder_of(self, match: re.Match[str]) -> str:
        placeholder = self._placeholders.get(match.group(0))
        if placeholder is None:  # a label or look-alike this window's texts did not hold
            return match.group(0)
        text, start, end = match.string, match.start(), match.end()
        before = " " if start and (text[start - 1].isalnum() or text[start - 1] == "_") else ""
        after = " " if end < len(text) and (text[end].isalnum() or text[end] == "_") else ""
        return f"{before}{placeholder}{after}"

    def show(self, text: str) -> str:
        """The text with each placeholder as its label (or look-alike word) again."""
        if not self._placeholders:
            return text
        return PLACEHOLDER.sub(lambda m: self._originals.get(m.group(0).lower(), m.group(0)), text)
