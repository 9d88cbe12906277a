"""The Observer/Reflector pipeline in one process: triggers, runs, provenance, failures."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from core import queue
from memory.engines.base import MEMORY_BLOCK_HEADER, EngineError
from memory.engines.extractive import ExtractiveEngine
from memory.models import Conversation, Message, Observation, ObserverRun, Reflection, ReflectorRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.runs import LeaseLost, _claim, run_finish
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.pipeline.sweep import pipeline_sweep
from memory.selectors import unobserved_messages
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.wire import relative_date

CHAT = [
    ("user", "Hi, I'm Dana. My Aero 2 headphones arrived broken, order ORD-123456."),
    ("assistant", "Sorry to hear that. I can refund $129 or send a replacement."),
    ("user", "Refund please. I prefer email over phone calls."),
    ("assistant", "Done: the refund of $129 will land within 5 business days."),
    ("user", "Great. I'll drop the parcel off next Tuesday."),
]


@pytest.fixture
def refund_chat(workspace) -> Conversation:
    """Dana's headphones refund chat (CHAT), not yet observed."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation, items=[MessageInput(role=r, content=c) for r, c in CHAT]
    )
    return conversation


def _observe_now(conversation: Conversation) -> ObserverRun:
    run = observer_schedule(conversation=conversation, trigger="manual")
    outcome = observer_run_execute(run_id=run.pk)
    assert outcome.run is not None
    return outcome.run


def test_below_the_threshold_no_run_is_scheduled(refund_chat):
    assert not ObserverRun.objects.exists()


def test_crossing_the_threshold_schedules_one_run_after_commit(
    workspace, django_capture_on_commit_callbacks, monkeypatch
):
    workspace.observer_threshold = 50
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    sent: list[str] = []
    monkeypatch.setattr(queue.current_app, "send_task", lambda name, **_: sent.append(name))
    with django_capture_on_commit_callbacks(execute=True):
        messages_append(
            conversation=conversation, items=[MessageInput(role=r, content=c) for r, c in CHAT]
        )
        messages_append(
            conversation=conversation, items=[MessageInput(role="user", content="more")]
        )
        assert not sent  # nothing is sent before the write commits
    run = ObserverRun.objects.get(conversation=conversation)
    assert (run.status, run.trigger) == ("pending", "threshold")
    # One Observer task after the commit (the write did not run it), besides the scan
    # task the first write sent (still waiting for a worker, it takes the second's too).
    assert sent.count("memory.tasks.observe_conversation") == 1
    assert sent.count("governance.tasks.message_scan_task") == 1
    assert not Observation.objects.exists()


def test_one_message_larger_than_the_threshold_still_triggers(workspace):
    workspace.observer_threshold = 1000
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    big = "order ORD-1 line item 42 status shipped " * 400  # ~4,000 tokens in one message
    messages_append(conversation=conversation, items=[MessageInput(role="tool", content=big)])
    run = ObserverRun.objects.get(conversation=conversation)
    done = observer_run_execute(run_id=run.pk).run
    assert done.status == "succeeded"
    assert Observation.objects.filter(conversation=conversation).exists()
    assert not unobserved_messages(conversation=conversation).exists()


def test_a_conversation_threshold_overrides_the_workspace(workspace):
    workspace.observer_threshold = 10
    workspace.save()
    conversation = conversation_create(workspace=workspace)
    conversation.observer_threshold = 100_000
    conversation.save()
    messages_append(conversation=conversation, items=[MessageInput(role="user", content="x " * 50)])
    assert not ObserverRun.objects.exists()


def test_an_observer_run_stores_observations_with_provenance(refund_chat):
    run = _observe_now(refund_chat)
    assert run.status == "succeeded"
    assert (run.engine, run.window_start_seq, run.window_end_seq) == ("extractive", 1, 5)
    assert run.tokens_in == sum(m.token_count for m in refund_chat.messages.all())
    observations = list(Observation.objects.filter(conversation=refund_chat))
    assert observations and run.items_out == len(observations)
    assert run.tokens_out == sum(o.token_count for o in observations)
    ids_by_seq = {str(m.pk): m.seq for m in refund_chat.messages.all()}
    for observation in observations:
        seqs = [ids_by_seq[i] for i in observation.source_message_ids]
        assert seqs == sorted(seqs)
        assert (observation.window_start_seq, observation.window_end_seq) == (seqs[0], seqs[-1])
        assert observation.source == "observer" and observation.engine == "extractive"
    # Every message is now observed: none is recent, all are completed.
    assert not unobserved_messages(conversation=refund_chat).exists()


@dataclass
class _AppendsDuringRun:
    """The real engine, plus a message that arrives while it works."""

    conversation: Conversation
    inner: ExtractiveEngine

    name = "extractive"
    model = ""
    prompt_version = ""

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        messages_append(
            conversation=Conversation.objects.get(pk=self.conversation.pk),
            items=[MessageInput(role="user", content="Also, my new address is 5 Elm St.")],
        )
        return self.inner.observe(messages, previous_observations=previous_observations, now=now)

    def reflect(self, observations, *, now):
        return self.inner.reflect(observations, now=now)


def test_a_message_that_arrives_during_a_run_stays_unobserved_and_recent(refund_chat, fake_engine):
    engine = _AppendsDuringRun(refund_chat, ExtractiveEngine())
    fake_engine(engine)
    run = _observe_now(refund_chat)
    assert run.window_end_seq == 5
    recent = list(unobserved_messages(conversation=refund_chat))
    assert [m.seq for m in recent] == [6]
    cited = {i for o in Observation.objects.all() for i in o.source_message_ids}
    assert str(recent[0].pk) not in cited


def test_the_injected_memory_block_is_never_observed(workspace):
    conversation = conversation_create(workspace=workspace)
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(
                role="system",
                content=f"{MEMORY_BLOCK_HEADER}\n\n## Observations\n- User's card is 4111 1111.",
            ),
            MessageInput(role="user", content="I prefer tea over coffee."),
        ],
    )
    injected = conversation.messages.get(seq=1)
    run = _observe_now(conversation)
    assert run.items_in == 1
    for observation in Observation.objects.filter(conversation=conversation):
        assert str(injected.pk) not in observation.source_message_ids
        assert "4111" not in observation.text
    assert not unobserved_messages(conversation=conversation).exists()


def test_a_run_whose_lease_expired_is_taken_over_and_stored_once(refund_chat):
    run = observer_schedule(conversation=refund_chat, trigger="manual")
    first = _claim(ObserverRun, run.pk)
    assert first is not None
    assert _claim(ObserverRun, run.pk) is None  # a second worker cannot take it
    ObserverRun.objects.filter(pk=run.pk).update(lease_expires_at=timezone.now() - timedelta(1))
    done = observer_run_execute(run_id=run.pk).run  # the crashed worker's successor
    assert done.status == "succeeded" and done.attempts == 2
    stored = Observation.objects.filter(conversation=refund_chat).count()
    # The first worker wakes up and tries to store: its lease is gone, nothing is written.
    _, stale_token = first
    with pytest.raises(LeaseLost):
        run_finish(ObserverRun, run, stale_token, started=0.0)
    assert Observation.objects.filter(conversation=refund_chat).count() == stored


class _RecordsFidelity(ExtractiveEngine):
    """The real engine, remembering the fidelity each observe call was given."""

    def __init__(self) -> None:
        self.fidelities: list[str] = []

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        self.fidelities.append(fidelity)
        return super().observe(
            messages, previous_observations=previous_observations, now=now, fidelity=fidelity
        )


def test_the_observer_is_given_the_workspaces_fidelity(workspace, refund_chat, fake_engine):
    engine = _RecordsFidelity()
    fake_engine(engine)
    _observe_now(refund_chat)
    # The next run reads the setting anew: a change applies from then on.
    workspace.fidelity = "detailed"
    workspace.save()
    messages_append(conversation=refund_chat, items=[MessageInput(role="user", content="Also")])
    _observe_now(refund_chat)
    with override_settings(MEMDESK_OBSERVER_FIDELITY="compact"):
        workspace.fidelity = ""
        workspace.save()
        messages_append(conversation=refund_chat, items=[MessageInput(role="user", content="Bye")])
        _observe_now(refund_chat)

    assert engine.fidelities == ["balanced", "detailed", "compact"]


class _FailingEngine(ExtractiveEngine):
    def __init__(self, error: EngineError) -> None:
        self.error = error

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise self.error

    def reflect(self, observations, *, now):
        raise self.error


def test_a_failed_run_keeps_messages_recent_and_reports_them_failed(
    api, workspace, refund_chat, fake_engine
):
    fake_engine(_FailingEngine(EngineError("provider 500")))
    run = _observe_now(refund_chat)
    assert (run.status, run.error) == ("failed", "provider 500")
    assert unobserved_messages(conversation=refund_chat).count() == 5
    status = api.get(f"/v1/conversations/{refund_chat.pk}/extraction-status").json()
    assert status["summary"] == {"stored": 0, "processing": 0, "completed": 0, "failed": 5}
    # Automatic triggers hold off for a while; a person can still ask for a run.
    workspace.observer_threshold = 1
    workspace.save()
    messages_append(conversation=refund_chat, items=[MessageInput(role="user", content="hello?")])
    assert not ObserverRun.objects.filter(status="pending").exists()


def test_a_retryable_failure_gives_the_run_back_for_a_retry(refund_chat, fake_engine):
    fake_engine(_FailingEngine(EngineError("timeout", retryable=True)))
    run = observer_schedule(conversation=refund_chat, trigger="manual")
    outcome = observer_run_execute(run_id=run.pk, final_attempt=False, retry_in=30)
    assert outcome.retry and outcome.run.status == "retrying"
    assert (outcome.run.attempts, outcome.run.error) == (1, "timeout")
    assert outcome.run.next_attempt_at > timezone.now()
    outcome = observer_run_execute(run_id=run.pk, final_attempt=True)
    assert not outcome.retry and outcome.run.status == "failed"
    assert outcome.run.attempts == 2


# Dana's chat with a change of mind in it: the Reflector has something to condense.
CHANGED_MIND = [CHAT[0], ("user", "By the way, I usually prefer phone calls."), *CHAT[1:]]


def _reflect_now(conversation: Conversation) -> ReflectorRun:
    outcome = reflector_run_execute(
        run_id=reflector_schedule(conversation=conversation, trigger="manual").pk
    )
    assert outcome.run is not None
    return outcome.run


def test_a_reflection_takes_out_of_the_context_only_the_observations_it_cites(api, workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role=r, content=c) for r, c in CHANGED_MIND],
    )
    _observe_now(conversation)
    observed = {str(o.pk): o for o in Observation.objects.filter(conversation=conversation)}
    run = _reflect_now(conversation)
    assert run.status == "succeeded" and run.generation == 1
    [reflection] = Reflection.objects.filter(conversation=conversation)
    assert reflection.text.startswith("User prefers email over phone calls, since ")
    cited = reflection.source_observation_ids
    assert [observed[i].text for i in cited] == [
        "User usually prefers phone calls",
        "User prefers email over phone calls",
    ]
    # The run counts what it condensed: its tokens in over out is the Reflector's ratio.
    assert (run.items_in, run.items_out) == (2, 1)
    assert run.tokens_in == sum(observed[i].token_count for i in cited)
    assert run.tokens_out == reflection.token_count
    # Cited observations are kept but leave the context; the rest stay active, served.
    statuses = dict(
        Observation.objects.filter(conversation=conversation).values_list("pk", "status")
    )
    assert {str(pk) for pk, status in statuses.items() if status == "reflected"} == set(cited)
    context = api.get(f"/v1/conversations/{conversation.pk}/context").json()
    assert [r["text"] for r in context["reflections"]] == [reflection.text]
    served = [o["id"] for o in context["observations"]]
    assert sorted(served) == sorted(set(observed) - set(cited))
    assert "Aero 2" in " ".join(o["text"] for o in context["observations"])


def test_a_run_that_finds_nothing_to_condense_succeeds_and_changes_nothing(api, refund_chat):
    from governance.models import AuditEvent

    _observe_now(refund_chat)
    before = list(Observation.objects.filter(conversation=refund_chat).values_list("pk", "status"))
    version = Conversation.objects.get(pk=refund_chat.pk).memory_version
    served = api.get(f"/v1/conversations/{refund_chat.pk}/context").json()

    run = _reflect_now(refund_chat)  # the real engine: each note says something else

    assert run.status == "succeeded" and run.error == ""
    assert (run.items_in, run.items_out, run.tokens_in, run.tokens_out) == (0, 0, 0, 0)
    assert run.generation is None
    assert not Reflection.objects.exists()
    after = Observation.objects.filter(conversation=refund_chat).values_list("pk", "status")
    assert list(after) == before and {status for _, status in before} == {"active"}
    assert Conversation.objects.get(pk=refund_chat.pk).memory_version == version
    assert not AuditEvent.objects.filter(action="memory.reflect").exists()
    assert api.get(f"/v1/conversations/{refund_chat.pk}/context").json() == served


def test_a_reflection_without_valid_sources_is_rejected_and_memory_stays_as_it_was(
    refund_chat, fake_engine
):
    from memory.engines.base import DraftReflection

    _observe_now(refund_chat)
    before = list(Observation.objects.filter(conversation=refund_chat).values_list("pk", "status"))

    class Unsourced(ExtractiveEngine):
        def reflect(self, observations, *, now):
            return [DraftReflection("User likes tea", "low", None, ["not-an-input"])]

    fake_engine(Unsourced())
    run = _reflect_now(refund_chat)
    assert run.status == "failed" and "without valid sources" in run.error
    assert not Reflection.objects.exists()
    after = Observation.objects.filter(conversation=refund_chat).values_list("pk", "status")
    assert list(after) == before


def test_uncondensable_observations_do_not_make_the_reflector_run_again_and_again(
    workspace, refund_chat, django_capture_on_commit_callbacks
):
    from memory.pipeline.scheduling import reflector_schedule_if_due

    workspace.reflector_threshold = 20
    workspace.save()
    conversation = Conversation.objects.select_related("workspace").get(pk=refund_chat.pk)
    _observe_now(conversation)  # over the threshold: the Observer schedules the Reflector
    first = ReflectorRun.objects.get(conversation=conversation)
    assert (first.status, first.trigger) == ("pending", "threshold")
    reflector_run_execute(run_id=first.pk)
    assert not Reflection.objects.exists()  # nothing to condense: all stay active

    # Still over the threshold, but nothing new since that run: neither a write nor the
    # sweeper schedules another.
    assert reflector_schedule_if_due(conversation=conversation) is None
    assert pipeline_sweep()["reflector_scheduled"] == 0
    assert ReflectorRun.objects.filter(conversation=conversation).count() == 1

    # Notes written since, as many tokens as the threshold: due again.
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="I now prefer SMS over email and phone calls."),
            MessageInput(role="user", content="My brother Jonas also ordered the Aero 2."),
        ],
    )
    with django_capture_on_commit_callbacks(execute=False):
        _observe_now(conversation)
    second = ReflectorRun.objects.filter(conversation=conversation).latest("created_at")
    assert second.pk != first.pk and second.status == "pending"
    reflector_run_execute(run_id=second.pk)
    [update] = Reflection.objects.filter(conversation=conversation)
    assert "SMS" in update.text and len(update.source_observation_ids) == 2


def test_observing_crosses_the_reflector_threshold_and_schedules_a_reflection(
    workspace, refund_chat
):
    workspace.reflector_threshold = 5
    workspace.save()
    _observe_now(Conversation.objects.select_related("workspace").get(pk=refund_chat.pk))
    assert ReflectorRun.objects.get(conversation=refund_chat).status == "pending"


def test_the_sweeper_schedules_due_conversations_and_requeues_lost_runs(
    workspace, refund_chat, django_capture_on_commit_callbacks
):
    workspace.observer_threshold = 10
    workspace.save()
    # Messages stored while no run could be scheduled (as when the broker was down).
    assert not ObserverRun.objects.exists()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        counts = pipeline_sweep()
    assert counts["observer_scheduled"] == 1 and len(callbacks) == 1
    run = ObserverRun.objects.get(conversation=refund_chat)
    assert run.trigger == "sweeper"
    ObserverRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        counts = pipeline_sweep()
    assert counts["requeued"] == 1
    assert ObserverRun.objects.filter(conversation=refund_chat).count() == 1


def test_observe_now_over_the_api_waits_and_returns_the_run(api, other_api, refund_chat):
    response = api.post(f"/v1/conversations/{refund_chat.pk}/observe?wait=true")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "succeeded" and body["kind"] == "observer"
    assert body["itemsOut"] == Observation.objects.filter(conversation=refund_chat).count()
    assert api.get(f"/v1/runs/{body['id']}").json()["id"] == body["id"]
    assert other_api.get(f"/v1/runs/{body['id']}").status_code == 404
    assert other_api.post(f"/v1/conversations/{refund_chat.pk}/observe").status_code == 404
    reflect = api.post(f"/v1/conversations/{refund_chat.pk}/reflect?wait=true").json()
    # Each note of the chat says something else: nothing condenses, and that is a success.
    assert reflect["status"] == "succeeded" and reflect["kind"] == "reflector"
    assert (reflect["itemsOut"], reflect["generation"]) == (0, None)


def test_observe_without_wait_queues_a_run(api, refund_chat):
    response = api.post(f"/v1/conversations/{refund_chat.pk}/observe")
    assert response.status_code == 202
    assert response.json()["status"] == "queued"  # stored as pending
    again = api.post(f"/v1/conversations/{refund_chat.pk}/observe")
    assert again.json()["id"] == response.json()["id"]  # one open run per conversation


def test_metrics_report_raw_and_served_tokens_and_compression(api, refund_chat):
    api.post(f"/v1/conversations/{refund_chat.pk}/observe?wait=true")
    body = api.get(f"/v1/metrics?conversationId={refund_chat.pk}").json()
    raw = sum(m.token_count for m in Message.objects.filter(conversation=refund_chat))
    observation_tokens = sum(
        o.token_count for o in Observation.objects.filter(conversation=refund_chat)
    )
    assert body["rawTokens"] == raw
    assert body["servedTokens"] == observation_tokens
    assert body["observer"]["byStatus"]["succeeded"] == 1
    assert body["compression"]["observer"] == round(raw / observation_tokens, 2)
    workspace_wide = api.get("/v1/metrics").json()
    assert workspace_wide["rawTokens"] >= raw
    assert api.get("/v1/metrics?conversationId=nope").status_code == 400


def test_a_wait_flag_that_is_not_a_boolean_is_refused_and_schedules_nothing(api, refund_chat):
    response = api.post(f"/v1/conversations/{refund_chat.pk}/observe?wait=maybe")
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("invalid_wait", "wait")
    assert not ObserverRun.objects.filter(conversation=refund_chat).exists()


def test_an_imported_history_is_dated_by_when_it_was_said_not_by_the_run(api, workspace):
    # A conversation imported in November with its own October timestamps.
    said = datetime(2026, 10, 5, 14, 0, tzinfo=UTC)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role=r, content=c, created_at=said + timedelta(minutes=i))
            for i, (r, c) in enumerate(CHANGED_MIND)
        ],
    )
    before_run = timezone.now()
    _observe_now(conversation)
    reflector_run_execute(run_id=reflector_schedule(conversation=conversation, trigger="manual").pk)

    observations = list(Observation.objects.filter(conversation=conversation))
    assert observations
    for observation in observations:
        assert observation.window_start_at <= observation.observed_at <= observation.window_end_at
        assert observation.observed_at.date() == said.date()
        assert observation.written_at >= before_run
    reflections = list(Reflection.objects.filter(conversation=conversation))
    assert reflections
    for reflection in reflections:
        assert reflection.observed_at.date() == said.date()
        assert reflection.written_at >= before_run
        # An event date comes from what was said, never from the day the Reflector ran.
        assert reflection.referenced_at is None or reflection.referenced_at < before_run

    served = api.get(f"/v1/conversations/{conversation.pk}/reflections").json()["reflections"]
    assert all(r["observedAt"].startswith("2026-10-05") for r in served)
    assert all(r["writtenAt"] >= before_run.isoformat()[:10] for r in served)
    text = api.get(f"/v1/conversations/{conversation.pk}/context?format=text").content.decode()
    ago = relative_date(said, today=timezone.now().date())
    assert ago and ago.endswith(" ago")
    assert f"2026-10-05 ({ago}) " in text


def test_ticket_and_order_ids_in_a_note_become_its_ticket_id_and_tags(curator_api, refund_chat):
    api = curator_api
    _observe_now(refund_chat)
    body = api.get(f"/v1/conversations/{refund_chat.pk}/observations").json()
    [order_note] = [o for o in body["observations"] if "ORD-123456" in o["text"]]
    assert order_note["ticketId"] == "ORD-123456"
    assert "order:ORD-123456" in order_note["tags"]

    created = api.post(
        f"/v1/conversations/{refund_chat.pk}/observations",
        {"text": "Assistant opened ticket #452 for order ORD-123456", "reason": "call notes"},
        format="json",
    ).json()
    assert created["ticketId"] == "452"  # a ticket before an order: work is filed under it
    assert created["tags"] == ["ticket:452", "order:ORD-123456"]


def test_a_conversation_that_went_quiet_is_observed_below_the_threshold(workspace):
    workspace.observer_threshold = 100_000  # never reached by these few turns
    workspace.save()
    quiet = conversation_create(workspace=workspace, user_id="dana")
    active = conversation_create(workspace=workspace, user_id="eve")
    for conversation in (quiet, active):
        messages_append(
            conversation=conversation, items=[MessageInput(role=r, content=c) for r, c in CHAT]
        )
    Conversation.objects.filter(pk=quiet.pk).update(
        updated_at=timezone.now() - timedelta(minutes=361)
    )

    counts = pipeline_sweep()

    assert counts["observer_scheduled"] == 1
    run = ObserverRun.objects.get()
    assert (run.conversation_id, run.trigger) == (quiet.pk, "sweeper")
    observer_run_execute(run_id=run.pk)
    assert Observation.objects.filter(conversation=quiet).exists()
    # Observed now: the next sweep has nothing left to do for it.
    assert pipeline_sweep()["observer_scheduled"] == 0


@pytest.mark.parametrize("idle_minutes", [0, 720])
def test_the_quiet_time_is_a_setting_and_zero_turns_it_off(workspace, settings, idle_minutes):
    settings.MEMDESK_OBSERVER_IDLE_MINUTES = idle_minutes
    workspace.observer_threshold = 100_000
    workspace.save()
    quiet = conversation_create(workspace=workspace)
    messages_append(conversation=quiet, items=[MessageInput(role=r, content=c) for r, c in CHAT])
    Conversation.objects.filter(pk=quiet.pk).update(
        updated_at=timezone.now() - timedelta(minutes=361)
    )
    assert pipeline_sweep()["observer_scheduled"] == 0


def test_a_message_whose_metadata_names_its_speaker_is_noted_under_that_name(workspace):
    from tests.governance.builders import set_policy

    def observed(name: str) -> list[str]:
        chat = conversation_create(workspace=workspace, user_id=f"team-{name}")
        messages_append(
            conversation=chat,
            items=[
                MessageInput(
                    role="user", content="I moved to Oslo in May.", metadata={"name": "Jo"}
                ),
                MessageInput(role="user", content="My son starts school in August."),
            ],
        )
        _observe_now(chat)
        return list(chat.observations.order_by("window_start_seq").values_list("text", flat=True))

    # Observing messages as written (the default redacts them first).
    set_policy(workspace, redact_before_observation=False)
    assert observed("a") == ["Jo moved to Oslo in May", "User's son starts school in August"]
    # Redacting before observation: the name is personal data the content redaction does
    # not see, so the note does not carry it.
    set_policy(workspace, redact_before_observation=True)
    assert all("Jo" not in text for text in observed("b"))


def test_memory_the_pipeline_writes_is_in_the_audit_trail(workspace):
    from governance.models import AuditEvent
    from tests.dashboard.factories import chat, observe, reflect

    conversation = conversation_create(workspace=workspace, user_id="dana")
    chat(conversation)
    observe(conversation)
    reflect(conversation)

    observed = AuditEvent.objects.get(workspace=workspace, action="memory.observe")
    written = {str(pk) for pk in conversation.observations.values_list("pk", flat=True)}
    assert set(observed.after["observations"]) == written
    assert (observed.actor_type, observed.actor_role) == ("system", "system")
    assert observed.after["conversationId"] == str(conversation.pk)
    reflected = AuditEvent.objects.get(workspace=workspace, action="memory.reflect")
    assert set(reflected.after["reflections"]) == {
        str(pk) for pk in conversation.reflections.values_list("pk", flat=True)
    }
    assert "Aero" not in str(observed.after) + str(reflected.after)  # ids, never text
