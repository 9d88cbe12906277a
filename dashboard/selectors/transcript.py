"""What the raw transcript reads beside its masked rows: who spoke each message."""

from __future__ import annotations

from collections.abc import Iterator

from memory.models import Conversation, Message


def transcript_speakers(
    *, conversation: Conversation, chunk_size: int = 2000
) -> Iterator[tuple[int, str]]:
    """(seq, speaker's name) of every message that names its speaker, oldest first,
    streamed as the transcript's rows are, for the transcript to walk beside them."""
    return (
        Message.objects.filter(conversation=conversation)
        .exclude(name="")
        .order_by("seq")
        .values_list("seq", "name")
        .iterator(chunk_size=chunk_size)
    )
