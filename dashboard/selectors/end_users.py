"""One end user's conversations and the memory served from them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db.models import F

from dashboard.selectors.conversations import ConversationFilters, add_figures, conversation_search
from governance.redaction.masking import mask_pins
from memory.models import Conversation, Observation, Pin, Reflection
from tenancy.models import Workspace

END_USER_MEMORY_LIMIT = 100


@dataclass
class EndUserMemory:
    conversations: list[Conversation]
    observations: list[Observation]
    reflections: list[Reflection]
    pins: Sequence[Pin]


def end_user_memory(*, workspace: Workspace, end_user: str) -> EndUserMemory:
    """One end user's conversations in a workspace (with their figures) and the memory
    served from them: active observations and reflections, newest first, and pins."""
    conversations = list(
        conversation_search(workspace=workspace, filters=ConversationFilters(end_user=end_user))
    )
    add_figures(conversations)
    scope = {"conversation__workspace": workspace, "conversation__user_id": end_user}
    observations = list(
        Observation.objects.filter(status=Observation.Status.ACTIVE, **scope)
        .select_related("conversation")
        .order_by("-observed_at", "-created_at")[:END_USER_MEMORY_LIMIT]
    )
    reflections = list(
        Reflection.objects.filter(status=Reflection.Status.ACTIVE, **scope)
        .select_related("conversation")
        .order_by("-observed_at", "-created_at")[:END_USER_MEMORY_LIMIT]
    )
    pins = list(
        Pin.objects.filter(**scope)
        .annotate(message_seq=F("message__seq"))
        .select_related("conversation")
        .order_by("-created_at")[:END_USER_MEMORY_LIMIT]
    )
    mask_pins(pins=pins)
    return EndUserMemory(conversations, observations, reflections, pins)
