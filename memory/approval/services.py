"""A person's decision on a reflection waiting for approval: approve it (as written, or
edited first), or reject it. Either needs a reason, is audited and is served at once."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record, require_reason
from memory.models import Observation, Reflection
from memory.services.conversations import memory_version_bump
from memory.services.notes import edit_action, edit_reason, note_edit

REASON_REQUIRED = "A reason is required to approve or reject memory."


def _locked_waiting(reflection: Reflection) -> Reflection:
    locked = (
        Reflection.objects.select_for_update().select_related("conversation").get(pk=reflection.pk)
    )
    if locked.status != Reflection.Status.WAITING:
        raise MemdeskError(
            "not_waiting",
            f"This reflection is not waiting for approval: it is {locked.get_status_display()}.",
            status_code=409,
        )
    return locked


def _waited(locked: Reflection, now: datetime) -> dict[str, Any]:
    return {"waitedSeconds": round((now - locked.created_at).total_seconds())}


def _served_again(replaced: list[Reflection], *, cited_now: set[str]) -> int:
    """The sources of the stale reflections a decision ends that no active reflection
    cites, served as observations again; returns how many."""
    sources = {str(i) for r in replaced for i in r.source_observation_ids}
    return Observation.objects.filter(
        pk__in=sources - cited_now, status=Observation.Status.REFLECTED
    ).update(status=Observation.Status.ACTIVE, reflection=None)


def _active_citations(conversation_id: Any) -> set[str]:
    return {
        str(i)
        for ids in Reflection.objects.filter(
            conversation_id=conversation_id, status=Reflection.Status.ACTIVE
        ).values_list("source_observation_ids", flat=True)
        for i in ids
    }


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
    superseded. With ``text`` or ``priority``, the edit is made first (its own version
    and audit event, the person's words from then on)."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    with transaction.atomic():
        locked = _locked_waiting(reflection)
        if text is not None or priority is not None:
            edit_reason(reason=reason, text=text, priority=priority, referenced_at=None, tags=None)
            note_edit(
                locked,
                action=edit_action(
                    "reflection", text=text, priority=priority, referenced_at=None, tags=None
                ),
                actor=actor,
                reason=reason,
                text=text,
                priority=priority,
                referenced_at=None,
                tags=None,
            )
        now = timezone.now()
        sources = [str(i) for i in locked.source_observation_ids]
        replaced = list(
            Reflection.objects.select_for_update().filter(
                superseded_by=locked, status=Reflection.Status.STALE
            )
        )
        Observation.objects.filter(
            Q(status=Observation.Status.ACTIVE) | Q(reflection__in=replaced),
            conversation_id=locked.conversation_id,
            pk__in=sources,
        ).update(status=Observation.Status.REFLECTED, reflection=locked)
        locked.status, locked.decided_by, locked.decided_at = (
            Reflection.Status.ACTIVE,
            actor.label,
            now,
        )
        locked.save(update_fields=["status", "decided_by", "decided_at"])
        Reflection.objects.filter(pk__in=[r.pk for r in replaced]).update(
            status=Reflection.Status.SUPERSEDED, updated_at=now
        )
        restored = _served_again(replaced, cited_now=_active_citations(locked.conversation_id))
        memory_version_bump(locked.conversation_id)
        audit_record(
            workspace_id=locked.conversation.workspace_id,
            actor=actor,
            action="reflection.approve",
            target_type="reflection",
            target_id=str(locked.pk),
            before={"status": Reflection.Status.WAITING, "waitsFor": locked.waits_for},
            after={
                "status": Reflection.Status.ACTIVE,
                "version": locked.version,
                "supersedes": [str(r.pk) for r in replaced],
                "observationsRestored": restored,
                **_waited(locked, now),
            },
            reason=reason,
        )
    return locked


def reflection_reject(*, reflection: Reflection, actor: Actor, reason: str) -> Reflection:
    """Never serve a waiting reflection. Its sources stay served as they are (and the
    Reflector does not condense them again); a stale reflection it would have replaced
    is given up, its sources served as observations."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    with transaction.atomic():
        locked = _locked_waiting(reflection)
        now = timezone.now()
        replaced = list(
            Reflection.objects.select_for_update().filter(
                superseded_by=locked, status=Reflection.Status.STALE
            )
        )
        locked.status, locked.decided_by, locked.decided_at = (
            Reflection.Status.REJECTED,
            actor.label,
            now,
        )
        locked.save(update_fields=["status", "decided_by", "decided_at"])
        Reflection.objects.filter(pk__in=[r.pk for r in replaced]).update(
            status=Reflection.Status.SUPERSEDED, superseded_by=None, updated_at=now
        )
        restored = _served_again(replaced, cited_now=_active_citations(locked.conversation_id))
        memory_version_bump(locked.conversation_id)
        audit_record(
            workspace_id=locked.conversation.workspace_id,
            actor=actor,
            action="reflection.reject",
            target_type="reflection",
            target_id=str(locked.pk),
            before={"status": Reflection.Status.WAITING, "waitsFor": locked.waits_for},
            after={
                "status": Reflection.Status.REJECTED,
                "givesUp": [str(r.pk) for r in replaced],
                "observationsRestored": restored,
                **_waited(locked, now),
            },
            reason=reason,
        )
    return locked
