"""Concurrency on PostgreSQL: appends keep seq gapless and unique; a correction racing the
Reflector never leaves the old words served."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory.models import Conversation, Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tenancy.services import workspace_get_or_create

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


@pytest.mark.django_db(transaction=True)
def test_an_edit_racing_the_reflector_s_write_makes_what_it_wrote_stale(monkeypatch):
    """The Reflector checks its inputs unchanged and locks them before it stores what it
    made of them; an edit of one of them that arrives then waits for the write, and
    then finds the new reflection built from the old text, and makes it stale."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
    from core.actors import SYSTEM_ACTOR
    from memory.context.read import context_for_conversation
    from memory.models import Observation, Reflection, ReflectorRun
    from memory.pipeline import reflector
    from memory.pipeline.scheduling import reflector_schedule
    from memory.services.observations import observation_update
    from tests.dashboard.factories import chat, observe

    conversation = conversation_create(workspace=workspace_get_or_create(name="race"))
    chat(conversation)
    observe(conversation)
    note = Observation.objects.get(conversation=conversation, text__contains="email")
    errors: list[BaseException] = []

    def edit() -> None:
        try:
            observation_update(
                observation=note, actor=SYSTEM_ACTOR, reason="r", text="User prefers SMS."
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    editor = threading.Thread(target=edit)
    check = reflector._check_inputs_unchanged

    def check_then_let_the_edit_in(*args: object) -> None:
        check(*args)  # type: ignore[arg-type]
        editor.start()
        editor.join(timeout=0.5)
        assert editor.is_alive(), "the edit should wait for the Reflector's write"

    monkeypatch.setattr(reflector, "_check_inputs_unchanged", check_then_let_the_edit_in)
    run = reflector_schedule(conversation=conversation, trigger="manual")
    assert reflector.reflector_run_execute(run_id=run.pk).run.status == "succeeded"
    editor.join()

    assert errors == []
    [written] = [r for r in Reflection.objects.all() if str(note.pk) in r.source_observation_ids]
    assert "email" in written.text and written.status == "stale"
    conversation.refresh_from_db()
    context = context_for_conversation(conversation=conversation, fmt="text").body.decode()
    assert "email" not in context and "User prefers SMS." in context
    correction = ReflectorRun.objects.get(conversation=conversation, status="pending")
    monkeypatch.setattr(reflector, "_check_inputs_unchanged", check)
    assert reflector.reflector_run_execute(run_id=correction.pk).run.status == "succeeded"
    assert Reflection.objects.get(status="active", text__contains="SMS")
