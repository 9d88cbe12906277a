"""A message write decides whether the Observer is due from the conversation's row
(``unobserved_tokens_bound``) and counts only when that cannot answer: it must schedule a
run on exactly the write the full count would, whatever happened to memory in between."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.actors import SYSTEM_ACTOR
from memory.models import Conversation, Observation, ObserverRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import unobserved_token_count
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_create, observation_delete

WORDS = [
    "refund",
    "parcel",
    "courier",
    "invoice",
    "Berlin",
    "Friday",
    "tracking",
    "warehouse",
    "label",
    "address",
]


def _write(conversation: Conversation, rng: random.Random) -> None:
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
    messages_append(conversation=conversation, items=[MessageInput(role="user", content=text)])


def _open_run(conversation: Conversation) -> ObserverRun | None:
    return ObserverRun.objects.filter(conversation=conversation, status="pending").first()


def test_a_write_below_the_threshold_asks_nothing_about_runs_or_notes(workspace):
    workspace.observer_threshold = 100_000
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    rng = random.Random(1)
    _write(conversation, rng)
    with CaptureQueriesContext(connection) as queries:
        _write(conversation, rng)
    tables = " ".join(query["sql"] for query in queries.captured_queries)
    assert "memory_observerrun" not in tables
    assert "memory_observation" not in tables
    assert "SUM(" not in tables


def test_a_deleted_note_that_covered_messages_counts_them_again(workspace):
    # A person's note over messages 1-5 covers them; deleting it uncovers them. The
    # writes in between added a few tokens only: a counter of written tokens would say
    # "far below", the full count says "due".
    workspace.observer_threshold = 100_000
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    rng = random.Random(2)
    for _ in range(5):
        _write(conversation, rng)
    note = observation_create(
        conversation=conversation,
        actor=SYSTEM_ACTOR,
        text="Customer wants a refund for a late parcel",
        source_message_ids=list(conversation.messages.values_list("id", flat=True)),
        reason="summary of the call",
    )
    # The next write counts (its bound reaches this threshold): only its own tokens are
    # unobserved, so it is not due, and the bound becomes those few tokens.
    workspace.observer_threshold = sum(conversation.messages.values_list("token_count", flat=True))
    workspace.save()
    _write(conversation, rng)
    assert _open_run(conversation) is None
    observation_delete(observation=note, actor=SYSTEM_ACTOR, reason="wrong customer")
    uncovered = unobserved_token_count(conversation=conversation)
    workspace.observer_threshold = uncovered + 1
    workspace.save()

    conversation.refresh_from_db()
    _write(conversation, rng)

    assert _open_run(conversation) is not None


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_runs_are_scheduled_on_the_very_write_the_full_count_says(workspace, seed):
    """Writes, Observer runs, notes added and deleted, and rows from before the bound,
    in a random order: after every write, a run is open exactly when the full count
    reached the threshold at that write."""
    threshold = 120
    workspace.observer_threshold = threshold
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    rng = random.Random(seed)
    notes: list[Observation] = []
    scheduled = 0
    for _ in range(60):
        step = rng.random()
        run = _open_run(conversation)
        if run is not None and step < 0.5:
            observer_run_execute(run_id=run.pk)
            continue
        if step < 0.15 and conversation.messages.exists():
            ids = list(conversation.messages.order_by("-seq").values_list("id", flat=True)[:3])
            notes.append(
                observation_create(
                    conversation=conversation,
                    actor=SYSTEM_ACTOR,
                    text="Customer asked about a parcel",
                    source_message_ids=ids,
                    reason="a note by hand",
                )
            )
            continue
        if step < 0.25 and notes:
            note = notes.pop(rng.randrange(len(notes)))
            observation_delete(observation=note, actor=SYSTEM_ACTOR, reason="not right")
            continue
        if step < 0.3:  # a conversation from before the bound existed
            Conversation.objects.filter(pk=conversation.pk).update(unobserved_tokens_bound=None)
        open_before = _open_run(conversation) is not None
        conversation.refresh_from_db()
        _write(conversation, rng)
        due = unobserved_token_count(conversation=conversation) >= threshold
        if open_before:
            continue  # one open run at a time: nothing to decide
        assert (_open_run(conversation) is not None) == due
        scheduled += due
    assert scheduled >= 2  # the sequence did cross the threshold, more than once
