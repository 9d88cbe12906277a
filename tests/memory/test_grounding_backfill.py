"""manage.py grounding_backfill: notes written before grounding scores existed get the
score the pipeline gives new ones, in batches, audited once per run, printing counts."""

from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from governance.models import AuditEvent
from memory.models import Conversation, Message, Observation, Reflection
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.factories import ObservationFactory

CHAT = [
    ("user", "My Aero 2 headphones arrived broken, order ORD-123456."),
    ("assistant", "I can refund $129 or send a replacement."),
    ("user", "Refund please. I prefer email over phone calls."),
    ("assistant", "Done: the refund of $129 will land within 5 business days."),
    ("user", "Actually, I now prefer SMS over email."),  # a change the Reflector condenses
]


def _observed_and_reflected(workspace) -> Conversation:
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role=role, content=content) for role, content in CHAT],
    )
    for schedule, execute in (
        (observer_schedule, observer_run_execute),
        (reflector_schedule, reflector_run_execute),
    ):
        execute(run_id=schedule(conversation=conversation, trigger="manual").pk)
    return conversation


def _scores(conversation: Conversation) -> dict[str, float | None]:
    return {
        str(note.pk): note.grounding
        for model in (Observation, Reflection)
        for note in model.objects.filter(conversation=conversation)
    }


def _backfill(*args: str) -> str:
    out = StringIO()
    call_command("grounding_backfill", *args, stdout=out)
    return out.getvalue()


def _forget_scores() -> None:
    """What rows written before the grounding column existed look like."""
    Observation.objects.update(grounding=None)
    Reflection.objects.update(grounding=None)


def test_it_gives_old_notes_the_score_the_pipeline_gives_new_ones(workspace):
    conversation = _observed_and_reflected(workspace)
    scored_by_pipeline = _scores(conversation)
    assert Reflection.objects.exists() and None not in scored_by_pipeline.values()
    _forget_scores()

    output = _backfill("--batch-size", "1")

    assert _scores(conversation) == scored_by_pipeline
    observations = Observation.objects.count()
    reflections = Reflection.objects.count()
    assert f"observations: {observations} scored, 0 without sources" in output
    assert f"reflections: {reflections} scored, 0 without sources" in output


def test_an_invented_number_and_name_are_flagged(workspace):
    conversation = _observed_and_reflected(workspace)
    message = Message.objects.get(conversation=conversation, seq=4)
    invented = ObservationFactory(
        conversation=conversation,
        text="Assistant promised Marcus a refund of $450 within 30 days.",
        source_message_ids=[str(message.pk)],
    )
    faithful = ObservationFactory(
        conversation=conversation,
        text="Assistant said the refund of $129 will land within 5 business days.",
        source_message_ids=[str(message.pk)],
    )

    _backfill()

    invented.refresh_from_db()
    faithful.refresh_from_db()
    assert invented.needs_grounding_review and not faithful.needs_grounding_review


def test_notes_without_sources_or_whose_sources_are_gone_keep_no_score(workspace):
    conversation = _observed_and_reflected(workspace)
    manual = ObservationFactory(conversation=conversation, source_message_ids=[])
    message = Message.objects.get(conversation=conversation, seq=1)
    orphan = ObservationFactory(
        conversation=conversation, source_message_ids=[str(message.pk), str(uuid.uuid4())]
    )
    _forget_scores()

    output = _backfill()

    manual.refresh_from_db()
    orphan.refresh_from_db()
    assert manual.grounding is None and orphan.grounding is None
    assert "1 without sources, 1 with sources no longer stored" in output
    assert (
        Observation.objects.filter(grounding__isnull=False)
        .exclude(pk__in=[manual.pk, orphan.pk])
        .count()
        == Observation.objects.count() - 2
    )


def test_one_audit_event_per_run_with_the_counts_and_none_when_nothing_is_left(workspace):
    _observed_and_reflected(workspace)
    _forget_scores()
    observations, reflections = Observation.objects.count(), Reflection.objects.count()

    _backfill("--batch-size", "1")
    [event] = AuditEvent.objects.filter(action="grounding.backfill")
    again = _backfill()

    assert (event.actor_type, event.actor_id, event.actor_role) == (
        "system",
        "command:grounding_backfill",
        "system",
    )
    assert (event.target_type, event.target_id) == ("workspace", str(workspace.pk))
    assert event.after["observations"]["scored"] == observations
    assert event.after["reflections"]["scored"] == reflections
    assert event.after["finished"] is True
    assert event.reason
    # Idempotent: the second run finds nothing to score and records nothing.
    assert "observations: 0 scored" in again and "reflections: 0 scored" in again
    assert AuditEvent.objects.filter(action="grounding.backfill").count() == 1


def test_it_prints_counts_never_note_text(workspace):
    conversation = _observed_and_reflected(workspace)
    _forget_scores()

    output = _backfill()

    texts = list(
        Observation.objects.filter(conversation=conversation).values_list("text", flat=True)
    )
    assert texts and not any(text in output for text in texts)
    assert "ORD-123456" not in output and "129" not in output


def test_one_workspace_only_when_named(workspace, other_workspace):
    _observed_and_reflected(workspace)
    theirs = _observed_and_reflected(other_workspace)
    _forget_scores()

    output = _backfill("--workspace", workspace.name)

    assert f"workspace {workspace.name}" in output and other_workspace.name not in output
    assert set(_scores(theirs).values()) == {None}
    assert not AuditEvent.objects.filter(
        action="grounding.backfill", workspace_id=other_workspace.pk
    ).exists()


def test_it_refuses_an_unknown_workspace_and_a_bad_batch_size(db):
    with pytest.raises(CommandError, match="No workspace named 'nope'"):
        _backfill("--workspace", "nope")
    with pytest.raises(CommandError, match="at least 1"):
        _backfill("--batch-size", "0")
