"""How a pseudonym is written, and what only looks like one.

A pseudonym is written ``<ENTITY_TYPE_n>``: the entity type in capitals, an underscore,
a number from 1, in angle brackets (``<PERSON_2>``). Anything else that spells an entity
type with a number is a *malformed* pseudonym (``<PERSON158>``, a bare ``PERSON131``,
``<PERSON_145`` without its bracket, ``person_3>``). ``malformed_pseudonyms`` finds them,
for the benchmarks to count; ``well_formed`` writes them right before the pipeline stores
what an engine wrote. Notes stored before that still hold them, so ``label_meant`` reads
one label as a person copies it from memory, malformed or not, for the reveal. Plain
text: nothing here reads the database.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from functools import lru_cache

from governance.redaction.presidio import DENY_LIST_ENTITY, SUPPORTED_ENTITIES

# A label as written into text: the entity type, an underscore and a number from 1.
LABEL = re.compile(r"<([A-Z][A-Z0-9_]{0,49})_([1-9][0-9]{0,9})>")


@lru_cache(maxsize=16)
def _spelled(entity_types: tuple[str, ...]) -> re.Pattern[str]:
    # Longest first, so that "US_BANK_NUMBER" is not read as a shorter type.
    names = "|".join(re.escape(t) for t in sorted(entity_types, key=lambda t: (-len(t), t)))
    return re.compile(
        rf"(?P<open><[ \t]*)?(?<![\w])(?P<type>{names})(?P<sep>[ \t]*[_-]?[ \t]*)"
        rf"(?P<number>\d+)(?![\w])(?P<close>[ \t]*>)?",
        re.IGNORECASE,
    )


@lru_cache(maxsize=16)
def _spelling(entity_types: tuple[str, ...]) -> re.Pattern[str]:
    """The pattern of a type among Presidio's, Memdesk's and ``entity_types`` (a
    workspace's custom recognizers') spelled with a number."""
    return _spelled(tuple(sorted({*SUPPORTED_ENTITIES, DENY_LIST_ENTITY, *entity_types})))


def _is_malformed(match: re.Match[str]) -> bool:
    """A spelling that is not written ``<ENTITY_TYPE_n>``. A type in lower or mixed case
    counts only with an angle bracket: "Person 3 said" is prose."""
    if LABEL.fullmatch(match.group(0).strip()):
        return False
    bracketed = bool(match.group("open") or match.group("close"))
    return match.group("type").isupper() or bracketed


def malformed_pseudonyms(text: str, entity_types: Iterable[str] = ()) -> list[str]:
    """The strings of ``text`` that spell an entity type with a number but are not
    written ``<ENTITY_TYPE_n>``, in the order they appear (``_is_malformed``)."""
    return [
        match.group(0).strip()
        for match in _spelling(tuple(entity_types)).finditer(text)
        if _is_malformed(match)
    ]


def well_formed(text: str, known: Collection[str], entity_types: Iterable[str] = ()) -> str:
    """``text`` with each malformed pseudonym written as the label it mangles, where
    ``known`` (the labels the engine was given) holds that label (``<PERSON158>`` ->
    ``<PERSON_158>``), and as its bare type in square brackets otherwise (``[PERSON]``):
    a label nobody gave the engine stands for no one, and must not pass for one."""

    def written(match: re.Match[str]) -> str:
        if not _is_malformed(match):
            return match.group(0)
        kind = match.group("type").upper()
        label = f"<{kind}_{int(match.group('number'))}>"
        return label if label in known else f"[{kind}]"

    return _spelling(tuple(entity_types)).sub(written, text)


def label_meant(written: str, entity_types: Iterable[str] = ()) -> str | None:
    """The label ``written`` means, when the whole of it spells one pseudonym: a label
    (``<PERSON_2>``, or ``PERSON_2`` as a URL path writes it) as it is, and a malformed
    one (``<PERSON158>``, ``PERSON131``, ``person_3>``, ``< LOCATION_2 >``) as the label it
    mangles; None for anything else, and for a number 0. ``entity_types`` adds types to
    Presidio's and Memdesk's (a workspace's own). A type in lower case counts here without
    a bracket too: a field that holds one label alone is no prose."""
    raw = written.strip()
    match = LABEL.fullmatch(raw if raw.startswith("<") else f"<{raw}>")
    if match is not None:
        return match.group(0)
    spelled = _spelling(tuple(sorted(set(entity_types)))).fullmatch(raw)
    if spelled is None:
        return None
    label = f"<{spelled.group('type').upper()}_{int(spelled.group('number'))}>"
    return label if LABEL.fullmatch(label) else None


def labels_in(texts: Iterable[str]) -> set[str]:
    """The well-formed labels ``texts`` hold."""
    return {match.group(0) for text in texts for match in LABEL.finditer(text)}
