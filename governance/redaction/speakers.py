"""Speakers' names as an engine may read them, and as they are stored when the policy
redacts at ingest.

A message's ``name`` names a person, or several ("Chandler & Joey"), so a policy that
redacts people redacts each of them whole, with the operator it gives PERSON: under the
default, the pseudonym the workspace's mapping gives that person, the same label as
where the contents mention them ("Maria Gonzalez" speaking and "Maria Gonzalez"
mentioned are one ``<PERSON_n>``). What is no one's name stays as written: a qualifier
in brackets ("Tom (agent)" becomes "<PERSON_2> (agent)"), and a role a client gave as a
name, words of the English lexicon that no name list holds ("Narrator", "Project
Manager"). A first name in the qualifier is someone's, and is redacted as the name is
("Carl (Rachel's date)" becomes "<PERSON_7> (<PERSON_3>'s date)"). A name the policy
allows, or a policy that does not redact people, leaves it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from governance.redaction import presidio
from governance.redaction.labels import LABEL
from memory.models import Message

PERSON = "PERSON"
MAX_SPEAKER_NAME_CHARS = Message._meta.get_field("name").max_length or 64
# "Tom (agent)", "Dana [support]": the name, then a qualifier that says the role.
_QUALIFIED = re.compile(r"^(?P<name>.*?\S)\s*(?P<qualifier>[(\[][^()\[\]]*[)\]])$")
# Between the people of one name: "Chandler & Joey", "Ross, Rachel and Monica".
_BETWEEN = re.compile(r"(\s*(?:&|,|/|\+|\band\b)\s*)")
# A word of a qualifier, letters only: "Rachel" of "(Rachel's date)", "José" of "(José's son)".
_LETTERS = re.compile(r"[^\W\d_]+")
_POSSESSIVE = ("'s", "’s")


def person_of(name: str) -> str:
    """The person a speaker's name names, without a bracketed qualifier."""
    match = _QUALIFIED.match(name)
    return match.group("name") if match else name


def people_of(names: Iterable[str]) -> list[str]:
    """The persons of these speakers' names (for ``WorkspacePseudonyms.people``)."""
    return [
        part
        for name in names
        if name
        for index, part in enumerate(_BETWEEN.split(person_of(name)))
        if index % 2 == 0 and part
    ]


def _a_role(words: str) -> bool:
    """Words of the lexicon no name list holds ("Narrator", "Project Manager")."""
    from governance.redaction.name_recognizers import lexicon, name_lists

    first_names, surnames = name_lists()
    common = lexicon()
    alphabetic = [w.strip(".") for w in words.split() if w.strip(".").isalpha()]
    return bool(alphabetic) and all(
        w.lower() in common and w.capitalize() not in first_names and w.capitalize() not in surnames
        for w in alphabetic
    )


def conversation_speakers(conversation_id: Any) -> list[str]:
    """The names a conversation's messages carry, as stored, each once, in order."""
    return conversations_speakers([conversation_id])


def conversations_speakers(conversation_ids: Iterable[Any]) -> list[str]:
    """The names these conversations' messages carry, as stored, each once, in order."""
    return list(
        Message.objects.filter(conversation_id__in=sorted(set(conversation_ids)))
        .exclude(name="")
        .values_list("name", flat=True)
        .distinct()
        .order_by("name")
    )


def roles_among(names: Iterable[str]) -> list[str]:
    """The speakers' names that are roles a client gave as names ("Marketing", "Project
    Manager"): no one's name where they speak, nor in what memory says of them ("Marketing
    said ..."). A scan of notes leaves them as written, as ``speaker_redacted`` does."""
    return sorted({person for person in people_of(names) if _a_role(person)})


def _people(name: str, spec: presidio.PolicySpec) -> tuple[str, list[str]]:
    """(the person part of ``name``, its people with what is between them at odd
    places), or no parts when the policy leaves the name as it is."""
    person = person_of(name)
    if (
        not person
        or PERSON not in spec.analysed_entities
        or person in spec.allow_list
        or spec.operator_for(PERSON) == "keep"
    ):
        return person, []
    return person, _BETWEEN.split(person)


def speaker_redacted(
    name: str, *, spec: presidio.PolicySpec, pseudonyms: presidio.Pseudonymiser
) -> str:
    """``name`` as the policy lets it be read (the module docstring)."""
    from governance.redaction.name_recognizers import lexicon

    person, parts = _people(name, spec)
    if not parts:
        return name

    def as_person(words: str) -> str:
        return presidio.operate(
            words,
            entity_type=PERSON,
            operator=spec.operator_for(PERSON),
            spec=spec,
            pseudonyms=pseudonyms,
        )

    for index in range(0, len(parts), 2):
        part = parts[index]
        if part and part not in spec.allow_list and not _a_role(part):
            parts[index] = as_person(part)
    qualified = "".join(parts) + _qualifier(name[len(person) :], as_person, spec, common=lexicon())
    if len(qualified) <= MAX_SPEAKER_NAME_CHARS:
        return qualified
    # Labels are longer than most names: what does not fit is left out whole, never
    # cut (a cut label is a malformed one).
    kept = parts[0]
    for index in range(1, len(parts) - 1, 2):
        if len(kept + parts[index] + parts[index + 1]) > MAX_SPEAKER_NAME_CHARS - 2:
            return kept + " …"
        kept += parts[index] + parts[index + 1]
    return kept


MASK = "<PERSON>"  # as a page masks a person in a message's text (masking.TextPart.label)


def speaker_masked(name: str, *, spec: presidio.PolicySpec) -> str:
    """``name`` as a page shows it: each person in it masked as a page masks a person in
    a message's text, when the policy redacts people; a qualifier, a pseudonym and a
    name the policy allows stay ("Tom (agent)" -> "<PERSON> (agent)", "<PERSON_2>
    (agent)" as it is). A role given as a name ("Narrator") is masked too unless the
    policy allows it: telling it from a name takes the spaCy lexicon, which a page does
    not load."""
    person, parts = _people(name, spec)
    if not parts:
        return name
    for index in range(0, len(parts), 2):
        part = parts[index]
        if part and part not in spec.allow_list and not LABEL.fullmatch(part):
            parts[index] = MASK  # a pseudonym stored at ingest is shown as it is
    return "".join(parts) + _qualifier(name[len(person) :], lambda _: MASK, spec)


def _qualifier(
    qualifier: str,
    replace: Callable[[str], str],
    spec: presidio.PolicySpec,
    *,
    common: frozenset[str] = frozenset(),
) -> str:
    """A name's qualifier with each first name in it replaced ("(Rachel's date)"): the
    qualifier says a role, and a role said through someone names them. A first name that
    is also a word of the lexicon ``common`` ("Boss", "Page") is one only as someone's
    ("Mark's manager"); without a lexicon (a page loads none), every first name is."""
    if not qualifier:
        return qualifier
    from governance.redaction.name_recognizers import name_lists

    first_names, _ = name_lists()

    def named(match: re.Match[str]) -> str:
        word = match.group()
        if word not in first_names or word in spec.allow_list:
            return word
        if word.lower() in common and not qualifier.startswith(_POSSESSIVE, match.end()):
            return word
        return replace(word)

    return _LETTERS.sub(named, qualifier)
