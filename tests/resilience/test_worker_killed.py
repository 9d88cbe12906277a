"""A worker killed mid-run, with real worker processes: its run's lease stops being
renewed, the sweeper hands the run to another worker within seconds, and it completes
once; a live run that takes long keeps its lease however often the sweeper looks."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from memory.models import Message, Observation, ObserverRun
from memory.pipeline.sweep import pipeline_sweep
from memory.selectors import unobserved_messages
from memory.services.conversations import conversation_create
from tests.memory.celery_workers import Worker, wait_until
from tests.memory.fake_openai import completion, slow

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.once]

NOTE = "- [high] (2026-03-10) User wants a refund for order ORD-1 {refs: 1,2}"
TURNS = [
    {"role": "user", "content": "My order ORD-1 arrived broken, I want a refund."},
    {"role": "user", "content": "Please hurry, I need the money before March 10."},
]
# One beat a second: a dead worker's lease is gone three seconds after its last beat.
ENV = {
    "MEMDESK_OPENAI_MAX_RETRIES": "0",
    "MEMDESK_OPENAI_TIMEOUT": "120",
    "MEMDESK_RUN_HEARTBEAT_SECONDS": "1",
}


def _start_run(api, workspace) -> ObserverRun:
    conversation = conversation_create(workspace=workspace)
    response = api.post(
        f"/v1/conversations/{conversation.pk}/messages/bulk", {"messages": TURNS}, format="json"
    )
    assert response.status_code == 201
    return ObserverRun.objects.get(conversation=conversation)


def test_a_sigkilled_workers_run_is_taken_over_within_seconds_and_completes_once(
    api, llm_workspace, fake_openai, broker, workers
):
    fake_openai.enqueue(slow(120, content=NOTE), completion(NOTE))
    workers.append(Worker("doomed", broker, ENV))
    run = _start_run(api, llm_workspace)
    wait_until(
        lambda: fake_openai.request_count == 1, timeout=60, what="the model call", logs=workers
    )
    assert ObserverRun.objects.get(pk=run.pk).status == "running"

    workers[0].kill()
    killed_at = time.monotonic()
    workers.append(Worker("rescuer", broker, ENV))

    # What beat runs every minute: it finds the run once three beats are missed.
    def swept() -> bool:
        return pipeline_sweep()["requeued"] >= 1

    wait_until(swept, timeout=15, what="the sweeper to find the dead worker's run")
    assert time.monotonic() - killed_at < 10
    done = wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").first(),
        timeout=60,
        what="the rescuer to finish the run",
        logs=workers,
    )
    conversation = run.conversation
    assert done.attempts == 2
    assert fake_openai.request_count == 2
    # Nothing lost, nothing doubled.
    assert Message.objects.filter(conversation=conversation).count() == 2
    assert Observation.objects.filter(conversation=conversation).count() == 1
    assert not unobserved_messages(conversation=conversation).exists()
    assert ObserverRun.objects.filter(conversation=conversation).count() == 1


def test_a_live_run_longer_than_its_lease_is_never_taken_over(
    api, llm_workspace, fake_openai, broker, workers
):
    fake_openai.enqueue(slow(8, content=NOTE))
    workers.append(Worker("w1", broker, ENV))
    run = _start_run(api, llm_workspace)
    wait_until(
        lambda: fake_openai.request_count == 1, timeout=60, what="the model call", logs=workers
    )

    # The lease is three seconds; the model takes eight. The sweeper looks every second.
    while ObserverRun.objects.get(pk=run.pk).status == "running":
        assert pipeline_sweep()["requeued"] == 0
        current = ObserverRun.objects.get(pk=run.pk)
        if current.status == "running":
            assert current.lease_expires_at > timezone.now()
        time.sleep(1)

    done = ObserverRun.objects.get(pk=run.pk)
    assert done.status == "succeeded", workers[0].log()[-2000:]
    assert done.attempts == 1
    assert fake_openai.request_count == 1
    assert Observation.objects.filter(conversation=run.conversation).count() == 1
