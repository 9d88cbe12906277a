"""Writes of the governance app."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from governance.models import AuditEvent


@dataclass(frozen=True)
class Actor:
    """Who is making a change: a dashboard user, an agent's API key, or the system."""

    type: str
    id: str
    role: str = ""
    request_id: str = ""
    ip_address: str | None = None

    @property
    def is_human(self) -> bool:
        return self.type == AuditEvent.ActorType.USER

    @property
    def label(self) -> str:
        return f"{self.type}:{self.id}"


SYSTEM_ACTOR = Actor(type=AuditEvent.ActorType.SYSTEM, id="memdesk")


def audit_record(
    *,
    workspace_id: Any,
    actor: Actor,
    action: str,
    target_type: str,
    target_id: str,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str = "",
) -> AuditEvent:
    """Append one audit event. Call it inside the transaction that makes the change."""
    return AuditEvent.objects.create(
        workspace_id=workspace_id,
        actor_type=actor.type,
        actor_id=actor.id,
        actor_role=actor.role,
        action=action,
        target_type=target_type,
        target_id=target_id,
        before=before,
        after=after,
        reason=reason,
        request_id=actor.request_id,
        ip_address=actor.ip_address,
    )
