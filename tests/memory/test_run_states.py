"""What a run says while it waits, retries, fails or is cancelled: over the API, in the
metrics, and in the audit trail; and that a cancelled run stores nothing."""

from __future__ import annotations

import pytest
from django.test import override_settings
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory import tasks
from memory.engines.base import EngineError
from memory.engines.extractive import ExtractiveEngine
from memory.models import Conversation, Observation, ObserverRun, PipelineRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.runs import run_cancel
from memory.pipeline.scheduling import observer_schedule
from memory.pipeline.sweep import STALE_PENDING, pipeline_sweep
from memory.selectors import unobserved_messages
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.tasks import MAX_RETRIES, observe_conversation
from tests.memory.fake_openai import server_error

SECRET = "My card number is 4111 1111 1111 1111 and I live at 12 Elm Street."


@pytest.fixture
def chat_with_card_and_address(workspace) -> Conversation:
    """A chat whose first message holds a card number and a street address (SECRET)."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=SECRET),
            MessageInput(role="assistant", content="Thanks, I'll update the address."),
        ],
    )
    return Conversation.objects.select_related("workspace").get(pk=conversation.pk)


@pytest.fixture
def provider_down(workspace, fake_openai):
    """The workspace observes with an OpenAI-compatible endpoint that answers 503, and
    whose circuit breaker never opens: a run's last attempt fails it, as when the
    provider answers others (an outage's breaker keeps runs waiting instead:
    tests/memory/test_provider_outage.py)."""
    workspace.engine = "openai"
    workspace.llm_base_url = fake_openai.base_url
    workspace.save()
    fake_openai.enqueue(server_error(503), times=50)
    with override_settings(MEMDESK_OPENAI_MAX_RETRIES=0, MEMDESK_OPENAI_BREAKER_FAILURES=1000):
        yield fake_openai


def _run_body(api, run: PipelineRun) -> dict:
    response = api.get(f"/v1/runs/{run.pk}")
    assert response.status_code == 200
    return response.json()


# --- retrying, then failed ---------------------------------------------------------------------


def test_a_provider_that_keeps_failing_shows_retrying_then_failed(
    api, chat_with_card_and_address, provider_down
):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    assert _run_body(api, run)["status"] == "queued"

    outcome = observer_run_execute(run_id=run.pk, final_attempt=False, retry_in=12)

    assert outcome.retry
    body = _run_body(api, run)
    assert body["status"] == "retrying"
    assert (body["attempts"], body["maxAttempts"]) == (1, PipelineRun.MAX_ATTEMPTS)
    assert body["nextAttemptAt"] is not None and body["finishedAt"] is None
    assert "503" in body["error"]
    assert "4111" not in body["error"] and "Elm" not in body["error"]
    metrics = api.get("/v1/metrics").json()["observer"]
    assert (metrics["retrying"], metrics["failures"]) == (1, 0)
    assert metrics["byStatus"]["retrying"] == 1

    # The worker's retries (eagerly, without their backoff) until the last attempt.
    assert observe_conversation.apply(args=[str(run.pk)]).get() == "failed"

    body = _run_body(api, run)
    assert body["status"] == "failed"
    assert body["attempts"] == PipelineRun.MAX_ATTEMPTS
    assert body["finishedAt"] is not None and body["nextAttemptAt"] is None
    assert body["error"] and "4111" not in body["error"]
    metrics = api.get("/v1/metrics").json()["observer"]
    assert (metrics["retrying"], metrics["failures"]) == (0, 1)
    assert not Observation.objects.filter(conversation=chat_with_card_and_address).exists()


class _ProviderDown(ExtractiveEngine):
    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise EngineError("provider 503", retryable=True)


def test_the_next_attempt_is_when_the_task_retries(
    chat_with_card_and_address, monkeypatch, fake_engine
):
    fake_engine(_ProviderDown())
    monkeypatch.setattr(tasks, "_retry_countdown", lambda task: 42)
    seen: list[tuple[str, float]] = []
    execute = observer_run_execute

    def recording(**kwargs):
        outcome = execute(**kwargs)
        run = outcome.run
        if run.next_attempt_at:
            seen.append((run.status, (run.next_attempt_at - timezone.now()).total_seconds()))
        return outcome

    monkeypatch.setattr(tasks, "observer_run_execute", recording)
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")

    observe_conversation.apply(args=[str(run.pk)])

    assert len(seen) == MAX_RETRIES  # every attempt but the last said when the next is
    assert all(status == "retrying" and 0 < wait <= 42 for status, wait in seen)


def test_a_retrying_run_whose_task_was_lost_is_sent_again_by_the_sweeper(
    chat_with_card_and_address, django_capture_on_commit_callbacks
):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    ObserverRun.objects.filter(pk=run.pk).update(
        status="retrying",
        attempts=2,
        error="provider 503",
        next_attempt_at=timezone.now() - STALE_PENDING * 2,
    )

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        counts = pipeline_sweep()

    assert counts["requeued"] == 1 and len(callbacks) == 1
    outcome = observer_run_execute(run_id=run.pk, final_attempt=False)
    assert outcome.run.status == "succeeded" and outcome.run.attempts == 3


def test_a_retrying_run_holds_the_conversations_slot(chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    ObserverRun.objects.filter(pk=run.pk).update(status="retrying")

    again = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")

    assert again.pk == run.pk
    assert ObserverRun.objects.filter(conversation=chat_with_card_and_address).count() == 1


# --- cancel --------------------------------------------------------------------------------------


def test_an_agent_cancels_a_queued_run_and_the_cancel_is_audited(api, chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")

    response = api.post(f"/v1/runs/{run.pk}/cancel", {"reason": "wrong model"}, format="json")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "cancelled" and body["finishedAt"] is not None
    assert _run_body(api, run)["status"] == "cancelled"
    event = AuditEvent.objects.get(action="run.cancel")
    assert (event.target_type, event.target_id) == ("observer_run", str(run.pk))
    assert (event.actor_type, event.reason) == ("api_key", "wrong model")
    assert event.before["status"] == "queued" and event.after == {"status": "cancelled"}
    assert api.get("/v1/metrics").json()["observer"]["cancelled"] == 1


def test_cancelling_a_finished_run_is_a_conflict(api, chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    observer_run_execute(run_id=run.pk)

    response = api.post(f"/v1/runs/{run.pk}/cancel")

    assert response.status_code == 409
    assert response.json()["code"] == "run_finished"
    assert "already succeeded" in response.json()["message"]
    assert _run_body(api, run)["status"] == "succeeded"
    assert api.post(f"/v1/runs/{run.pk}/cancel").status_code == 409
    assert not AuditEvent.objects.filter(action="run.cancel").exists()


def test_another_workspaces_run_cannot_be_cancelled(api, other_api, chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")

    assert other_api.post(f"/v1/runs/{run.pk}/cancel").status_code == 404
    assert api.post("/v1/runs/not-a-run/cancel").status_code == 400
    assert ObserverRun.objects.get(pk=run.pk).status == "pending"


def test_after_a_cancel_a_new_run_can_be_scheduled(api, chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    api.post(f"/v1/runs/{run.pk}/cancel")

    response = api.post(f"/v1/conversations/{chat_with_card_and_address.pk}/observe")

    assert response.status_code == 202
    assert response.json()["id"] != str(run.pk) and response.json()["status"] == "queued"
    assert ObserverRun.objects.filter(conversation=chat_with_card_and_address).count() == 2


def test_a_cancelled_retrying_run_is_not_tried_again(api, chat_with_card_and_address, fake_engine):
    fake_engine(_ProviderDown())
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")
    observer_run_execute(run_id=run.pk, final_attempt=False, retry_in=30)
    assert api.post(f"/v1/runs/{run.pk}/cancel").json()["status"] == "cancelled"

    # The retry the task had scheduled arrives.
    assert observe_conversation.apply(args=[str(run.pk)]).get() == "cancelled"
    run.refresh_from_db()
    assert (run.status, run.attempts, run.next_attempt_at) == ("cancelled", 1, None)


def test_a_run_cancelled_while_the_engine_works_stores_nothing(
    api, chat_with_card_and_address, fake_engine
):
    class CancelledMeanwhile(ExtractiveEngine):
        """A person cancels the run while the provider is still answering."""

        def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
            running = ObserverRun.objects.get(
                conversation=chat_with_card_and_address, status="running"
            )
            assert api.post(f"/v1/runs/{running.pk}/cancel").status_code == 200
            return super().observe(
                messages, previous_observations=previous_observations, now=now, fidelity=fidelity
            )

    fake_engine(CancelledMeanwhile())
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="manual")

    outcome = observer_run_execute(run_id=run.pk)

    assert outcome.run.status == "cancelled" and not outcome.retry
    assert not Observation.objects.filter(conversation=chat_with_card_and_address).exists()
    assert unobserved_messages(conversation=chat_with_card_and_address).count() == 2
    body = _run_body(api, run)
    assert (body["status"], body["itemsOut"], body["tokensOut"]) == ("cancelled", 0, 0)


def test_automatic_triggers_hold_off_after_a_cancel(workspace, chat_with_card_and_address):
    run = observer_schedule(conversation=chat_with_card_and_address, trigger="threshold")
    run_cancel(run=run, actor=SYSTEM_ACTOR, reason="provider down")
    workspace.observer_threshold = 1
    workspace.save()

    messages_append(
        conversation=chat_with_card_and_address, items=[MessageInput(role="user", content="hi")]
    )

    assert not ObserverRun.objects.filter(
        conversation=chat_with_card_and_address, status="pending"
    ).exists()
