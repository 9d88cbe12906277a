"""The pipeline tasks in-process (eagerly, as a worker would call them): retries until
the final attempt, and the soft time limit."""

from __future__ import annotations

import pytest
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings

from memory.engines.base import EngineError
from memory.engines.extractive import ExtractiveEngine
from memory.models import Conversation, Observation, ObserverRun, Reflection, ReflectorRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.selectors import unobserved_messages
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.tasks import MAX_RETRIES, observe_conversation, reflect_conversation
from tests.memory.factories import ObservationFactory


class _Interrupted(ExtractiveEngine):
    """Stands for a worker whose soft time limit fires while the engine works."""

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise SoftTimeLimitExceeded()

    def reflect(self, observations, *, now):
        raise SoftTimeLimitExceeded()


class _ProviderDown(ExtractiveEngine):
    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise EngineError("provider 503", retryable=True)


@pytest.fixture
def headphones_chat(workspace) -> Conversation:
    """Two messages about broken headphones, not yet observed."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="My Aero 2 headphones arrived broken."),
            MessageInput(role="assistant", content="Sorry! A refund or a replacement?"),
        ],
    )
    return conversation


def test_an_observer_run_past_its_soft_time_limit_fails_with_that_reason(
    headphones_chat, fake_engine
):
    fake_engine(_Interrupted())
    run = observer_schedule(conversation=headphones_chat, trigger="manual")

    assert observe_conversation.apply(args=[str(run.pk)]).get() == "failed"

    run.refresh_from_db()
    limit = settings.CELERY_TASK_SOFT_TIME_LIMIT
    assert run.status == "failed"
    assert run.error == f"the run exceeded its time limit of {limit} s"
    assert run.finished_at is not None and run.lease_token is None
    assert not Observation.objects.filter(conversation=headphones_chat).exists()
    assert unobserved_messages(conversation=headphones_chat).count() == 2


def test_a_reflector_run_past_its_soft_time_limit_fails_and_keeps_observations(
    headphones_chat, fake_engine
):
    ObservationFactory.create_batch(3, conversation=headphones_chat)
    fake_engine(_Interrupted())
    run = reflector_schedule(conversation=headphones_chat, trigger="manual")

    assert reflect_conversation.apply(args=[str(run.pk)]).get() == "failed"

    run = ReflectorRun.objects.get(pk=run.pk)
    assert run.error.startswith("the run exceeded its time limit of ")
    assert not Reflection.objects.filter(conversation=headphones_chat).exists()
    assert Observation.objects.filter(conversation=headphones_chat, status="active").count() == 3


def test_a_retryable_failure_is_retried_until_the_final_attempt_fails_the_run(
    headphones_chat, fake_engine
):
    fake_engine(_ProviderDown())
    run = observer_schedule(conversation=headphones_chat, trigger="manual")

    # Eagerly, each retry runs at once instead of after its backoff.
    observe_conversation.apply(args=[str(run.pk)])

    run = ObserverRun.objects.get(pk=run.pk)
    assert (run.status, run.error) == ("failed", "provider 503")
    assert run.attempts == MAX_RETRIES + 1


def test_a_run_already_taken_is_left_alone(headphones_chat):
    run = observer_schedule(conversation=headphones_chat, trigger="manual")
    observer_run_execute(run_id=run.pk)

    assert observe_conversation.apply(args=[str(run.pk)]).get() == "succeeded"
    assert ObserverRun.objects.get(pk=run.pk).attempts == 1
