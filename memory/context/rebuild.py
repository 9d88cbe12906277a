"""What a context was rendered from, and the context rendered again from it: "what the
agent saw at 14:02".

When a worker renders the memory block of a memory version, it notes the version's
``Manifest``: the pins, reflections and observations served, each at its note version
(an observation with its status and reflection), the seq ranges observed and the source
messages deleted by then. Ids and numbers only: the words stay in the notes and their
versions, and go with them. The read ledger keeps manifests beside its rows
(governance/ledger/); from one and a ledger row, ``context_rebuilt`` renders the body
again with the code that served it, from the notes as they stood (``note_as_kept``) and
the messages through the row's ``last_seq``. Whatever has left the database since (a
deleted pin, a message retention deleted) is named in ``Rebuilt.gaps``: the digest then
tells whether it mattered.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from memory.context.budget import budget_fit
from memory.context.rendering import RenderedContext, compose, layout, memory_block
from memory.context.tiers import MemoryTiers, Reidentifies, memory_tiers, reidentify_items
from memory.models import (
    Conversation,
    NoteT,
    Observation,
    ObservationVersion,
    Pin,
    Reflection,
    ReflectionVersion,
    note_as_kept,
)
from memory.selectors import unobserved_messages_between


@dataclass(frozen=True)
class Manifest:
    """The notes a memory version served (see the module)."""

    pins: tuple[str, ...]
    reflections: tuple[tuple[str, int], ...]  # id, version
    observations: tuple[tuple[str, int, str, str | None], ...]  # id, version, status, reflection
    intervals: tuple[tuple[int, int], ...]
    deleted_sources: tuple[str, ...]

    @classmethod
    def of(
        cls,
        tiers: MemoryTiers,
        *,
        intervals: Iterable[tuple[int, int]],
        deleted_sources: Iterable[str],
    ) -> Manifest:
        return cls(
            pins=tuple(str(p.pk) for p in tiers.pins),
            reflections=tuple((str(r.pk), r.version) for r in tiers.reflections),
            observations=tuple(
                (
                    str(o.pk),
                    o.version,
                    o.status,
                    str(o.reflection_id) if o.reflection_id else None,
                )
                for o in tiers.observations
            ),
            intervals=tuple((start, end) for start, end in intervals),
            deleted_sources=tuple(sorted(deleted_sources)),
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "pins": list(self.pins),
            "reflections": [list(r) for r in self.reflections],
            "observations": [list(o) for o in self.observations],
            "intervals": [list(i) for i in self.intervals],
            "deletedSources": list(self.deleted_sources),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            pins=tuple(data["pins"]),
            reflections=tuple((i, v) for i, v in data["reflections"]),
            observations=tuple((i, v, s, r) for i, v, s, r in data["observations"]),
            intervals=tuple((a, b) for a, b in data["intervals"]),
            deleted_sources=tuple(data["deletedSources"]),
        )


@dataclass(frozen=True)
class Rebuilt:
    rendered: RenderedContext
    # What the render lacked because it is no longer stored, in words (no stored text).
    gaps: tuple[str, ...]
    # The messages whose words it holds: the recent ones served, and those pins quote.
    message_ids: tuple[Any, ...]


def _gone(count: int, noun: str, how: str) -> str:
    """ "2 pins it served were deleted since", in words a page shows."""
    plural = count != 1
    return f"{count} {noun}{'s' if plural else ''} it served {'were' if plural else 'was'} {how}"


def _pins_as_served(conversation: Conversation, ids: Sequence[str], gaps: list[str]) -> list[Pin]:
    stored = {str(p.pk): p for p in Pin.objects.filter(conversation=conversation, pk__in=ids)}
    missing = [i for i in ids if i not in stored]
    if missing:
        gaps.append(_gone(len(missing), "pin", "deleted since"))
    return [stored[i] for i in ids if i in stored]


def _notes_as_served(
    model: type[NoteT],
    versions: type[ObservationVersion] | type[ReflectionVersion],
    conversation: Conversation,
    wanted: Sequence[tuple[str, int]],
    gaps: list[str],
) -> list[NoteT]:
    """The notes at the versions ``wanted`` names, in its order: the stored row when it
    is still at that version, else rebuilt from the version kept when it was replaced."""
    ids = [i for i, _ in wanted]
    now = {str(n.pk): n for n in model.objects.filter(conversation=conversation, pk__in=ids)}
    earlier = [(i, v) for i, v in wanted if i not in now or now[i].version != v]
    kept: dict[tuple[str, int], ObservationVersion | ReflectionVersion] = {}
    if earlier:
        id_field = f"{model._meta.model_name}_id"
        rows = versions.objects.filter(
            conversation=conversation,
            **{f"{id_field}__in": [i for i, _ in earlier]},
            version__in={v for _, v in earlier},
        )
        kept = {(str(getattr(r, id_field)), r.version): r for r in rows}
    notes, lost = [], 0
    for note_id, version in wanted:
        note = now.get(note_id)
        if note is None or note.version != version:
            version_kept = kept.get((note_id, version))
            note = note_as_kept(model, version_kept, now=note) if version_kept is not None else None
        if note is None:
            lost += 1
        else:
            notes.append(note)
    if lost:
        kind = model._meta.verbose_name
        gaps.append(_gone(lost, str(kind), "deleted with no version kept"))
    return notes


def _unobserved_count(intervals: Iterable[tuple[int, int]], last_seq: int) -> int:
    covered = sum(max(0, min(end, last_seq) - max(start, 1) + 1) for start, end in intervals)
    return last_seq - covered


def context_rebuilt(
    conversation: Conversation,
    manifest: Manifest,
    *,
    fmt: str,
    max_tokens: int | None,
    last_seq: int,
    today: date,
    reidentifier: Reidentifies | None,
) -> Rebuilt:
    """The body a read of ``conversation`` was served, rendered again from ``manifest``
    (its memory version's) and the messages through ``last_seq``, for ``today`` (the day
    it was served), with the budget it was fitted to, and the pseudonyms replaced when
    ``reidentifier`` is given (the agent was served values)."""
    gaps: list[str] = []
    pins = _pins_as_served(conversation, manifest.pins, gaps)
    reflections = _notes_as_served(
        Reflection, ReflectionVersion, conversation, manifest.reflections, gaps
    )
    for reflection in reflections:
        # Only active reflections are served (``active_reflections``), and none of those
        # is superseded: what a reflection has become since is not what was served.
        reflection.status, reflection.superseded_by_id = Reflection.Status.ACTIVE, None
    statuses = {i: (s, r) for i, _, s, r in manifest.observations}
    observations = _notes_as_served(
        Observation,
        ObservationVersion,
        conversation,
        [(i, v) for i, v, _, _ in manifest.observations],
        gaps,
    )
    for observation in observations:
        observation.status, observation.reflection_id = statuses[str(observation.pk)]
    recent = list(
        unobserved_messages_between(
            conversation_id=conversation.pk,
            intervals=manifest.intervals,
            after_seq=0,
            through_seq=last_seq,
        )
    )
    deleted = _unobserved_count(manifest.intervals, last_seq) - len(recent)
    if deleted > 0:
        gaps.append(_gone(deleted, "recent message", "deleted since"))
    if reidentifier is not None:
        reidentify_items(reidentifier, [*pins, *reflections, *observations, *recent])
    tiers = MemoryTiers(pins, reflections, observations, recent=[], today=today)
    block = memory_block(
        tiers,
        fmt="json" if fmt == "json" else "lines",
        conversation=conversation,
        deleted=frozenset(manifest.deleted_sources),
    )
    fitted = budget_fit(block, recent, max_tokens)
    laid = layout(conversation.pk, fitted=fitted, wires={}, fmt=fmt, max_tokens=max_tokens)
    return Rebuilt(
        compose(laid, fitted=fitted, fmt=fmt),
        tuple(gaps),
        message_ids=(*(m.pk for m in fitted.recent), *(p.message_id for p in pins)),
    )


@dataclass(frozen=True)
class Correction:
    """A change made to a note after a read: the version it replaced."""

    kind: str  # "observation" or "reflection"
    note_id: str
    version: int
    change: str  # "edit", "revert" or "delete"
    changed_by: str
    changed_at: datetime
    reason: str


@dataclass(frozen=True)
class Changes:
    """What memory serves differently from what a read was served."""

    corrections: list[Correction]
    # Served now and not then, as they stand (reflections first, then observations).
    added: list[Reflection | Observation]
    added_pins: int
    # Served then and not now (deleted, reflected, re-derived): (kind, id).
    left: list[tuple[str, str]]
    messages_since: int

    @property
    def none(self) -> bool:
        return not (
            self.corrections or self.added or self.added_pins or self.left or self.messages_since
        )


def changes_since(
    conversation: Conversation, manifest: Manifest, *, served_at: datetime, last_seq: int
) -> Changes:
    """How memory now differs from ``manifest`` (served at ``served_at``, through message
    ``last_seq``): the corrections since, the notes served now and not then, and the other
    way round."""
    now = memory_tiers(conversation, today=served_at.date(), reidentifier=None)
    corrections = [
        Correction(kind, str(note_id), v.version, v.change, v.changed_by, v.changed_at, v.reason)
        for kind, model, id_field in (
            ("observation", ObservationVersion, "observation_id"),
            ("reflection", ReflectionVersion, "reflection_id"),
        )
        for v in model.objects.filter(conversation=conversation, changed_at__gt=served_at)
        for note_id in [getattr(v, id_field)]
    ]
    corrections.sort(key=lambda c: c.changed_at)
    then = {i for i, _ in manifest.reflections} | {o[0] for o in manifest.observations}
    served_now: list[Reflection | Observation] = [*now.reflections, *now.observations]
    ids_now = {str(n.pk) for n in served_now}
    left = [("reflection", i) for i, _ in manifest.reflections if i not in ids_now]
    left += [("observation", o[0]) for o in manifest.observations if o[0] not in ids_now]
    return Changes(
        corrections=corrections,
        added=[n for n in served_now if str(n.pk) not in then],
        added_pins=len({str(p.pk) for p in now.pins} - set(manifest.pins)),
        left=left,
        messages_since=max(0, conversation.last_seq - last_seq),
    )
