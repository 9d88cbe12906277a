"""The pins of a conversation as its pages show them."""

from __future__ import annotations

from django.db.models import F

from governance.redaction.masking import mask_pins
from memory import selectors as memory_selectors
from memory.models import Conversation, Pin

# The conversation page lists the first pins served; the context page lists them all.
PINS_SHOWN = 20


def masked_pins(*, conversation: Conversation, limit: int | None = None) -> list[Pin]:
    """Oldest first, as served (the first ``limit`` only, with one), each with
    ``message_seq`` for its link to the message, and masked as ``mask_pins`` masks."""
    pins = memory_selectors.pin_list(conversation=conversation).annotate(
        message_seq=F("message__seq")
    )
    shown: list[Pin] = list(pins if limit is None else pins[:limit])
    mask_pins(pins=shown)
    return shown
