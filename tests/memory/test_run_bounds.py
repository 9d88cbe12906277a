"""A run fails visibly on an error nobody anticipated, and ``?wait=true`` never outlives
the web server's timeout: past MEMDESK_RUN_WAIT_SECONDS the run is left to the workers."""

from __future__ import annotations

import logging
import time

import pytest
from django.db import OperationalError
from django.test import override_settings

from memory.engines.extractive import ExtractiveEngine
from memory.models import Conversation, Observation, ObserverRun
from memory.pipeline import on_demand
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.tasks import observe_conversation

SECRET = "My card number is 4111 1111 1111 1111, call me at dana@example.com."


@pytest.fixture
def chat_with_card_and_email(workspace) -> Conversation:
    """A chat whose first message holds a card number and an e-mail address (SECRET)."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=SECRET),
            MessageInput(role="assistant", content="Thanks, noted."),
        ],
    )
    return Conversation.objects.select_related("workspace").get(pk=conversation.pk)


class _Overflowing(ExtractiveEngine):
    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise OverflowError(f"date value out of range in {messages[0].content}")


class _DatabaseGone(ExtractiveEngine):
    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise OperationalError("server closed the connection unexpectedly")


class _Slow(ExtractiveEngine):
    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        time.sleep(30)
        return super().observe(
            messages, previous_observations=previous_observations, now=now, fidelity=fidelity
        )


def test_an_unexpected_error_fails_the_run_once_in_words_without_content(
    api, chat_with_card_and_email, fake_engine, caplog
):
    fake_engine(_Overflowing())
    run = observer_schedule(conversation=chat_with_card_and_email, trigger="manual")

    with caplog.at_level(logging.INFO):
        observe_conversation.apply(args=[str(run.pk)])

    run.refresh_from_db()
    assert (run.status, run.attempts) == ("failed", 1)  # not retried: a bug stays a bug
    body = api.get(f"/v1/runs/{run.pk}").json()
    assert body["status"] == "failed" and "OverflowError" in body["error"]
    assert "unexpected error" in body["error"]
    assert not Observation.objects.filter(conversation=chat_with_card_and_email).exists()
    logged = caplog.text
    assert str(run.pk) in logged and "OverflowError" in logged
    # The card as written (a bare "4111" can be part of a run's UUID).
    card = "4111 1111 1111 1111"
    assert card not in logged and "dana@example.com" not in logged and card not in body["error"]


def test_observe_over_the_api_fails_visibly_on_an_unexpected_error(
    api, chat_with_card_and_email, fake_engine
):
    fake_engine(_Overflowing())
    response = api.post(f"/v1/conversations/{chat_with_card_and_email.pk}/observe?wait=true")
    assert response.status_code == 200
    assert response.json()["status"] == "failed"


def test_a_lost_database_connection_is_retried_not_failed_for_good(
    chat_with_card_and_email, fake_engine
):
    fake_engine(_DatabaseGone())
    run = observer_schedule(conversation=chat_with_card_and_email, trigger="manual")

    outcome = observer_run_execute(run_id=run.pk, final_attempt=False, retry_in=10)

    assert outcome.retry and outcome.run.status == "retrying"
    assert "database connection failed (OperationalError)" in outcome.run.error
    assert outcome.run.lease_token is None


@override_settings(MEMDESK_RUN_WAIT_SECONDS=1)
def test_a_wait_that_runs_out_answers_202_and_leaves_the_run_queued_for_a_worker(
    api, chat_with_card_and_email, fake_engine, django_capture_on_commit_callbacks
):
    fake_engine(_Slow())
    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"/v1/conversations/{chat_with_card_and_email.pk}/observe?wait=true")
    assert time.monotonic() - started < 10  # the 30 s engine call was cut short

    assert response.status_code == 202
    body = response.json()
    assert response["Location"] == f"/v1/runs/{body['id']}"
    assert body["status"] == "queued"
    run = ObserverRun.objects.get(pk=body["id"])
    assert (run.status, run.attempts, run.lease_token) == ("pending", 0, None)
    assert callbacks  # sent to the workers (once when scheduled, once when given back)
    assert not Observation.objects.filter(conversation=chat_with_card_and_email).exists()

    fake_engine(ExtractiveEngine())
    observe_conversation.apply(args=[str(run.pk)])  # a worker takes it from the start
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_threaded_server_leaves_the_run_to_the_workers(
    api, chat_with_card_and_email, monkeypatch
):
    monkeypatch.setattr(on_demand, "can_interrupt_runs", lambda: False)
    with override_settings(MEMDESK_RUN_WAIT_SECONDS=1):
        response = api.post(f"/v1/conversations/{chat_with_card_and_email.pk}/observe?wait=true")
    assert response.status_code == 202
    assert ObserverRun.objects.get(pk=response.json()["id"]).status == "pending"
