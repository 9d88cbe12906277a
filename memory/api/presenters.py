"""What turns rows into the bodies the agent API and the MCP tools answer with."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.utils import timezone

from memory import selectors
from memory.models import Conversation, Observation, Reflection
from memory.wire import conversation_to_wire, observation_to_wire, reflection_to_wire


def conversation_page_to_wire(page: selectors.ConversationPage) -> dict[str, Any]:
    return {
        "conversations": [
            conversation_to_wire(
                c, pii_found=c.pk in page.pii_found, message_count=page.message_counts.get(c.pk, 0)
            )
            for c in page.conversations
        ],
        "next_cursor": page.next_cursor,
    }


def observations_to_wire(
    conversation: Conversation, observations: Iterable[Observation]
) -> list[dict[str, Any]]:
    observations = list(observations)
    deleted = selectors.deleted_source_ids(conversation=conversation, observations=observations)
    today = timezone.now().date()
    return [observation_to_wire(o, today=today, deleted_sources=deleted) for o in observations]


def reflections_to_wire(reflections: Iterable[Reflection]) -> list[dict[str, Any]]:
    today = timezone.now().date()
    return [reflection_to_wire(r, today=today) for r in reflections]


def versions_to_wire(changes: list[selectors.MemoryChange]) -> list[dict[str, Any]]:
    return [
        {
            "version": v.version,
            "text": v.text,
            "priority": v.priority,
            "change": v.change,
            "reason": v.reason,
            "changedBy": v.changed_by,
            "changedAt": v.changed_at.isoformat(),
            "diff": v.diff,
        }
        for v in changes
    ]
