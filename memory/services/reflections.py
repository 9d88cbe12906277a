"""Corrections of reflections: edit, revert and delete."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from core.actors import Actor
from core.errors import MemdeskError
from memory.models import Reflection, ReflectionVersion
from memory.services.notes import (
    edit_action,
    edit_reason,
    note_delete,
    note_deletion_record,
    note_edit,
    note_revert,
    note_version_check,
    reason_for_trail,
    unknown_version,
)


def _reflection_locked(
    reflection: Reflection, *, expected_version: int | None, superseded_ok: bool = False
) -> Reflection:
    """The reflection's row, locked, at the version the correction was made from
    (``expected_version``; None: any). A superseded one is history: the Reflector
    replaced it, and a correction belongs on what replaced it (a deletion may still
    remove it)."""
    locked = (
        Reflection.objects.select_for_update()
        .select_related("conversation")
        .filter(pk=reflection.pk)
        .first()
    )
    if locked is None:
        raise MemdeskError(
            "not_found", "Reflection not found in this conversation.", status_code=404
        )
    if locked.status == Reflection.Status.SUPERSEDED and not superseded_ok:
        raise MemdeskError(
            "reflection_superseded",
            "This reflection was replaced when the Reflector re-derived it"
            + (f" (by {locked.superseded_by_id})" if locked.superseded_by_id else "")
            + "; correct the reflection that replaced it.",
            status_code=409,
        )
    note_version_check(locked, expected_version=expected_version)
    return locked


def reflection_update(
    *,
    reflection: Reflection,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
    expected_version: int | None = None,
) -> Reflection:
    """Edit a reflection, keeping the previous version and the reason for the change.

    The edit is served at once. A stale reflection that is edited is active again and
    the re-derivation leaves it as the person wrote it; only a later change to one of
    its sources makes it stale again, for the Reflector to re-derive. An edit made from
    another version than ``expected_version`` is refused (``NoteVersionConflict``)."""
    reason = edit_reason(
        reason=reason, text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    reason = reason_for_trail(
        reason, workspace_id=reflection.conversation.workspace_id, required=None
    )
    with transaction.atomic():
        locked = _reflection_locked(reflection, expected_version=expected_version)
        note_edit(
            locked,
            action=edit_action(
                "reflection", text=text, priority=priority, referenced_at=referenced_at, tags=tags
            ),
            actor=actor,
            reason=reason,
            text=text,
            priority=priority,
            referenced_at=referenced_at,
            tags=tags,
        )
    return locked


def reflection_delete(
    *, reflection: Reflection, actor: Actor, reason: str, expected_version: int | None = None
) -> None:
    """Delete a reflection, keeping its last version: what it says leaves the context at
    once. Its source observations stay stored and reflected, so they are not served in
    its place and the Reflector does not bring it back; delete them too to remove them.
    A deletion decided on another version than ``expected_version`` is refused."""
    reason = reason_for_trail(reason, workspace_id=reflection.conversation.workspace_id)
    with transaction.atomic():
        locked = _reflection_locked(
            reflection, expected_version=expected_version, superseded_ok=True
        )
        note_deletion_record(locked, action="reflection.delete", actor=actor, reason=reason)
        note_delete(locked)


def reflection_revert(
    *,
    reflection: Reflection,
    version: int,
    actor: Actor,
    reason: str,
    expected_version: int | None = None,
) -> Reflection:
    """Restore an earlier version's text, priority, event date and tags: an edit like
    ``reflection_update``, kept and audited as a revert. A revert decided on another
    version than ``expected_version`` is refused."""
    reason = reason_for_trail(reason, workspace_id=reflection.conversation.workspace_id)
    target = ReflectionVersion.objects.filter(reflection_id=reflection.pk, version=version).first()
    if target is None:
        raise unknown_version("reflection", version)
    with transaction.atomic():
        locked = _reflection_locked(reflection, expected_version=expected_version)
        note_revert(locked, target=target, action="reflection.revert", actor=actor, reason=reason)
    return locked
