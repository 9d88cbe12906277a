"""The pins of a conversation as its pages show them."""

from __future__ import annotations

from django.db.models import F

from governance.redaction.masking import mask_pins
from memory import selectors as memory_selectors
from memory.models import Conversation, Pin


def masked_pins(*, conversation: Conversation) -> list[Pin]:
    """Oldest first, as served; each with ``message_seq`` for its link to the message,
    and masked as ``mask_pins`` masks."""
    pins: list[Pin] = list(
        memory_selectors.pin_list(conversation=conversation).annotate(message_seq=F("message__seq"))
    )
    mask_pins(pins=pins)
    return pins
