"""Concurrent appends to one conversation on PostgreSQL: seq stays gapless and unique."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory.models import Conversation, Message
from memory.services import (
    MessageInput,
    conversation_create,
    messages_append,
    workspace_get_or_create,
)

THREADS = 20
APPENDS_PER_THREAD = 5


@pytest.mark.django_db(transaction=True)
def test_twenty_threads_appending_at_once_give_gapless_unique_seqs():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    conversation = conversation_create(workspace=workspace_get_or_create(name="race"))
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def append(thread_no: int) -> None:
        try:
            start.wait()
            for n in range(APPENDS_PER_THREAD):
                # Mix single and bulk appends, as real agents do.
                size = 1 + (thread_no + n) % 3
                messages_append(
                    conversation=Conversation.objects.get(pk=conversation.pk),
                    items=[
                        MessageInput(role="user", content=f"t{thread_no} a{n} m{i}")
                        for i in range(size)
                    ],
                )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=append, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    expected = sum(1 + (t + n) % 3 for t in range(THREADS) for n in range(APPENDS_PER_THREAD))
    seqs = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("seq", flat=True)
    )
    assert seqs == list(range(1, expected + 1))
    assert Conversation.objects.get(pk=conversation.pk).last_seq == expected
    # Each bulk append got a consecutive block: its messages are adjacent in seq order.
    contents = list(
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("content", flat=True)
    )
    for thread_no in range(THREADS):
        for n in range(APPENDS_PER_THREAD):
            block = [c for c in contents if c.startswith(f"t{thread_no} a{n} ")]
            first = contents.index(block[0])
            assert contents[first : first + len(block)] == block
