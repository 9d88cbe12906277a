"""Who is making a change: the identity every service that writes takes and every audit
event records."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models


class ActorType(models.TextChoices):
    USER = "user", "user"
    API_KEY = "api_key", "API key"
    SYSTEM = "system", "system"


@dataclass(frozen=True)
class Actor:
    """A dashboard user, an agent's API key, or the system (a worker, a command)."""

    type: str
    id: str
    role: str = ""
    # What a person reading the audit trail knows it by (an API key's name); ``id`` is
    # what stays stable.
    name: str = ""
    request_id: str = ""
    ip_address: str | None = None

    @property
    def is_human(self) -> bool:
        return self.type == ActorType.USER

    @property
    def label(self) -> str:
        return f"{self.type}:{self.id}"

    @classmethod
    def from_label(cls, label: str) -> Actor:
        """The actor a stored ``label`` names; the system when it names none."""
        actor_type, _, actor_id = label.partition(":")
        if actor_type in ActorType.values and actor_id:
            return cls(type=actor_type, id=actor_id)
        return SYSTEM_ACTOR


SYSTEM_ACTOR = Actor(type=ActorType.SYSTEM, id="memdesk")
