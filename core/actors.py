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
    def from_label(cls, label: str, *, role: str = "") -> Actor:
        """The actor a stored ``label`` names, with the ``role`` stored beside it (a label
        is an identity, not a role: a user's role can change before a worker runs); the
        system when it names none."""
        actor_type, _, actor_id = label.partition(":")
        if actor_type in ActorType.values and actor_id:
            if actor_type == ActorType.SYSTEM:
                role = role or SYSTEM_ROLE
            return cls(type=actor_type, id=actor_id, role=role)
        return SYSTEM_ACTOR


# Every event has a role: scheduled work, the pipeline and commands act as the system.
SYSTEM_ROLE = "system"
SYSTEM_ACTOR = Actor(type=ActorType.SYSTEM, id="memdesk", role=SYSTEM_ROLE)


def command_actor(command: str) -> Actor:
    """The actor of a management command: the audit trail says which command it was.
    Whoever ran it on the server is outside what Memdesk can know."""
    return Actor(type=ActorType.SYSTEM, id=f"command:{command}", role=SYSTEM_ROLE)
