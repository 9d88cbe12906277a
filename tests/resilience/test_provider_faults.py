"""The model provider down, slow and rate-limiting, with a real worker and a real HTTP
provider: the run shows it is retrying and why (never stuck running), memory stays as it
was meanwhile, and once the provider answers the run completes exactly once, even after
an outage longer than its retries."""

from __future__ import annotations

import time

import pytest

from memory.models import Observation, ObserverRun, PipelineRun
from memory.pipeline.sweep import pipeline_sweep
from memory.services.conversations import conversation_create
from tests.memory.celery_workers import Worker, wait_until
from tests.memory.fake_openai import Behaviour, completion, rate_limited, server_error, slow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.once]

NOTE = "- [high] (2026-03-10) User wants a refund for order ORD-1 {refs: 1,2}"
TURNS = [
    {"role": "user", "content": "My order ORD-1 arrived broken, I want a refund."},
    {"role": "user", "content": "Please hurry, I need the money before March 10."},
]


@pytest.mark.parametrize(
    ("fault", "error_says"),
    [
        (server_error(503), "503"),
        (slow(6, content=NOTE), "timed out"),
        (rate_limited("1"), "429"),
    ],
    ids=["down", "slow", "rate-limiting"],
)
def test_a_provider_fault_shows_as_retrying_then_the_run_completes_once(
    api, llm_workspace, fake_openai, broker, workers, fault: Behaviour, error_says: str
):
    fake_openai.default = fault  # until the run has shown it is retrying
    env = {"MEMDESK_OPENAI_MAX_RETRIES": "0", "MEMDESK_OPENAI_TIMEOUT": "2"}
    workers.append(Worker("w1", broker, env))
    conversation = conversation_create(workspace=llm_workspace)
    response = api.post(
        f"/v1/conversations/{conversation.pk}/messages/bulk", {"messages": TURNS}, format="json"
    )
    assert response.status_code == 201
    run = ObserverRun.objects.get(conversation=conversation)

    retrying = wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="retrying").first(),
        timeout=60,
        what="the run to show it is retrying",
        logs=workers,
    )
    assert error_says in retrying.error.lower() or error_says in retrying.error
    assert retrying.next_attempt_at is not None
    assert not Observation.objects.filter(conversation=conversation).exists()
    # Through the API too: the run says what is going on.
    shown = api.get(f"/v1/runs/{run.pk}")
    assert shown.status_code == 200, shown.content
    assert shown.json()["status"] in {"retrying", "running"}

    fake_openai.default = completion(NOTE)
    done = wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").first(),
        timeout=60,
        what="the retried run to finish",
        logs=workers,
    )
    assert done.attempts == fake_openai.request_count >= 2
    assert Observation.objects.filter(conversation=conversation).count() == 1


def test_runs_an_outage_outlasts_wait_for_the_provider_and_complete_once_it_answers(
    api, llm_workspace, fake_openai, broker, workers, settings
):
    # One failure opens the breaker for a second. The sweeper runs here, the runs in the
    # worker: the two processes share the breaker through the cache (Redis).
    breaker = {"MEMDESK_OPENAI_BREAKER_FAILURES": "1", "MEMDESK_OPENAI_BREAKER_COOLDOWN": "1"}
    settings.MEMDESK_OPENAI_BREAKER_FAILURES = 1
    settings.MEMDESK_OPENAI_BREAKER_COOLDOWN = 1
    fake_openai.default = server_error(503)
    conversations = [conversation_create(workspace=llm_workspace) for _ in range(2)]
    for conversation in conversations:
        response = api.post(
            f"/v1/conversations/{conversation.pk}/messages/bulk", {"messages": TURNS}, format="json"
        )
        assert response.status_code == 201
    runs = ObserverRun.objects.filter(conversation__in=conversations)
    assert runs.count() == 2
    # Their retries spent during the outage: the attempt the worker makes is the last.
    runs.update(attempts=PipelineRun.MAX_ATTEMPTS - 1)
    workers.append(Worker("w1", broker, {"MEMDESK_OPENAI_MAX_RETRIES": "0", **breaker}))

    waiting = wait_until(
        lambda: (
            (found := list(runs.filter(status="retrying", next_attempt_at=None)))
            and len(found) == 2
            and found
        ),
        timeout=60,
        what="both runs to wait for the provider",
        logs=workers,
    )
    assert all("waiting for the provider" in run.error for run in waiting)
    assert not Observation.objects.filter(conversation__in=conversations).exists()

    fake_openai.default = completion(NOTE)
    swept = [0.0]

    def completed() -> bool:
        if time.monotonic() - swept[0] >= 1:  # beat sends the sweep every minute
            pipeline_sweep()
            swept[0] = time.monotonic()
        return runs.filter(status="succeeded").count() == 2

    wait_until(completed, timeout=60, what="the waiting runs to complete", logs=workers)
    for conversation in conversations:
        assert Observation.objects.filter(conversation=conversation).count() == 1
