"""Workspace pseudonyms: ``<PERSON_1>`` is the same person everywhere in a workspace.

Identity. A value is normalised for its type (``normalise``: case and spacing of names,
the digits of phone and card numbers, the lower case of e-mail addresses) and found
again by a keyed digest of the workspace, the type and the normalised value, so two
spellings of one e-mail address are one pseudonym, and the digest column tells nothing
to someone without the key. Numbers count per workspace and type in order of first
sight, and are never given twice (see ``Pseudonym``).

Secrecy. The value is stored as a Fernet token. The Fernet key and the digest key both
derive from ``MEMDESK_PSEUDONYM_KEY`` (or, unset, from ``SECRET_KEY``) by Django's
``salted_hmac`` with a salt of their own: changing that secret makes stored pseudonyms
unreadable, which is why production sets a key of its own.

Lifecycle. Each use records which raw object holds the value (``PseudonymSighting``):
the message it was found in, or, for a value found in an observation or reflection, the
source messages that contain it. When retention, erasure or a deleted conversation
removes the last sighting, ``pseudonyms_forget_unheld`` erases the value and the digest;
what derived memory says about ``<PERSON_1>`` is anonymous from then on.

What a label stands for is revealed, or put back for agents, by
``governance.redaction.reveal``.

Nothing here logs a value: ids, labels and counts only.
"""

from __future__ import annotations

import base64
import functools
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone
from django.utils.crypto import salted_hmac

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from governance.models import (
    Pseudonym,
    PseudonymSighting,
    RedactionFinding,
    RedactionPolicy,
)
from governance.redaction.labels import label_meant
from governance.redaction.speakers import (
    conversation_speakers,
    conversations_speakers,
    people_of,
    roles_among,
)
from memory.models import Message, Observation, Reflection
from tenancy.models import Workspace

DIGEST_SALT = "memdesk.governance.pseudonyms.digest"
FERNET_SALT = "memdesk.governance.pseudonyms.fernet"
# Numbering is serialised per workspace (see _serialise); the unique constraints are the
# backstop, and a writer that collides reads the new highest number and tries again.
ALLOCATION_ATTEMPTS = 10

# How a type's values are compared: the digits of numbers written with any separators,
# the lower case of addresses, the upper case without spaces or hyphens of codes, and
# otherwise (names, places, custom types) case-folded with spacing collapsed.
DIGITS_ONLY = frozenset(
    {"PHONE_NUMBER", "CREDIT_CARD", "US_SSN", "US_ITIN", "US_BANK_NUMBER", "UK_NHS"}
)
LOWER_CASE = frozenset({"EMAIL_ADDRESS", "IP_ADDRESS", "URL", "MAC_ADDRESS", "UUID"})
COMPACT_CODES = frozenset({"IBAN_CODE", "US_PASSPORT", "US_DRIVER_LICENSE", "MEDICAL_LICENSE"})
PERSON = "PERSON"
# The titles a name may follow ("Dr. Baldhara"): "Dr. Baldhara" is found by "Baldhara".
HONORIFIC = "mr|mrs|ms|mx|miss|dr|prof|sir|dame|mister|madam"
HONORIFICS = frozenset(HONORIFIC.split("|"))
_NOT_DIGIT = re.compile(r"[^0-9]")
_SPACE_OR_HYPHEN = re.compile(r"[\s-]")


class PseudonymForgotten(Exception):
    """A pseudonym used in this transaction was forgotten by a concurrent deletion: the
    caller redacts again (the value then gets a new number)."""


def normalise(entity_type: str, value: str) -> str:
    """The form of ``value`` that identifies it within its type."""
    if entity_type in DIGITS_ONLY:
        digits = _NOT_DIGIT.sub("", value)
        if digits:
            return digits
    elif entity_type in LOWER_CASE:
        return value.strip().lower()
    elif entity_type in COMPACT_CODES:
        return _SPACE_OR_HYPHEN.sub("", value).upper()
    return " ".join(value.casefold().split())


def _secret() -> str:
    return settings.MEMDESK_PSEUDONYM_KEY or settings.SECRET_KEY


def value_digest(*, workspace_id: object, entity_type: str, value: str) -> str:
    """The keyed digest that finds a value's pseudonym: HMAC-SHA256 with a key only the
    server holds, so a short value (a phone number) cannot be found by trying them all."""
    normalised = normalise(entity_type, value)
    message = f"{workspace_id}|{entity_type}|{normalised}"
    return salted_hmac(DIGEST_SALT, message, secret=_secret(), algorithm="sha256").hexdigest()


@functools.lru_cache(maxsize=4)
def _fernet(secret: str) -> Fernet:
    key = salted_hmac(FERNET_SALT, "fernet", secret=secret, algorithm="sha256").digest()
    return Fernet(base64.urlsafe_b64encode(key))


def encrypt(value: str) -> str:
    return _fernet(_secret()).encrypt(value.encode()).decode()


def decrypt(token: str) -> str | None:
    """The value, or None when the configured key cannot open the token (the secret
    changed since it was stored)."""
    try:
        return _fernet(_secret()).decrypt(token.encode()).decode()
    except InvalidToken:
        return None


def parse_label(label: str, entity_types: Iterable[str] = ()) -> tuple[str, int]:
    """A pseudonym as a person copies it from memory, as (entity type, number):
    ``<PERSON_2>``, ``PERSON_2``, or a malformed spelling older notes hold (``<PERSON2>``,
    ``person_2>``; ``labels.label_meant``, with ``entity_types`` beside the built-in
    types). A 400 otherwise, which does not repeat what was sent: it may be a value."""
    meant = label_meant(label or "", entity_types)
    if meant is None:
        raise MemdeskError(
            "invalid_label",
            "That is not a pseudonym: one is written <ENTITY_TYPE_n>, e.g. <PERSON_2>, or "
            "as memory holds it (<PERSON2>, PERSON_2).",
            field="label",
        )
    entity_type, _, number = meant[1:-1].rpartition("_")
    return entity_type, int(number)


# --- numbering ------------------------------------------------------------------------------


class WorkspacePseudonyms:
    """The ``Pseudonymiser`` of one workspace (``governance.redaction.presidio.Pseudonymiser``).

    Allocating (the default): a value never seen gets the next number of its type,
    inserted in the caller's transaction, so a redaction that rolls back gives its
    numbers back. Read-only (``allocate=False``, for previews): nothing is written; a
    new value gets the number it *would* get, counted on from the highest stored one,
    and its label is listed in ``new_labels``.

    Every pseudonym used is remembered with the value it stood for until
    ``take_used``, so the caller can record where the value was seen.

    People in scope. ``people`` names the full names of the people of what is being
    redacted (a conversation's, a window's, a text's): a first name alone, or a word
    tagged as a place that is one of their first names ("Phoebe"), gets the full name's
    pseudonym when exactly one of them has it (a participant before anyone a text merely
    mentions), and a full name tagged as a place gets the person's. A surname alone
    ("Mr. Bing") does the same when no one in scope has it as a first name. A full name
    spelt as one in scope of a better rank but for a doubled letter ("Joey Tribianni",
    "Joey Tribbiani" speaking) is that person. An ambiguous name keeps a pseudonym of its
    own. A word tagged as a place is a person the mapping holds ("Lydia") only where the
    scope already names that person (its conversations' sightings, the one-word names of
    what is redacted, or a person's label this object gave): a town the workspace once
    took for a person elsewhere stays a place ("Denver").

    A first name said before its person was in scope ("Kate is late", and later Kate
    Miller speaks) got a label of its own; the full name, numbered for the first time
    where its first name names it alone, takes that label instead of a new one, when every
    sighting of it is in the conversations in scope (``_said_before``). The label keeps
    its number and now stands for the full name (audited, ``redaction.pseudonym.name``)."""

    def __init__(self, workspace_id: uuid.UUID | str, *, allocate: bool = True) -> None:
        self.workspace_id = workspace_id
        self.allocate = allocate
        self.new_labels: set[str] = set()
        self.allocated: set[int] = set()  # ids numbered by this object
        self._by_digest: dict[str, Pseudonym] = {}
        self._ids: dict[str, int] = {}
        self._next_number: dict[str, int] = {}
        self._used: dict[int, tuple[Pseudonym, str]] = {}
        self._absent: set[str] = set()  # digests known to have no pseudonym yet
        self._serialised = False  # the workspace's numbering lock is taken
        self._exclusive = False  # ... and held on a row: nobody else numbers until commit
        self._next_allocated: dict[str, int] = {}
        # first name (normalised) -> the full names in scope that start with it, each with
        # its rank (0: a participant) and its spelling; and the same by surname
        self._people: dict[str, dict[str, tuple[int, str]]] = {}
        self._surnames: dict[str, dict[str, tuple[int, str]]] = {}
        # digests of the PERSON values the scope names: sighted in its conversations,
        # one-word names of what is redacted, or labelled a person by this object
        self._people_named: set[str] = set()
        # the conversations whose people are in scope (``people_of_conversation``)
        self._conversations: set[Any] = set()

    @classmethod
    def known(
        cls,
        workspace_id: uuid.UUID | str,
        *,
        conversation_ids: Iterable[Any] = (),
        speakers: Iterable[str] = (),
    ) -> WorkspacePseudonyms:
        """A read-only mapping to detect with (``held``): the values the workspace holds,
        and the one-word names of these conversations' speakers and of ``speakers`` (one
        query for the conversations' names; no stored value is read)."""
        known = cls(workspace_id, allocate=False)
        persons = people_of([*conversations_speakers(conversation_ids), *speakers])
        # A role a client gave as a name ("Gate Agent") names no one: "Gate" is no name.
        roles = set(roles_among(persons))
        known.people([p for p in persons if p not in roles], speakers=True)
        return known

    def people(self, names: Iterable[str], *, speakers: bool = False) -> None:
        """Add names to the people in scope: a full name found by its first word, or, after
        a title, by its surname ("Dr. Franzblau" by "Franzblau"); a one-word name as
        itself. ``speakers``: they are the conversation's participants, whom a first name
        alone names before anyone a text merely mentions (a text's names are the tagger's,
        spelling slips and all)."""
        rank = 0 if speakers else 1
        for name in names:
            full = normalise(PERSON, name)
            words = full.split()
            titled = bool(words) and words[0].rstrip(".") in HONORIFICS
            if len(words) == 1:
                # a one-word name the scope names: where it is tagged as a place, it is
                # that person (see ``label``)
                self._people_named.add(self._digest(PERSON, name))
            elif not titled or len(words) == 2:
                key = words[-1] if titled else words[0]
                written = (rank, " ".join(name.split()))
                for index, word in ((self._people, key), (self._surnames, words[-1])):
                    known = index.setdefault(word, {})
                    known[full] = min(known.get(full, written), written)

    def people_in_scope(
        self, *, conversation_ids: Iterable[Any], speakers: Iterable[str], mentioned: Iterable[str]
    ) -> None:
        """The people a first name alone may name in one write or window: those the
        ``conversation_ids`` already name, the persons of its ``speakers``' names, and the
        full names its texts mention (the tagger's PERSON values)."""
        for conversation_id in sorted(set(conversation_ids)):
            self.people_of_conversation(conversation_id)
        self.people(people_of(speakers), speakers=True)
        self.people(mentioned)

    def people_of_conversation(self, conversation_id: Any) -> None:
        """Add the people a conversation names: its messages' speakers (as stored), and
        the values of the PERSON pseudonyms it holds (decrypted here, never returned)."""
        self._conversations.add(conversation_id)
        self.people(people_of(conversation_speakers(conversation_id)), speakers=True)
        rows = Pseudonym.objects.filter(
            workspace_id=self.workspace_id,
            entity_type=PERSON,
            forgotten_at__isnull=True,
            sightings__conversation_id=conversation_id,
        ).distinct()
        for row in rows:
            self._by_digest.setdefault(row.digest, row)
            self._people_named.add(row.digest)
            value = decrypt(row.value_encrypted)
            if value is not None:
                self.people([value])

    def _person(self, entity_type: str, value: str) -> str | None:
        """The full name in scope that ``value`` stands for (see "People in scope")."""
        if entity_type not in (PERSON, "LOCATION") or not self._people:
            return None
        key = normalise(PERSON, value)
        if " " in key:
            known = self._people.get(key.split()[0], {})
            if entity_type == PERSON:
                return _spelt_alike(key, known)
            full = known.get(key)
            return full[1] if full else None
        return self._one_named(key)

    def _one_named(self, key: str, *, rank: int | None = None) -> str | None:
        """The one full name in scope the one-word ``key`` (normalised) names, as a first
        name or else as a surname, among those of the best rank there (or of ``rank``);
        None where it names none or several."""
        named = self._people.get(key) or self._surnames.get(key, {})
        if not named:
            return None
        wanted = min(r for r, _ in named.values()) if rank is None else rank
        chosen = [written for r, written in named.values() if r == wanted]
        return chosen[0] if len(chosen) == 1 else None

    def held(self, candidates: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Which of these (entity type, value) pairs the workspace holds a pseudonym for,
        found by their keyed digests in one query per thousand (``KnownValues`` of
        ``governance.redaction.recurrence``), and the one-word names of the speakers in
        scope: a participant's first name ("Rachel" where Rachel Green speaks) is found
        wherever it recurs, as a held value is, though the tagger misses it in a stage
        direction ("[cut to Phoebe and Rachel as Monica returns]")."""
        by_digest: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for pair in candidates:
            by_digest[self._digest(*pair)].append(pair)
        found: set[tuple[str, str]] = set()
        digests = sorted(by_digest)
        for start in range(0, len(digests), 1000):
            rows = Pseudonym.objects.filter(
                workspace_id=self.workspace_id,
                digest__in=digests[start : start + 1000],
                forgotten_at__isnull=True,
            )
            for row in rows:
                self._by_digest[row.digest] = row
                found.update(by_digest[row.digest])
        # Only speakers (rank 0): a name a text mentions is the tagger's reading, which
        # takes a brand for a person now and then ("Instagram Shopping").
        found.update(
            (PERSON, value)
            for entity_type, value in candidates
            if entity_type == PERSON
            and " " not in (key := normalise(PERSON, value))
            and self._one_named(key, rank=0)
        )
        return found

    def _digest(self, entity_type: str, value: str) -> str:
        return value_digest(workspace_id=self.workspace_id, entity_type=entity_type, value=value)

    def preload(self, values: Iterable[tuple[str, str]]) -> None:
        """Look up many (entity type, value) pairs in one query, before ``label``."""
        wanted = {self._digest(t, v) for t, v in values} - set(self._by_digest) - self._absent
        if wanted:
            rows = Pseudonym.objects.filter(workspace_id=self.workspace_id, digest__in=wanted)
            for row in rows:
                self._by_digest[row.digest] = row
            self._absent |= wanted - set(self._by_digest)

    def label(self, entity_type: str, value: str) -> str:
        person = self._person(entity_type, value)
        if person is not None:
            return self._label(PERSON, person, seen=value)
        if entity_type == "LOCATION" and self._digest(PERSON, value) in self._people_named:
            # The small pipeline tags first names as places ("Lydia"): one the scope
            # already names as a person is that person. Only there: a town the workspace
            # once took for a person elsewhere ("Denver") is a place where it is one.
            return self._label(PERSON, value, seen=value)
        return self._label(entity_type, value, seen=value)

    def _label(self, entity_type: str, value: str, *, seen: str) -> str:
        """The label of ``value``, numbered if new; ``seen`` is what the text said (the
        first name of a person in scope), recorded with the pseudonym it used."""
        digest = self._digest(entity_type, value)
        if entity_type == PERSON:
            self._people_named.add(digest)  # a person's label given: the scope names them
        row = self._stored(digest)
        if row is None:
            earlier = self._said_before(entity_type, value)
            if earlier is not None:
                row = self._named(earlier, value, digest) if self.allocate else earlier
            elif self.allocate:
                row = self._allocated(entity_type, value, digest)
            else:
                row = self._would_allocate(entity_type, digest)
            self._by_digest[digest] = row
        if row.pk is not None:
            self._used.setdefault(row.pk, (row, seen))
            self._ids[row.label] = row.pk
        return row.label

    def _said_before(self, entity_type: str, value: str) -> Pseudonym | None:
        """The pseudonym a new full name's first name was given alone, before its person
        was in scope: where the first name names only this full name in scope, and every
        sighting of it is in the conversations in scope (a first name also said in another
        conversation may be someone else there). None where there is none."""
        words = normalise(entity_type, value).split()
        if entity_type != PERSON or len(words) < 2 or not self._conversations:
            return None
        first = words[0]
        if first.rstrip(".") in HONORIFICS:
            return None
        named = self._one_named(first)
        if named is None or normalise(PERSON, named) != " ".join(words):
            return None
        row = self._stored(self._digest(PERSON, first))
        if row is None or row.pk is None or not row.is_held:
            return None
        seen_in = set(
            PseudonymSighting.objects.filter(pseudonym=row)
            .values_list("conversation_id", flat=True)
            .distinct()
        )
        return row if seen_in and seen_in <= set(_uuids(self._conversations)) else None

    def _stored(self, digest: str) -> Pseudonym | None:
        """The pseudonym of ``digest``: as this object last saw it, else as stored (not
        asked again for a digest known to have none)."""
        row = self._by_digest.get(digest)
        if row is None and digest not in self._absent:
            row = Pseudonym.objects.filter(workspace_id=self.workspace_id, digest=digest).first()
            if row is not None:
                self._by_digest[digest] = row
        return row

    def _numbering_lock(self, digest: str) -> Pseudonym | None:
        """Take the workspace's numbering lock (``_serialise``) if this object does not
        hold it yet; the pseudonym whoever held it before gave ``digest``, if they did."""
        if self._serialised:
            return None
        self._absent.add(digest)
        self._serialise()
        return self._by_digest.get(digest)

    def _named(self, earlier: Pseudonym, value: str, digest: str) -> Pseudonym:
        """``earlier`` (a first name's pseudonym, see ``_said_before``) made the full name
        ``value``'s: same number, the full name's digest and value. Under the numbering
        lock, as a number is given; where someone else numbered the full name meanwhile,
        or forgot ``earlier``, theirs (or a new number) is used instead."""
        if (numbered := self._numbering_lock(digest)) is not None:
            return numbered
        renamed = Pseudonym.objects.filter(
            pk=earlier.pk, digest=earlier.digest, forgotten_at__isnull=True
        ).update(digest=digest, value_encrypted=encrypt(value))
        if not renamed:
            return self._allocated(PERSON, value, digest)
        self._by_digest.pop(earlier.digest, None)
        self._absent.add(earlier.digest)
        self._absent.discard(digest)
        earlier.digest = digest
        audit_record(
            workspace_id=self.workspace_id,
            actor=SYSTEM_ACTOR,
            action="redaction.pseudonym.name",
            target_type="pseudonym",
            target_id=earlier.label,
            before={"words": 1},
            after={"words": len(value.split())},
        )
        return earlier

    def id_of(self, label: str) -> int | None:
        """The stored pseudonym behind a label this object gave out (None in previews)."""
        return self._ids.get(label)

    def take_used(self) -> list[tuple[Pseudonym, str]]:
        """The pseudonyms used since the last call, each with a value it stood for."""
        used = list(self._used.values())
        self._used.clear()
        return used

    def _highest(self, entity_type: str) -> int:
        # Tombstones count: a forgotten number is never given to another value.
        top = Pseudonym.objects.filter(
            workspace_id=self.workspace_id, entity_type=entity_type
        ).aggregate(top=Max("number"))["top"]
        return int(top or 0)

    def _serialise(self) -> None:
        """Take the workspace's numbering lock, held to the commit: its policy row, FOR NO
        KEY UPDATE (rows that merely reference it never wait). Without it, two
        writers numbering the same new values in different orders wait on each other's
        uncommitted index entries, and PostgreSQL breaks that deadlock by failing one.
        Values looked up before the lock are looked up again: whoever held it before may
        have numbered them."""
        locked = RedactionPolicy.objects.select_for_update(no_key=True).filter(
            workspace_id=self.workspace_id
        ).exists() or (  # no policy stored (callers outside the gates): the workspace row
            Workspace.objects.select_for_update(no_key=True).filter(pk=self.workspace_id).exists()
        )
        self._serialised = True
        self._exclusive = bool(locked)
        if self._absent:
            rows = Pseudonym.objects.filter(workspace_id=self.workspace_id, digest__in=self._absent)
            for row in rows:
                self._by_digest[row.digest] = row
            self._absent -= set(self._by_digest)
            if not self._exclusive:
                self._absent.clear()  # nothing stops others numbering them meanwhile

    def _would_allocate(self, entity_type: str, digest: str) -> Pseudonym:
        number = self._next_number.get(entity_type) or self._highest(entity_type) + 1
        self._next_number[entity_type] = number + 1
        row = Pseudonym(workspace_id=self.workspace_id, entity_type=entity_type, number=number)
        self.new_labels.add(row.label)
        return row

    def _allocated(self, entity_type: str, value: str, digest: str) -> Pseudonym:
        if not connection.in_atomic_block:
            # The number, the redacted text and the sightings commit together or not at all.
            raise RuntimeError("pseudonyms are allocated inside the redaction's transaction")
        if (numbered := self._numbering_lock(digest)) is not None:
            return numbered
        for _ in range(ALLOCATION_ATTEMPTS):
            number = self._next_allocated.get(entity_type) or self._highest(entity_type) + 1
            try:
                with transaction.atomic():  # a savepoint: a collision leaves the rest intact
                    row = Pseudonym.objects.create(
                        workspace_id=self.workspace_id,
                        entity_type=entity_type,
                        number=number,
                        digest=digest,
                        value_encrypted=encrypt(value),
                    )
            except IntegrityError:
                # Only without the lock (the workspace row is gone): another transaction
                # took this number, or numbered this very value, and has committed.
                self._next_allocated.pop(entity_type, None)
                existing = Pseudonym.objects.filter(
                    workspace_id=self.workspace_id, digest=digest
                ).first()
                if existing is not None:
                    return existing
                continue
            if self._exclusive:
                self._next_allocated[entity_type] = number + 1
            self._absent.discard(digest)
            self.allocated.add(row.pk)
            return row
        raise MemdeskError(
            "pseudonym_busy",
            f"Could not number a new {entity_type} pseudonym after {ALLOCATION_ATTEMPTS} "
            "attempts: too many concurrent writers. Try again.",
            status_code=503,
        )


# --- where values are held ------------------------------------------------------------------


_DOUBLED = re.compile(r"(\w)\1+")


def _spelt_alike(key: str, known: dict[str, tuple[int, str]]) -> str | None:
    """The full name in scope that ``key`` (a full name, normalised) spells with a letter
    doubled or single ("Joey Tribianni" for the participant "Joey Tribbiani"), of a better
    rank than ``key``'s own; None when there is none or two tie."""
    single = _DOUBLED.sub(r"\1", key)
    alike = [
        ranked
        for full, ranked in known.items()
        if full != key and _DOUBLED.sub(r"\1", full) == single
    ]
    if not alike:
        return None
    best = min(rank for rank, _ in alike)
    chosen = [written for rank, written in alike if rank == best]
    own = known.get(key)
    if len(chosen) != 1 or (own is not None and own[0] <= best):
        return None
    return chosen[0]


def _source_messages(
    target_type: str, targets: Sequence[Message | Observation | Reflection]
) -> dict[Any, list[Message]]:
    """The source messages of observations (directly) or reflections (through their
    observations), by target id, in one or two queries."""
    message_ids: dict[Any, list[str]] = {}
    if target_type == RedactionFinding.TargetType.OBSERVATION:
        for target in targets:
            message_ids[target.pk] = [str(i) for i in getattr(target, "source_message_ids", [])]
    elif target_type == RedactionFinding.TargetType.REFLECTION:
        observation_ids = {
            target.pk: [str(i) for i in getattr(target, "source_observation_ids", [])]
            for target in targets
        }
        wanted = {i for ids in observation_ids.values() for i in ids}
        rows = Observation.objects.filter(pk__in=_uuids(wanted))
        sources = {str(pk): ids for pk, ids in rows.values_list("pk", "source_message_ids")}
        for target_id, ids in observation_ids.items():
            message_ids[target_id] = [str(m) for i in ids for m in sources.get(i) or []]
    wanted_messages = _uuids({i for ids in message_ids.values() for i in ids})
    messages = {str(m.pk): m for m in Message.objects.filter(pk__in=wanted_messages)}
    return {
        target_id: [messages[i] for i in ids if i in messages]
        for target_id, ids in message_ids.items()
    }


def _uuid(raw: object) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


def _uuids(raw: Iterable[object]) -> list[uuid.UUID]:
    return [u for u in map(_uuid, raw) if u is not None]


def pseudonym_sightings_record(
    *,
    target_type: str,
    uses: Sequence[tuple[Message | Observation | Reflection, Sequence[tuple[Pseudonym, str]]]],
) -> int:
    """Record which raw objects hold the values of the pseudonyms used on ``targets``:
    a message holds its own; an observation's or reflection's value is held by those of
    its source messages that contain it (normalised), by all of them when none does
    verbatim (the engine reworded it), and by the object itself when it has no source
    message (written by a person or an agent). Call in the redaction's transaction."""
    uses = [(target, used) for target, used in uses if used]
    if not uses:
        return 0
    sources: dict[Any, list[Message]] = {}
    if target_type != RedactionFinding.TargetType.MESSAGE:
        sources = _source_messages(target_type, [target for target, _ in uses])
    rows: list[PseudonymSighting] = []
    normalised_contents: dict[tuple[Any, str], str] = {}

    def holds(message: Message, entity_type: str, normalised: str) -> bool:
        key = (message.pk, entity_type)
        if key not in normalised_contents:
            normalised_contents[key] = normalise(entity_type, message.content)
        return bool(normalised) and normalised in normalised_contents[key]

    for target, used in uses:
        for pseudonym, value in used:
            holders: list[tuple[str, Any, Any]] = []
            messages = sources.get(target.pk, [])
            if target_type == RedactionFinding.TargetType.MESSAGE:
                holders = [(target_type, target.pk, target.conversation_id)]
            elif messages:
                normalised = normalise(pseudonym.entity_type, value)
                holding = [
                    m for m in messages if holds(m, pseudonym.entity_type, normalised)
                ] or messages
                holders = [
                    (RedactionFinding.TargetType.MESSAGE, m.pk, m.conversation_id) for m in holding
                ]
            else:
                holders = [(target_type, target.pk, target.conversation_id)]
            rows += [
                PseudonymSighting(
                    pseudonym=pseudonym,
                    conversation_id=conversation_id,
                    target_type=holder_type,
                    target_id=holder_id,
                )
                for holder_type, holder_id, conversation_id in holders
            ]
    PseudonymSighting.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def pseudonyms_check_held(pseudonym_ids: Iterable[int]) -> None:
    """Raise PseudonymForgotten if one of these was forgotten meanwhile. Called after
    the sightings are recorded: on PostgreSQL a forgetting that started earlier has
    committed by then (the sighting's foreign key waited for its row lock), and one
    that starts later sees the sighting and keeps the pseudonym."""
    ids = sorted(set(pseudonym_ids))
    if ids and Pseudonym.objects.filter(pk__in=ids, forgotten_at__isnull=False).exists():
        raise PseudonymForgotten(f"{len(ids)} pseudonym(s) checked")


def pseudonym_ids_seen_in(*, conversation_ids: Sequence[Any]) -> set[int]:
    """The pseudonyms with a sighting in these conversations: the candidates to forget
    once the conversations are deleted."""
    rows = PseudonymSighting.objects.filter(conversation_id__in=list(conversation_ids))
    return set(rows.values_list("pseudonym_id", flat=True).distinct())


def pseudonyms_forget_unheld(
    *,
    workspace_id: Any,
    pseudonym_ids: Iterable[int],
    actor: Actor,
    target_type: str,
    target_id: str,
    reason: str = "",
) -> int:
    """Forget those of ``pseudonym_ids`` that no sighting holds any more: erase the value
    and the digest, keep the numbered tombstone. Call in the transaction that deleted
    the sightings; audited (``redaction.pseudonym.forget``, counts per type, no value)
    against what caused it (``target_type``/``target_id``: a sweep, an erasure request,
    a conversation). Returns how many were forgotten."""
    ids = sorted(set(pseudonym_ids))
    if not ids:
        return 0
    # Locked first, then checked: a redaction recording a new sighting of one of them
    # either committed before (and is seen) or waits for this and redacts again.
    candidates = list(
        Pseudonym.objects.select_for_update()
        .filter(pk__in=ids, workspace_id=workspace_id, forgotten_at__isnull=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not candidates:
        return 0
    unheld = list(
        Pseudonym.objects.filter(pk__in=candidates)
        .exclude(Exists(PseudonymSighting.objects.filter(pseudonym=OuterRef("pk"))))
        .values_list("pk", "entity_type")
    )
    if not unheld:
        return 0
    Pseudonym.objects.filter(pk__in=[pk for pk, _ in unheld]).update(
        digest="", value_encrypted="", forgotten_at=timezone.now()
    )
    by_type = Counter(entity_type for _, entity_type in unheld)
    audit_record(
        workspace_id=workspace_id,
        actor=actor,
        action="redaction.pseudonym.forget",
        target_type=target_type,
        target_id=target_id,
        after={"forgotten": len(unheld), "byEntity": dict(sorted(by_type.items()))},
        reason=reason,
    )
    return len(unheld)
