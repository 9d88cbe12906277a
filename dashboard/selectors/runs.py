"""The Observer and Reflector runs of one conversation, for its run cards."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from core.errors import MemdeskError
from memory.models import Conversation, ObserverRun, ReflectorRun


@dataclass(frozen=True)
class LatestRuns:
    observer: ObserverRun | None
    reflector: ReflectorRun | None


def latest_runs(*, conversation: Conversation) -> LatestRuns:
    return LatestRuns(
        observer=ObserverRun.objects.filter(conversation=conversation)
        .order_by("-created_at")
        .first(),
        reflector=ReflectorRun.objects.filter(conversation=conversation)
        .order_by("-created_at")
        .first(),
    )


def run_get(
    *, conversation: Conversation, kind: str, run_id: uuid.UUID
) -> ObserverRun | ReflectorRun:
    model = ObserverRun if kind == "observer" else ReflectorRun
    try:
        return model.objects.get(conversation=conversation, pk=run_id)
    except model.DoesNotExist:
        raise MemdeskError(
            "not_found", "No such run in this conversation.", status_code=404
        ) from None
