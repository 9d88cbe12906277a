"""What a correction of an observation or a reflection does, whichever it is: validate
the edit, keep the version it replaces, apply it, serve it and audit it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit import audit_record, require_reason
from memory.grounding import grounding_score
from memory.models import (
    Message,
    Observation,
    ObservationVersion,
    Priority,
    Reflection,
    ReflectionVersion,
)
from memory.services.conversations import memory_version_bump
from memory.tokens import token_count

REASON_REQUIRED = "A reason is required to change memory."


def note_snapshot(item: Observation | Reflection) -> dict[str, Any]:
    """An observation or reflection as the audit trail records it."""
    snapshot: dict[str, Any] = {
        "text": item.text,
        "priority": item.priority,
        "referencedAt": item.referenced_at.isoformat() if item.referenced_at else None,
        "tags": item.tags,
        "version": item.version,
    }
    if isinstance(item, Reflection):
        snapshot["status"] = item.status
    return snapshot


def note_version_keep(
    item: Observation | Reflection, *, change: str, reason: str, actor: Actor
) -> None:
    kept: dict[str, Any] = {
        "conversation_id": item.conversation_id,
        "version": item.version,
        "text": item.text,
        "priority": item.priority,
        "referenced_at": item.referenced_at,
        "tags": item.tags,
        "change": change,
        "reason": reason,
        "changed_by": actor.label,
    }
    if isinstance(item, Reflection):
        ReflectionVersion.objects.create(reflection_id=item.pk, **kept)
    else:
        ObservationVersion.objects.create(observation_id=item.pk, **kept)


def validate_priority(priority: str) -> None:
    if priority not in Priority.values:
        raise MemdeskError(
            "invalid_priority",
            f"priority must be one of {', '.join(Priority.values)}; got {priority!r}.",
            field="priority",
        )


def _source_texts(message_ids: list[str]) -> list[str]:
    return [
        f"{content} {tool_name}"
        for content, tool_name in Message.objects.filter(pk__in=message_ids).values_list(
            "content", "tool_name"
        )
    ]


def edit_reason(
    *,
    reason: str,
    text: str | None,
    priority: str | None,
    referenced_at: datetime | None,
    tags: list[str] | None,
) -> str:
    """The reason, once the edit itself is known to be valid (else MemdeskError)."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    if text is not None and not text.strip():
        raise MemdeskError("empty_text", "text must not be empty.", field="text")
    if priority is not None:
        validate_priority(priority)
    if text is None and priority is None and referenced_at is None and tags is None:
        raise MemdeskError(
            "nothing_to_change",
            "Send at least one of content (or text), priority, referencedAt, tags.",
        )
    return reason


def _regrounded(item: Observation | Reflection) -> float | None:
    """The grounding score of an edited text: an observation against its source
    messages, a reflection against those of its source observations still stored."""
    if isinstance(item, Reflection):
        ids = [str(i) for i in item.source_observation_ids]
        texts = list(Observation.objects.filter(pk__in=ids).values_list("text", flat=True))
        return grounding_score(item.text, texts) if texts else None
    if item.source_message_ids:
        return grounding_score(item.text, _source_texts(item.source_message_ids))
    return item.grounding


def note_edit(
    item: Observation | Reflection,
    *,
    text: str | None,
    priority: str | None,
    referenced_at: datetime | None,
    tags: list[str] | None,
) -> None:
    """Change what was sent, bump the version and save. A stale reflection a person
    edits is active again: their words are served from now on."""
    if text is not None:
        item.text = text.strip()
        item.token_count = token_count(item.text)
        item.grounding = _regrounded(item)
    if priority is not None:
        item.priority = priority
    if referenced_at is not None:
        item.referenced_at = referenced_at
    if tags is not None:
        item.tags = tags
    if isinstance(item, Reflection) and item.status == Reflection.Status.STALE:
        item.status = Reflection.Status.ACTIVE
    item.version += 1
    item.updated_at = timezone.now()
    item.save()


def edit_action(
    kind: str, *, text: object, priority: object, referenced_at: object, tags: object
) -> str:
    only_priority = priority is not None and text is None and tags is None and referenced_at is None
    return f"{kind}.reprioritise" if only_priority else f"{kind}.edit"


NoteT = TypeVar("NoteT", Observation, Reflection)


def note_change_record(
    locked: NoteT,
    *,
    action: str,
    actor: Actor,
    reason: str,
    change: str,
    apply: Callable[[NoteT], None],
    after_extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The steps every correction of a locked observation or reflection takes: keep the
    version it replaces, apply it, serve it (memory version), audit it. Returns the
    snapshots before and after."""
    before = note_snapshot(locked)
    note_version_keep(locked, change=change, reason=reason, actor=actor)
    apply(locked)
    after = note_snapshot(locked)
    memory_version_bump(locked.conversation_id)
    audit_record(
        workspace_id=locked.conversation.workspace_id,
        actor=actor,
        action=action,
        target_type=action.split(".")[0],
        target_id=str(locked.pk),
        before=before,
        after={**after, **(after_extra or {})},
        reason=reason,
    )
    return before, after


def note_delete(
    locked: Observation | Reflection,
    *,
    actor: Actor,
    reason: str,
    before_delete: Callable[[], object] | None = None,
) -> None:
    """Delete a locked observation or reflection, keeping its last version, audited."""
    kind = "observation" if isinstance(locked, Observation) else "reflection"
    note_version_keep(locked, change="delete", reason=reason, actor=actor)
    audit_record(
        workspace_id=locked.conversation.workspace_id,
        actor=actor,
        action=f"{kind}.delete",
        target_type=kind,
        target_id=str(locked.pk),
        before=note_snapshot(locked),
        reason=reason,
    )
    if before_delete is not None:
        before_delete()
    conversation_id = locked.conversation_id
    locked.delete()
    memory_version_bump(conversation_id)


def note_revert_to(
    locked: Observation | Reflection, target: ObservationVersion | ReflectionVersion
) -> None:
    locked.text = target.text
    locked.token_count = token_count(target.text)
    locked.grounding = _regrounded(locked)
    locked.priority = target.priority
    locked.referenced_at = target.referenced_at
    locked.tags = target.tags
    if isinstance(locked, Reflection) and locked.status == Reflection.Status.STALE:
        locked.status = Reflection.Status.ACTIVE
    locked.version += 1
    locked.updated_at = timezone.now()
    locked.save()


def unknown_version(kind: str, version: int) -> MemdeskError:
    return MemdeskError(
        "unknown_version", f"This {kind} has no earlier version {version}.", field="version"
    )
