"""What a correction of an observation or a reflection does, whichever it is: validate
the edit, keep the version it replaces, apply it, serve it (memory version) and audit it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from core.actors import Actor, ActorType
from core.errors import MemdeskError
from governance.audit.writer import audit_record, audit_text_digest, require_reason
from governance.redaction.gates import (
    RedactionGateError,
    redaction_gate_for_written_note,
    texts_masked_for_display,
)
from memory.grounding import grounding_score
from memory.models import (
    MemoryNote,
    Message,
    Observation,
    ObservationVersion,
    Priority,
    Reflection,
    ReflectionVersion,
    note_state,
)
from memory.references import references_in
from memory.services.conversations import memory_version_bump
from memory.tokens import token_count

REASON_REQUIRED = "A reason is required to change memory."
# A note is a line of memory, not a document: what the API and the dashboard's forms take.
NOTE_TEXT_MAX_CHARS = 20_000


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


def reason_for_trail(
    reason: str, *, workspace_id: Any, required: str | None = REASON_REQUIRED
) -> str:
    """A correction's reason as the audit trail and the note's versions keep it: refused
    (``required``, the sentence) when blank, then each value the workspace's policy
    finds masked as its entity type ("quoting <PERSON>"). A reason often quotes the
    memory it corrects, and the trail outlives the memory. ``required`` None: a reason
    is optional, and an empty one loads no engine."""
    if required is not None:
        reason = require_reason(reason, message=required)
    [masked] = texts_masked_for_display(workspace_id=workspace_id, texts=[reason])
    return masked


def validate_priority(priority: str) -> None:
    if priority not in Priority.values:
        raise MemdeskError(
            "invalid_priority",
            f"priority must be one of {', '.join(Priority.values)}; got {priority!r}.",
            field="priority",
        )


def edit_action(
    kind: str, *, text: object, priority: object, referenced_at: object, tags: object
) -> str:
    only_priority = priority is not None and text is None and tags is None and referenced_at is None
    return f"{kind}.reprioritise" if only_priority else f"{kind}.edit"


def unknown_version(kind: str, version: int) -> MemdeskError:
    return MemdeskError(
        "unknown_version", f"This {kind} has no earlier version {version}.", field="version"
    )


class NoteVersionConflict(MemdeskError):
    """A correction made from a version of a note that another correction has since
    replaced: stored, it would silently undo that one (the fields the later writer did
    not mean to touch go back to what they saw), so it is refused and changes nothing."""

    def __init__(self, note: Observation | Reflection, *, expected_version: int) -> None:
        self.kind = "reflection" if isinstance(note, Reflection) else "observation"
        self.current_version = note.version
        self.expected_version = expected_version
        super().__init__(
            "version_conflict",
            f"This {self.kind} was changed after version {expected_version}, which this "
            f"change was made from: it is now at version {note.version}. Read it again and "
            "make the change on what it says now.",
            field="version",
            status_code=409,
        )


def note_version_check(locked: Observation | Reflection, *, expected_version: int | None) -> None:
    """Refuse a correction of ``locked`` made from another version than the one it has
    (``expected_version`` None: the caller named none, and the write goes through). The
    row is locked by the caller's transaction until the write commits, so of several
    corrections made from one version exactly one passes."""
    if expected_version is not None and expected_version != locked.version:
        raise NoteVersionConflict(locked, expected_version=expected_version)


def note_edit(
    locked: Observation | Reflection,
    *,
    action: str,
    actor: Actor,
    reason: str,
    text: str | None,
    priority: str | None,
    referenced_at: datetime | None,
    tags: list[str] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Edit a locked observation or reflection: keep the version it replaces, change what
    was sent, serve it (memory version) and audit it as ``action``. Returns the
    snapshots before and after."""
    before = _version_keep(locked, change="edit", reason=reason, actor=actor)
    typed_over = locked.text
    if text is not None:
        locked.text = text.strip()
        locked.token_count = token_count(locked.text)
        locked.grounding = _regrounded(locked)
    if priority is not None:
        locked.priority = priority
    if referenced_at is not None:
        locked.referenced_at = referenced_at
    if tags is not None:
        locked.tags = tags
    _save_corrected(locked, actor=actor)
    if text is not None:
        note_text_gated(locked, actor=actor, earlier_text=typed_over)
    return before, _change_record(locked, action=action, actor=actor, reason=reason, before=before)


def note_revert(
    locked: Observation | Reflection,
    *,
    target: ObservationVersion | ReflectionVersion,
    action: str,
    actor: Actor,
    reason: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Restore a locked observation or reflection to an earlier version's text,
    priority, event date and tags: an edit like ``note_edit``, kept and audited as a
    revert (``action``). Returns the snapshots before and after."""
    before = _version_keep(locked, change="revert", reason=reason, actor=actor)
    reverted_from = locked.text
    locked.text = target.text
    locked.token_count = token_count(target.text)
    locked.grounding = _regrounded(locked)
    locked.priority = target.priority
    locked.referenced_at = target.referenced_at
    locked.tags = target.tags
    _save_corrected(locked, actor=actor)
    # An earlier version was stored before its words went through the gate (or under a
    # policy since changed): it goes through again, as if typed now.
    note_text_gated(locked, actor=actor, earlier_text=reverted_from)
    after = _change_record(
        locked,
        action=action,
        actor=actor,
        reason=reason,
        before=before,
        after_extra={"revertedTo": target.version},
    )
    return before, after


def note_text_gated(note: Observation | Reflection, *, actor: Actor, earlier_text: str) -> None:
    """A note whose text a person or an agent just wrote, saved in the caller's
    transaction: through the redaction gate (the stored text becomes what the policy
    keeps of it), then its tags, topics and ticket id follow the text it now has
    (``_metadata_following``), so no served field keeps a word the edit or the
    redaction removed. Saves what changed."""
    typed = note.text
    try:
        redaction_gate_for_written_note(note=note, actor=actor)
    except RedactionGateError as error:
        raise MemdeskError("redaction_conflict", str(error), status_code=409) from None
    changed = _metadata_following(note, removed_from=[earlier_text, typed])
    if changed:
        note.save(update_fields=changed)


def _mentions(text: str, value: str) -> bool:
    return bool(value) and value.casefold() in text.casefold()


def _metadata_following(note: MemoryNote, *, removed_from: list[str]) -> list[str]:
    """Bring the note's tags, topics and ticket id in line with its text: a tag's value
    (``order:ZEBRA-7781``'s ``ZEBRA-7781``; a bare tag like ``fact`` is a class, not a
    word of the text) or a topic that one of the ``removed_from`` texts held and the
    note's text no longer holds is dropped; the ticket, case and order ids the text
    names are tagged, and the ticket id is the first of them once the old one is gone.
    Returns the fields changed."""

    def removed(value: str) -> bool:
        return not _mentions(note.text, value) and any(_mentions(t, value) for t in removed_from)

    references = references_in(note.text)
    tags = [t for t in note.tags if not (":" in t and removed(t.partition(":")[2]))]
    tags += [t for t in references.tags if t not in tags]
    topics = [t for t in note.topics if not removed(t)]
    changed: list[str] = []
    if tags != note.tags:
        note.tags, changed = tags, [*changed, "tags"]
    if topics != note.topics:
        note.topics, changed = topics, [*changed, "topics"]
    if isinstance(note, Observation) and note.ticket_id and removed(note.ticket_id):
        note.ticket_id, changed = references.ticket_id, [*changed, "ticket_id"]
    return changed


def note_deletion_record(
    locked: Observation | Reflection, *, action: str, actor: Actor, reason: str
) -> None:
    """Keep the last version of a locked observation or reflection about to be deleted,
    and audit its deletion as ``action``. ``note_delete`` then deletes it: the caller
    may do between the two what needs the row still there."""
    before = _version_keep(locked, change="delete", reason=reason, actor=actor)
    audit_record(
        workspace_id=locked.conversation.workspace_id,
        actor=actor,
        action=action,
        target_type=action.split(".")[0],
        target_id=str(locked.pk),
        before=before,
        reason=reason,
    )


def note_delete(locked: Observation | Reflection) -> None:
    """Delete an observation or reflection whose deletion ``note_deletion_record``
    recorded, and stop serving it."""
    conversation_id = locked.conversation_id
    locked.delete()
    memory_version_bump(conversation_id)


def note_snapshot(item: Observation | Reflection) -> dict[str, Any]:
    """An observation or reflection as the audit trail records it: its text as a digest
    (the trail outlives the note; its versions hold the words, and go with it)."""
    snapshot: dict[str, Any] = {
        "textDigest": audit_text_digest(item.text),
        "tokenCount": item.token_count,
        "priority": item.priority,
        "referencedAt": item.referenced_at.isoformat() if item.referenced_at else None,
        "tags": item.tags,
        "version": item.version,
    }
    if isinstance(item, Reflection):
        snapshot["status"] = item.status
    return snapshot


def _version_keep(
    item: Observation | Reflection, *, change: str, reason: str, actor: Actor
) -> dict[str, Any]:
    """Keep the version of ``item`` that a correction replaces, and return it as the
    audit trail records it."""
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
        "state": note_state(item),
    }
    if isinstance(item, Reflection):
        ReflectionVersion.objects.create(reflection_id=item.pk, **kept)
    else:
        ObservationVersion.objects.create(observation_id=item.pk, **kept)
    return note_snapshot(item)


def _save_corrected(item: Observation | Reflection, *, actor: Actor) -> None:
    """Bump the version, record who corrected it (a person or an agent; ``origin``) and
    save. A stale reflection a person edits is active again: their words are served
    from now on."""
    if isinstance(item, Reflection) and item.status == Reflection.Status.STALE:
        item.status = Reflection.Status.ACTIVE
    item.version += 1
    item.updated_at = timezone.now()
    if actor.type != ActorType.SYSTEM:
        item.corrected_by, item.corrected_at = actor.label, item.updated_at
    item.save()


def _change_record(
    item: Observation | Reflection,
    *,
    action: str,
    actor: Actor,
    reason: str,
    before: dict[str, Any],
    after_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Serve a correction just saved (memory version) and audit it from ``before`` to
    the note as it now stands, which is returned."""
    after = note_snapshot(item)
    note_change_served(
        item,
        action=action,
        actor=actor,
        reason=reason,
        before=before,
        after={**after, **(after_extra or {})},
    )
    return after


def note_change_served(
    item: Observation | Reflection,
    *,
    action: str,
    actor: Actor,
    reason: str,
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    """Serve a change to a note just saved (memory version) and audit it as ``action``
    (``observation.edit``: the target type is the action's first word)."""
    memory_version_bump(item.conversation_id)
    audit_record(
        workspace_id=item.conversation.workspace_id,
        actor=actor,
        action=action,
        target_type=action.split(".")[0],
        target_id=str(item.pk),
        before=before,
        after=after,
        reason=reason,
    )


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


def _source_texts(message_ids: list[str]) -> list[str]:
    return [
        f"{content} {tool_name}"
        for content, tool_name in Message.objects.filter(pk__in=message_ids).values_list(
            "content", "tool_name"
        )
    ]
