"""A provider outage longer than a run's retries: the run does not fail, it waits for the
provider (retrying, with no next attempt of its own), and once the provider answers
again (its circuit breaker closes) the sweeper sends it again and it completes. A run
whose provider answers others and still fails it, fails."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from memory.engines import openai_engine
from memory.models import Conversation, Observation, ObserverRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule
from memory.pipeline.sweep import pipeline_sweep
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.fake_openai import completion, server_error

NOTE = "- [high] (2026-03-10) User wants a refund for order ORD-1 {refs: 1}"
# Seconds the breaker stays open before it lets one trial call through.
COOLDOWN = 60


@pytest.fixture
def breaker_clock(monkeypatch) -> SimpleNamespace:
    """The clock the provider's circuit breaker reads, moved on by ``clock.passes(s)``
    instead of waiting for its cooldown."""
    clock = SimpleNamespace(offset=0.0)
    clock.passes = lambda seconds: setattr(clock, "offset", clock.offset + seconds)
    monkeypatch.setattr(
        openai_engine,
        "time",
        SimpleNamespace(
            time=lambda: time.time() + clock.offset, monotonic=time.monotonic, sleep=time.sleep
        ),
    )
    return clock


@pytest.fixture
def provider_outage(workspace, fake_openai, settings):
    """The workspace's provider answers 503 to every call; one failed call opens its
    breaker for COOLDOWN seconds."""
    workspace.engine = "openai"
    workspace.llm_base_url = fake_openai.base_url
    workspace.save()
    fake_openai.default = server_error(503)
    settings.MEMDESK_OPENAI_MAX_RETRIES = 0
    settings.MEMDESK_OPENAI_BREAKER_FAILURES = 1
    settings.MEMDESK_OPENAI_BREAKER_COOLDOWN = COOLDOWN
    return fake_openai


def _chat(workspace, user_id: str) -> Conversation:
    conversation = conversation_create(workspace=workspace, user_id=user_id)
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="My order ORD-1 arrived broken, refund me.")],
    )
    return conversation


def test_runs_an_outage_outlasts_wait_for_the_provider_and_complete_once_it_answers(
    api, workspace, provider_outage, breaker_clock, django_capture_on_commit_callbacks
):
    runs = [
        observer_schedule(conversation=_chat(workspace, user), trigger="threshold")
        for user in ("dana", "lee", "kim")
    ]
    # Each run's last attempt (its retries spent during the outage) fails.
    for run in runs:
        outcome = observer_run_execute(run_id=run.pk, final_attempt=True)
        assert not outcome.retry  # no retry of the task's own: the run waits

    body = api.get(f"/v1/runs/{runs[0].pk}").json()
    assert body["status"] == "retrying"
    assert body["nextAttemptAt"] is None and body["finishedAt"] is None
    assert "503" in body["error"] and "waiting for the provider" in body["error"]
    assert provider_outage.request_count == 1  # the breaker spared the provider the rest

    # While the breaker is open the sweeper sends none of them.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert pipeline_sweep()["resumed"] == 0
    assert not sent

    provider_outage.default = completion(NOTE)
    breaker_clock.passes(COOLDOWN + 1)
    # The cooldown is over: one run goes as the trial call, the others wait for it.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert pipeline_sweep()["resumed"] == 1
    assert observer_run_execute(run_id=runs[0].pk).run.status == "succeeded"

    # It answered, the breaker closed: every other waiting run is sent.
    with django_capture_on_commit_callbacks(execute=False) as sent:
        assert pipeline_sweep()["resumed"] == 2
    assert len(sent) == 2
    for run in runs[1:]:
        assert observer_run_execute(run_id=run.pk).run.status == "succeeded"
    assert [Observation.objects.filter(conversation=r.conversation).count() for r in runs] == [
        1,
        1,
        1,
    ]


def test_a_run_its_provider_fails_while_answering_others_fails(
    api, workspace, provider_outage, settings
):
    # The breaker never opens: whatever fails this run, the provider is not down.
    settings.MEMDESK_OPENAI_BREAKER_FAILURES = 1000
    run = observer_schedule(conversation=_chat(workspace, "dana"), trigger="threshold")

    outcome = observer_run_execute(run_id=run.pk, final_attempt=True)

    assert outcome.run.status == "failed" and not outcome.retry
    assert ObserverRun.objects.get(pk=run.pk).finished_at is not None
