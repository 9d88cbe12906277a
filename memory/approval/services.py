"""A person's decision on a note waiting for approval: approve it (as written, or edited
first), or reject it. Either needs a reason, is audited and is served at once."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from memory.models import Observation, Reflection
from memory.services.notes import (
    edit_action,
    edit_reason,
    note_change_served,
    note_edit,
    reason_for_trail,
)

REASON_REQUIRED = "A reason is required to approve or reject memory."

NoteT = TypeVar("NoteT", Observation, Reflection)


def _locked_waiting(note: NoteT) -> NoteT:
    model = type(note)
    locked = model.objects.select_for_update().select_related("conversation").get(pk=note.pk)
    if locked.status != model.Status.WAITING:
        raise MemdeskError(
            "not_waiting",
            f"This {model._meta.verbose_name} is not waiting for approval: it is "
            f"{locked.get_status_display()}.",
            status_code=409,
        )
    return locked


def _reason(note: Observation | Reflection, reason: str) -> str:
    """The decision's reason as the trail keeps a correction's: required, and masked."""
    return reason_for_trail(
        reason, workspace_id=note.conversation.workspace_id, required=REASON_REQUIRED
    )


def _edited_first(
    locked: Observation | Reflection,
    *,
    actor: Actor,
    reason: str,
    text: str | None,
    priority: str | None,
) -> None:
    """The edit a person makes to a waiting note before approving it: its own version and
    audit event, and their words from then on."""
    if text is None and priority is None:
        return
    kind = "reflection" if isinstance(locked, Reflection) else "observation"
    edit_reason(reason=reason, text=text, priority=priority, referenced_at=None, tags=None)
    note_edit(
        locked,
        action=edit_action(kind, text=text, priority=priority, referenced_at=None, tags=None),
        actor=actor,
        reason=reason,
        text=text,
        priority=priority,
        referenced_at=None,
        tags=None,
    )


def _decided(locked: Observation | Reflection, status: str, actor: Actor, now: datetime) -> None:
    locked.status, locked.decided_by, locked.decided_at = status, actor.label, now
    locked.save(update_fields=["status", "decided_by", "decided_at"])


def _decision_record(
    locked: Observation | Reflection,
    *,
    action: str,
    actor: Actor,
    reason: str,
    after: dict[str, Any],
    now: datetime,
) -> None:
    """Serve the decision (memory version) and audit it, with how long the note waited."""
    note_change_served(
        locked,
        action=action,
        actor=actor,
        reason=reason,
        before={"status": "waiting", "waitsFor": locked.waits_for},
        after={**after, "waitedSeconds": round((now - locked.created_at).total_seconds())},
    )


def _served_again(replaced: list[Reflection], *, conversation_id: Any) -> int:
    """The sources of the stale reflections a decision ends that no active reflection
    cites, served as observations again; returns how many."""
    cited_now = {
        str(i)
        for ids in Reflection.objects.filter(
            conversation_id=conversation_id, status=Reflection.Status.ACTIVE
        ).values_list("source_observation_ids", flat=True)
        for i in ids
    }
    sources = {str(i) for r in replaced for i in r.source_observation_ids}
    return Observation.objects.filter(
        pk__in=sources - cited_now, status=Observation.Status.REFLECTED
    ).update(status=Observation.Status.ACTIVE, reflection=None)


def _replaced_by(locked: Reflection) -> list[Reflection]:
    """The stale reflections whose re-derivation ``locked`` is."""
    return list(
        Reflection.objects.select_for_update().filter(
            superseded_by=locked, status=Reflection.Status.STALE
        )
    )


def reflection_approve(
    *,
    reflection: Reflection,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
) -> Reflection:
    """Serve a waiting reflection: its sources leave the context for it (as a reflection
    made without approval does), and the stale reflection it re-derives, if any, is
    superseded. With ``text`` or ``priority``, the edit is made first."""
    reason = _reason(reflection, reason)
    with transaction.atomic():
        locked = _locked_waiting(reflection)
        _edited_first(locked, actor=actor, reason=reason, text=text, priority=priority)
        now = timezone.now()
        replaced = _replaced_by(locked)
        Observation.objects.filter(
            Q(status=Observation.Status.ACTIVE) | Q(reflection__in=replaced),
            conversation_id=locked.conversation_id,
            pk__in=[str(i) for i in locked.source_observation_ids],
        ).update(status=Observation.Status.REFLECTED, reflection=locked)
        _decided(locked, Reflection.Status.ACTIVE, actor, now)
        Reflection.objects.filter(pk__in=[r.pk for r in replaced]).update(
            status=Reflection.Status.SUPERSEDED, updated_at=now
        )
        restored = _served_again(replaced, conversation_id=locked.conversation_id)
        after = {
            "status": Reflection.Status.ACTIVE,
            "version": locked.version,
            "supersedes": [str(r.pk) for r in replaced],
            "observationsRestored": restored,
        }
        _decision_record(
            locked, action="reflection.approve", actor=actor, reason=reason, after=after, now=now
        )
    return locked


def reflection_reject(*, reflection: Reflection, actor: Actor, reason: str) -> Reflection:
    """Never serve a waiting reflection. Its sources stay served as they are (and the
    Reflector does not condense them again); a stale reflection it would have replaced
    is given up, its sources served as observations."""
    reason = _reason(reflection, reason)
    with transaction.atomic():
        locked = _locked_waiting(reflection)
        now = timezone.now()
        replaced = _replaced_by(locked)
        _decided(locked, Reflection.Status.REJECTED, actor, now)
        Reflection.objects.filter(pk__in=[r.pk for r in replaced]).update(
            status=Reflection.Status.SUPERSEDED, superseded_by=None, updated_at=now
        )
        restored = _served_again(replaced, conversation_id=locked.conversation_id)
        after = {
            "status": Reflection.Status.REJECTED,
            "givesUp": [str(r.pk) for r in replaced],
            "observationsRestored": restored,
        }
        _decision_record(
            locked, action="reflection.reject", actor=actor, reason=reason, after=after, now=now
        )
    return locked


def observation_approve(
    *,
    observation: Observation,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
) -> Observation:
    """Serve a waiting observation in place of the messages it covers (edited first, with
    ``text`` or ``priority``)."""
    reason = _reason(observation, reason)
    with transaction.atomic():
        locked = _locked_waiting(observation)
        _edited_first(locked, actor=actor, reason=reason, text=text, priority=priority)
        now = timezone.now()
        _decided(locked, Observation.Status.ACTIVE, actor, now)
        after = {"status": Observation.Status.ACTIVE, "version": locked.version}
        _decision_record(
            locked, action="observation.approve", actor=actor, reason=reason, after=after, now=now
        )
    return locked


def observation_reject(*, observation: Observation, actor: Actor, reason: str) -> Observation:
    """Never serve a waiting observation: the messages it covers stay served word for word."""
    reason = _reason(observation, reason)
    with transaction.atomic():
        locked = _locked_waiting(observation)
        now = timezone.now()
        _decided(locked, Observation.Status.REJECTED, actor, now)
        _decision_record(
            locked,
            action="observation.reject",
            actor=actor,
            reason=reason,
            after={"status": Observation.Status.REJECTED},
            now=now,
        )
    return locked


def note_approve(
    note: Observation | Reflection, *, actor: Actor, reason: str, text: str | None = None
) -> Observation | Reflection:
    """``reflection_approve`` or ``observation_approve``, whichever ``note`` is."""
    if isinstance(note, Reflection):
        return reflection_approve(reflection=note, actor=actor, reason=reason, text=text)
    return observation_approve(observation=note, actor=actor, reason=reason, text=text)


def note_reject(
    note: Observation | Reflection, *, actor: Actor, reason: str
) -> Observation | Reflection:
    """``reflection_reject`` or ``observation_reject``, whichever ``note`` is."""
    if isinstance(note, Reflection):
        return reflection_reject(reflection=note, actor=actor, reason=reason)
    return observation_reject(observation=note, actor=actor, reason=reason)
