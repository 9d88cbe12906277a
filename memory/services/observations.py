"""Observations a person or an agent writes, edits, reverts or deletes; a correction
stops the reflections built from the observation being served until they are re-derived."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from memory.grounding import grounding_score
from memory.models import (
    Conversation,
    MemorySource,
    Message,
    Observation,
    ObservationVersion,
    Priority,
    Reflection,
)
from memory.pipeline.scheduling import reflector_schedule_for_correction
from memory.references import references_in
from memory.services.conversations import memory_version_bump
from memory.services.notes import (
    edit_action,
    edit_reason,
    note_delete,
    note_deletion_record,
    note_edit,
    note_revert,
    note_snapshot,
    note_text_gated,
    note_version_check,
    reason_for_trail,
    unknown_version,
    validate_priority,
)
from memory.tokens import token_count


def observation_create(
    *,
    conversation: Conversation,
    actor: Actor,
    text: str,
    priority: str = Priority.MEDIUM,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    ticket_id: str = "",
    source_message_ids: list[uuid.UUID] | None = None,
    reason: str = "",
) -> Observation:
    """Add an observation written by a person or an agent (not by the Observer)."""
    text = (text or "").strip()
    if not text:
        raise MemdeskError("empty_text", "text must not be empty.", field="text")
    validate_priority(priority)
    references = references_in(text)
    tags = [*(tags or []), *(t for t in references.tags if t not in (tags or []))]
    ticket_id = ticket_id or references.ticket_id
    window: dict[str, Any] = {}
    source_ids: list[str] = []
    if source_message_ids:
        sources = list(
            Message.objects.filter(conversation=conversation, id__in=source_message_ids)
            .order_by("seq")
            .values("id", "seq", "created_at", "content", "tool_name")
        )
        if len(sources) != len(set(source_message_ids)):
            raise MemdeskError(
                "unknown_source_message",
                "A source message id names a message that is not in this conversation.",
                field="source_message_ids",
            )
        source_ids = [str(s["id"]) for s in sources]
        window = {
            "window_start_seq": sources[0]["seq"],
            "window_end_seq": sources[-1]["seq"],
            "window_start_at": sources[0]["created_at"],
            "window_end_at": sources[-1]["created_at"],
            "observed_at": sources[-1]["created_at"],
            "grounding": grounding_score(
                text, [f"{s['content']} {s['tool_name']}" for s in sources]
            ),
        }
    with transaction.atomic():
        observation = Observation.objects.create(
            conversation=conversation,
            text=text,
            priority=priority,
            referenced_at=referenced_at,
            source=MemorySource.MANUAL if actor.is_human else MemorySource.API,
            written_by=actor.label,
            tags=tags or [],
            topics=topics or [],
            ticket_id=ticket_id,
            source_message_ids=source_ids,
            token_count=token_count(text),
            **window,
        )
        note_text_gated(observation, actor=actor, earlier_text=text)
        memory_version_bump(conversation.pk)
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="observation.create",
            target_type="observation",
            target_id=str(observation.pk),
            after=note_snapshot(observation),
            reason=reason,
        )
    return observation


# What the Reflector reads of an observation (with its id and dates): when one of these
# changes, what a reflection says about it may no longer be true.
REFLECTED_FIELDS = ("textDigest", "priority", "referencedAt")


def _reflected_change(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return any(before[name] != after[name] for name in REFLECTED_FIELDS)


def _reflections_go_stale(
    *, observation: Observation, actor: Actor, reason: str, change: str
) -> list[Reflection]:
    """Stop serving every active reflection built from ``observation``, which was just
    edited, reverted or deleted in the caller's transaction: each becomes stale (its
    sources, as they now stand, are served in its place) and the Reflector is scheduled,
    once this commits, to re-derive it. A reflection a person edited goes stale too:
    its sources changed after the person wrote it."""
    source_id = str(observation.pk)
    candidates = Reflection.objects.select_for_update().filter(
        conversation_id=observation.conversation_id, status=Reflection.Status.ACTIVE
    )
    built_from = [r for r in candidates if source_id in {str(i) for i in r.source_observation_ids}]
    if not built_from:
        return []
    Reflection.objects.filter(pk__in=[r.pk for r in built_from]).update(
        status=Reflection.Status.STALE, updated_at=timezone.now()
    )
    conversation = observation.conversation
    for reflection in built_from:
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="reflection.stale",
            target_type="reflection",
            target_id=str(reflection.pk),
            before={"status": Reflection.Status.ACTIVE},
            after={
                "status": Reflection.Status.STALE,
                "sourceObservationId": source_id,
                "sourceChange": change,
            },
            reason=reason,
        )
    reflector_schedule_for_correction(conversation=conversation)
    return built_from


def _observation_locked(observation: Observation, *, expected_version: int | None) -> Observation:
    """The observation's row, locked for the caller's transaction, at the version the
    correction was made from (``expected_version``; None: any)."""
    locked = Observation.objects.select_for_update().get(pk=observation.pk)
    note_version_check(locked, expected_version=expected_version)
    return locked


def observation_update(
    *,
    observation: Observation,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
    expected_version: int | None = None,
) -> Observation:
    """Edit an observation, keeping the previous version and the reason for the change.
    Reflections built from it stop being served at once and are re-derived. An edit made
    from another version than ``expected_version`` is refused (``NoteVersionConflict``)."""
    reason = edit_reason(
        reason=reason, text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    reason = reason_for_trail(
        reason, workspace_id=observation.conversation.workspace_id, required=None
    )
    action = edit_action(
        "observation", text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    with transaction.atomic():
        locked = _observation_locked(observation, expected_version=expected_version)
        before, after = note_edit(
            locked,
            action=action,
            actor=actor,
            reason=reason,
            text=text,
            priority=priority,
            referenced_at=referenced_at,
            tags=tags,
        )
        if _reflected_change(before, after):
            _reflections_go_stale(
                observation=locked, actor=actor, reason=reason, change=action.split(".")[1]
            )
    return locked


def observation_delete(
    *, observation: Observation, actor: Actor, reason: str, expected_version: int | None = None
) -> None:
    """Delete an observation, keeping its last version. Reflections built from it stop
    being served at once and are re-derived from their other sources. A deletion decided
    on another version than ``expected_version`` is refused."""
    reason = reason_for_trail(reason, workspace_id=observation.conversation.workspace_id)
    with transaction.atomic():
        locked = _observation_locked(observation, expected_version=expected_version)
        note_deletion_record(locked, action="observation.delete", actor=actor, reason=reason)
        # In between: the trail records the deletion before the staleness it causes, and
        # the reflections built from it are found by its id, which deleting the row clears.
        _reflections_go_stale(observation=locked, actor=actor, reason=reason, change="delete")
        note_delete(locked)


def observation_revert(
    *,
    observation: Observation,
    version: int,
    actor: Actor,
    reason: str,
    expected_version: int | None = None,
) -> Observation:
    """Restore an earlier version's text, priority, event date and tags. The revert is
    itself an edit: it keeps the version it replaces and is audited as a revert, and
    reflections built from the observation are re-derived. A revert decided on another
    version than ``expected_version`` is refused."""
    reason = reason_for_trail(reason, workspace_id=observation.conversation.workspace_id)
    target = ObservationVersion.objects.filter(
        observation_id=observation.pk, version=version
    ).first()
    if target is None:
        raise unknown_version("observation", version)
    with transaction.atomic():
        locked = _observation_locked(observation, expected_version=expected_version)
        before, after = note_revert(
            locked, target=target, action="observation.revert", actor=actor, reason=reason
        )
        if _reflected_change(before, after):
            _reflections_go_stale(observation=locked, actor=actor, reason=reason, change="revert")
    return locked
