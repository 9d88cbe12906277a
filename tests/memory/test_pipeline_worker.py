"""The pipeline with real Celery workers in separate processes (not eager mode), on
Redis when it answers (CI) and on the filesystem broker otherwise, against the
OpenAI-compatible test server. Slow by nature: each test starts worker processes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Message, Observation, ObserverRun
from memory.pipeline.sweep import pipeline_sweep
from memory.selectors import unobserved_messages
from memory.services.conversations import conversation_create
from memory.tasks import observe_conversation
from tests.memory.celery_workers import Worker, publishing_to, wait_until
from tests.memory.fake_openai import completion, slow

pytestmark = pytest.mark.django_db(transaction=True)

NOTE = "- [high] (2026-03-10) User wants a refund for order ORD-1 {refs: 1,2}"
TURNS = [
    {"role": "user", "content": "My order ORD-1 arrived broken, I want a refund."},
    {"role": "user", "content": "Please hurry, I need the money before March 10."},
]


def _worker_env(**extra: str) -> dict[str, str]:
    return {"MEMDESK_OPENAI_MAX_RETRIES": "0", "MEMDESK_OPENAI_TIMEOUT": "60", **extra}


def _post_turns(api, conversation_id) -> None:
    response = api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk", {"messages": TURNS}, format="json"
    )
    assert response.status_code == 201


def test_a_write_returns_before_the_observer_runs(api, llm_workspace, fake_openai, broker, workers):
    fake_openai.enqueue(slow(3, content=NOTE))
    workers.append(Worker("w1", broker, _worker_env()))
    conversation = conversation_create(workspace=llm_workspace)

    _post_turns(api, conversation.pk)

    # The write is stored and answered while the model is still thinking.
    assert Message.objects.filter(conversation=conversation).count() == 2
    run = ObserverRun.objects.get(conversation=conversation)
    assert run.status in {"pending", "running"}
    assert not Observation.objects.exists()

    done = wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").first(),
        timeout=60,
        what="the worker to finish the run",
        logs=workers,
    )
    assert done.engine == "openai" and done.items_out == 1
    [observation] = Observation.objects.filter(conversation=conversation)
    assert observation.text == "User wants a refund for order ORD-1"
    assert observation.priority == "high"
    assert fake_openai.request_count == 1


def test_two_workers_racing_on_one_conversation_run_each_window_once(
    api, llm_workspace, fake_openai, broker, workers
):
    fake_openai.default = slow(1, content=NOTE)
    workers.extend(Worker(name, broker, _worker_env()) for name in ("w1", "w2"))
    conversation = conversation_create(workspace=llm_workspace)
    _post_turns(api, conversation.pk)
    run = ObserverRun.objects.get(conversation=conversation)
    # The same run delivered again and again, as after broker redeliveries.
    for _ in range(4):
        observe_conversation.apply_async(args=[str(run.pk)])

    wait_until(
        lambda: (
            ObserverRun.objects.filter(pk=run.pk, status="succeeded").exists()
            and broker.pending_messages() == 0
        ),
        timeout=60,
        what="the run to finish and the queue to drain",
        logs=workers,
    )
    # Let the last duplicate deliveries be consumed and refused.
    wait_until(
        lambda: all("succeeded" in w.log() or "None" in w.log() for w in workers),
        timeout=20,
        what="both workers to have handled a delivery",
    )
    assert ObserverRun.objects.filter(conversation=conversation).count() == 1
    assert ObserverRun.objects.get(pk=run.pk).attempts == 1
    assert Observation.objects.filter(conversation=conversation).count() == 1
    assert fake_openai.request_count == 1


def test_a_worker_killed_mid_run_is_taken_over_with_nothing_lost_or_doubled(
    api, llm_workspace, fake_openai, broker, workers
):
    fake_openai.enqueue(slow(120, content=NOTE), completion(NOTE))
    env = _worker_env(MEMDESK_RUN_HEARTBEAT_SECONDS="1")
    workers.append(Worker("doomed", broker, env))
    conversation = conversation_create(workspace=llm_workspace)
    _post_turns(api, conversation.pk)
    run = ObserverRun.objects.get(conversation=conversation)
    wait_until(
        lambda: fake_openai.request_count == 1,
        timeout=60,
        what="the model call",
        logs=workers,
    )
    assert ObserverRun.objects.get(pk=run.pk).status == "running"

    workers[0].kill()

    # The lease runs out; the periodic sweeper hands the run to a new worker.
    wait_until(
        lambda: ObserverRun.objects.get(pk=run.pk).lease_expires_at < timezone.now(),
        timeout=30,
        what="the dead worker's lease to expire",
    )
    workers.append(Worker("rescuer", broker, env))
    assert pipeline_sweep()["requeued"] >= 1
    done = wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").first(),
        timeout=60,
        what="the rescuer to finish the run",
        logs=workers,
    )
    assert done.attempts == 2
    assert Observation.objects.filter(conversation=conversation).count() == 1
    assert not unobserved_messages(conversation=conversation).exists()
    assert ObserverRun.objects.filter(conversation=conversation).count() == 1


def test_with_the_broker_down_messages_are_stored_and_the_sweeper_catches_up(
    api, llm_workspace, fake_openai, broker, workers
):
    fake_openai.default = completion(NOTE)
    conversation = conversation_create(workspace=llm_workspace)
    with publishing_to("redis://127.0.0.1:1/0", queue=broker.queue):  # nothing on port 1
        _post_turns(api, conversation.pk)
    assert Message.objects.filter(conversation=conversation).count() == 2
    run = ObserverRun.objects.get(conversation=conversation)
    assert run.status == "pending"

    # The broker is back (the fixture's), a worker runs, and a minute later beat sweeps.
    workers.append(Worker("w1", broker, _worker_env()))
    ObserverRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=2))
    assert pipeline_sweep()["requeued"] == 1
    wait_until(
        lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").exists(),
        timeout=60,
        what="the swept run to finish",
        logs=workers,
    )
    assert Observation.objects.filter(conversation=conversation).count() == 1
