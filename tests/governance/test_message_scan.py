"""Messages are scanned for personal data after they are written, by a worker: their
findings flag the conversation and let the Observer read them redacted without running
Presidio again; the write itself never waits for the engine. Redaction before
observation is the default."""

from __future__ import annotations

import importlib
import json
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.utils import timezone

from dashboard.selectors.conversations import ConversationFilters, conversation_search
from governance.audit.verify import audit_chain_verify
from governance.models import (
    AuditEvent,
    MessageScan,
    RedactionFinding,
    RedactionPolicy,
    ScanRequest,
)
from governance.redaction import presidio, scan
from governance.redaction.policy import redaction_policy_get_or_create
from governance.redaction.presidio import RedactionEngine
from governance.redaction.preview import redaction_preview
from governance.redaction.pseudonyms import WorkspacePseudonyms
from governance.tasks import message_scan_task
from memory.models import Conversation, Message, Observation, Reflection
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.governance.builders import set_policy
from tests.resilience.redis_server import DEAD_REDIS

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"
TEXT = f"My card is {CARD} and my email is {EMAIL}, please send the receipt there."
CLEAN = "The parcel arrived on Tuesday and the box was fine."


@pytest.fixture
def detect_calls(monkeypatch) -> list[int]:
    """How many texts each call of the engine's detect was given."""
    calls: list[int] = []
    original = RedactionEngine.detect_within

    def spy(self, texts, **kwargs):
        calls.append(len(texts))
        return original(self, texts, **kwargs)

    monkeypatch.setattr(RedactionEngine, "detect_within", spy)
    return calls


@pytest.fixture
def texts_read(monkeypatch) -> list[int]:
    """How many texts each spaCy batch of the engine read."""
    nlp_engine = presidio.engine().nlp_engine
    batches: list[int] = []
    original = nlp_engine.process_batch

    def spy(texts, **kwargs):
        batches.append(len(texts))
        return original(texts, **kwargs)

    monkeypatch.setattr(nlp_engine, "process_batch", spy)
    return batches


def _write(conversation: Conversation, *texts: str) -> list[Message]:
    return messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=t) for t in texts]
    )


def _observe(conversation: Conversation) -> str:
    run = observer_schedule(conversation=conversation, trigger="manual")
    assert observer_run_execute(run_id=run.pk).run.status == "succeeded"
    return " ".join(
        Observation.objects.filter(conversation=conversation).values_list("text", flat=True)
    )


def _detected(**filters: object) -> set[str]:
    return set(
        RedactionFinding.objects.filter(status="detected", **filters).values_list(
            "entity_type", flat=True
        )
    )


# --- after the write ---------------------------------------------------------------------------


def test_a_written_message_is_scanned_after_commit_and_flags_its_conversation(
    api, workspace, eager_tasks
):
    flagged = api.post("/v1/conversations", {}, format="json").json()["id"]
    clean = api.post("/v1/conversations", {}, format="json").json()["id"]
    with eager_tasks():
        for conversation_id, content in ((flagged, TEXT), (clean, CLEAN)):
            response = api.post(
                f"/v1/conversations/{conversation_id}/messages",
                {"role": "user", "content": content},
                format="json",
            )
            assert response.status_code == 201
        # Until the write commits, each write has only asked for its scan.
        assert not RedactionFinding.objects.exists() and not MessageScan.objects.exists()
        assert ScanRequest.objects.count() == 2

    assert MessageScan.objects.count() == 2 and not ScanRequest.objects.exists()
    assert _detected(conversation_id=flagged) == {"CREDIT_CARD", "EMAIL_ADDRESS"}
    assert Message.objects.get(conversation_id=flagged).content == TEXT  # kept as written
    # Flagged with no observation or reflection at all.
    assert not Observation.objects.exists() and not Reflection.objects.exists()
    assert api.get(f"/v1/conversations/{flagged}").json()["piiFound"] is True
    assert api.get(f"/v1/conversations/{clean}").json()["piiFound"] is False
    listed = {c["id"]: c["piiFound"] for c in api.get("/v1/conversations").json()["conversations"]}
    assert listed == {flagged: True, clean: False}
    found = conversation_search(workspace=workspace, filters=ConversationFilters(pii_found=True))
    assert [str(c.pk) for c in found] == [flagged]
    [event] = AuditEvent.objects.filter(action="message.scan", target_id=flagged)
    assert event.after["findings"] == 2
    assert event.after["entities"] == {"CREDIT_CARD": 1, "EMAIL_ADDRESS": 1}
    assert CARD not in json.dumps(event.after) and EMAIL not in json.dumps(event.after)


def test_the_write_request_never_runs_presidio(api, workspace, monkeypatch, eager_tasks):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    real_engine = presidio.engine

    def refuse() -> RedactionEngine:
        raise AssertionError("the redaction engine ran on the write path")

    with eager_tasks():
        monkeypatch.setattr(presidio, "engine", refuse)
        response = api.post(
            f"/v1/conversations/{conversation_id}/messages/bulk",
            {"messages": [{"role": "user", "content": TEXT}, {"role": "user", "content": CLEAN}]},
            format="json",
        )
        assert response.status_code == 201, response.json()
        # The worker runs the task after the commit, with the engine it loads itself.
        monkeypatch.setattr(presidio, "engine", real_engine)

    assert _detected() == {"CREDIT_CARD", "EMAIL_ADDRESS"}
    assert MessageScan.objects.count() == 2


def test_the_scan_is_idempotent(conversation, detect_calls):
    _write(conversation, TEXT)
    request = ScanRequest.objects.get()

    first = message_scan_task.apply(args=[[request.pk]]).get()
    again = message_scan_task.apply(args=[[request.pk]]).get()  # delivered twice
    ScanRequest.objects.create(  # asked again for a message scanned at its content
        workspace=conversation.workspace, conversation=conversation, first_seq=1, last_seq=1
    )
    reread = message_scan_task.apply(args=[[ScanRequest.objects.get().pk]]).get()

    assert first == {"scanned": 1, "reused": 0, "findings": 2}
    assert again == {"scanned": 0, "reused": 0, "findings": 0}
    assert reread == {"scanned": 0, "reused": 1, "findings": 0}
    assert detect_calls == [1] and not ScanRequest.objects.exists()
    assert RedactionFinding.objects.count() == 2
    assert AuditEvent.objects.filter(action="message.scan").count() == 1


def test_one_task_scans_what_arrived_together(conversation, detect_calls):
    first, second, third = (_write(conversation, text)[0] for text in (TEXT, CLEAN, TEXT))
    requests = list(ScanRequest.objects.order_by("pk").values_list("pk", flat=True))

    outcome = message_scan_task.apply(args=[requests[:1]]).get()

    # Sent for the first write, it took the two others still waiting: one spaCy batch.
    assert outcome["scanned"] == 3 and detect_calls == [3]
    assert MessageScan.objects.count() == 3 and not ScanRequest.objects.exists()
    # The tasks sent for the others find nothing left to do.
    assert message_scan_task.apply(args=[requests[2:]]).get()["scanned"] == 0
    assert detect_calls == [3]
    assert {f.target_id for f in RedactionFinding.objects.all()} == {first.pk, third.pk}
    assert second.pk not in {f.target_id for f in RedactionFinding.objects.all()}


def test_a_text_is_read_once_however_many_messages_and_conversations_hold_it(workspace, texts_read):
    first, second, later = (
        conversation_create(workspace=workspace, user_id=user) for user in ("dana", "eli", "fay")
    )
    _write(first, TEXT, CLEAN)
    _write(second, TEXT)
    requests = list(ScanRequest.objects.order_by("pk").values_list("pk", flat=True))

    # Both conversations' messages in one batch, and the text they share read once.
    assert message_scan_task.apply(args=[requests[:1]]).get()["scanned"] == 3
    assert texts_read == [2]
    # Written later, in another conversation: found as before, without reading it again.
    [again] = _write(later, TEXT)
    pending = list(ScanRequest.objects.values_list("pk", flat=True))
    assert message_scan_task.apply(args=[pending]).get() == {
        "scanned": 1,
        "reused": 0,
        "findings": 2,
    }
    assert texts_read == [2]
    for message in Message.objects.filter(content=TEXT):
        assert _detected(target_id=message.pk) == {"CREDIT_CARD", "EMAIL_ADDRESS"}
    assert AuditEvent.objects.filter(action="message.scan", target_id=str(later.pk)).count() == 1
    assert MessageScan.objects.get(message_id=again.pk).findings == 2
    # A policy that detects other types reads it anew; so does a preview (a request that
    # answers at once: never sooner for a text someone else wrote).
    set_policy(workspace, entities=["EMAIL_ADDRESS"])
    assert message_scan_task.apply(args=[pending]).get()["scanned"] == 0  # done already
    scan.messages_scan(
        policy=redaction_policy_get_or_create(workspace_id=workspace.pk), messages=[again]
    )
    assert texts_read == [2, 1]
    assert _detected(target_id=again.pk) == {"EMAIL_ADDRESS"}
    redaction_preview(workspace_id=workspace.pk, text=TEXT)
    assert texts_read == [2, 1, 1]


def test_a_name_the_workspace_learnt_is_found_where_a_text_read_before_comes_again(
    workspace, texts_read
):
    text = "Zorbo Quill again?"
    first, second, third = (
        conversation_create(workspace=workspace, user_id=user) for user in ("dana", "eli", "fay")
    )
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    scan.messages_scan(policy=policy, messages=_write(first, text))
    scan.messages_scan(policy=policy, messages=_write(second, text))
    assert texts_read == [1] and not RedactionFinding.objects.exists()

    WorkspacePseudonyms(workspace.pk).label("PERSON", "Zorbo Quill")
    [message] = _write(third, text)
    scan.messages_scan(policy=policy, messages=[message])

    assert texts_read == [1, 1]
    [finding] = RedactionFinding.objects.filter(target_id=message.pk)
    assert (finding.entity_type, finding.start, finding.end) == ("PERSON", 0, 11)
    assert finding.recognizer == "KnownPseudonym"


def _sent_scans(sent: list[tuple[str, list]]) -> list[list]:
    return [args for name, args in sent if name == scan.SCAN_TASK]


def test_writes_while_a_scan_task_waits_send_no_more_tasks(
    conversation, sent_tasks, detect_calls, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        first = _write(conversation, TEXT)[0]
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, CLEAN)
        _write(conversation, TEXT)

    # One task, for the first write; the queued task takes the others when it starts.
    [args] = _sent_scans(sent_tasks)
    assert args == [
        [ScanRequest.objects.get(first_seq=first.seq).pk],
        str(conversation.workspace_id),
    ]
    assert message_scan_task.apply(args=args).get()["scanned"] == 3
    assert detect_calls == [3] and not ScanRequest.objects.exists()

    # Once a task started, the next write sends one of its own.
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, CLEAN)
    assert len(_sent_scans(sent_tasks)) == 2


def test_a_task_whose_requests_were_done_already_lets_the_next_write_send(
    conversation, sent_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, TEXT)
    [args] = _sent_scans(sent_tasks)
    scan.message_scan_requests(request_ids=args[0])  # a sweeper's task did the work

    assert message_scan_task.apply(args=args).get()["scanned"] == 0
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, CLEAN)
    assert len(_sent_scans(sent_tasks)) == 2


def test_more_than_a_batch_waiting_gets_a_follow_up_task(
    conversation, sent_tasks, monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(scan, "TASK_BATCH", 2)
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, CLEAN, CLEAN)
        _write(conversation, TEXT)
    [args] = _sent_scans(sent_tasks)

    with django_capture_on_commit_callbacks(execute=True):
        assert message_scan_task.apply(args=args).get()["scanned"] == 2

    # The write that did not fit is not left to the sweeper, a minute later.
    follow_up = _sent_scans(sent_tasks)[1]
    assert follow_up == [[ScanRequest.objects.get().pk], str(conversation.workspace_id)]


def test_with_the_cache_down_every_write_sends_its_scan_task(
    conversation, sent_tasks, settings, django_capture_on_commit_callbacks
):
    settings.CACHES = DEAD_REDIS
    with django_capture_on_commit_callbacks(execute=True):
        _write(conversation, TEXT)
        _write(conversation, CLEAN)
    assert len(_sent_scans(sent_tasks)) == 2


def test_a_message_rewritten_during_its_scan_is_scanned_again(conversation, monkeypatch):
    [message] = _write(conversation, TEXT)
    original = RedactionEngine.detect_within
    rewritten = f"My card is <CREDIT_CARD> and my email is {EMAIL}."
    attempts: list[int] = []

    def detect_then_rewrite(self, texts, **kwargs):
        found = original(self, texts, **kwargs)
        if not attempts:  # a review approval lands while the first scan runs
            Message.objects.filter(pk=message.pk).update(content=rewritten)
        attempts.append(len(texts))
        return found

    monkeypatch.setattr(RedactionEngine, "detect_within", detect_then_rewrite)

    request = ScanRequest.objects.get()

    outcome = scan.message_scan_requests(request_ids=[request.pk])
    assert outcome.skipped == [message.pk]
    # Nothing stored from the old offsets, and the request is still there.
    assert not MessageScan.objects.exists() and not RedactionFinding.objects.exists()
    assert ScanRequest.objects.filter(pk=request.pk).exists()

    # The task retries (with backoff in a worker) and scans the text as it is now.
    assert message_scan_task.apply(args=[[request.pk]]).get()["scanned"] == 1
    assert _detected() == {"EMAIL_ADDRESS"}
    [finding] = RedactionFinding.objects.all()
    assert rewritten[finding.start : finding.end] == EMAIL


def test_the_sweep_sends_again_the_scans_whose_task_was_lost(
    conversation, sent_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):  # the broker was down
        _write(conversation, TEXT)
    lost = ScanRequest.objects.get()
    ScanRequest.objects.update(created_at=timezone.now() - timedelta(minutes=5))
    with django_capture_on_commit_callbacks(execute=False):
        _write(conversation, CLEAN)  # its task may still be on its way

    with django_capture_on_commit_callbacks(execute=True):
        counts = scan.message_scan_sweep()

    assert counts == {"requeued": 1}
    assert sent_tasks == [("governance.tasks.message_scan_task", [[lost.pk]])]
    assert ScanRequest.objects.count() == 2  # deleted by the task, once it has scanned


def test_messages_redacted_at_ingest_are_scanned_already(conversation, sent_tasks):
    set_policy(conversation.workspace, redact_at_ingest=True)
    [message] = _write(conversation, TEXT)

    assert CARD not in Message.objects.get().content
    assert MessageScan.objects.get(message_id=message.pk).findings == 2
    assert not sent_tasks and not ScanRequest.objects.exists()  # nothing left for a worker


# --- before observation ------------------------------------------------------------------------


def test_a_new_workspace_redacts_before_observation(api, make_client, workspace):
    admin = make_client(workspace, scope="admin")
    assert admin.get("/v1/redaction/policy").json()["redactBeforeObservation"] is True
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": f"Please write to {EMAIL} about the refund of order 42."},
        format="json",
    )

    run = api.post(f"/v1/conversations/{conversation_id}/observe?wait=true").json()

    assert run["status"] == "succeeded" and run["itemsOut"] >= 1
    observations = api.get(f"/v1/conversations/{conversation_id}/observations").json()
    texts = " ".join(o["text"] for o in observations["observations"])
    # The default operator: a pseudonym.
    assert "refund" in texts and EMAIL not in texts and "<EMAIL_ADDRESS_1>" in texts
    # The agent reads its messages as written: the API is not masked.
    messages = api.get(f"/v1/conversations/{conversation_id}/messages").json()["messages"]
    assert EMAIL in messages[0]["content"]


def test_a_workspace_that_turns_it_off_observes_the_messages_as_written(
    make_client, workspace, conversation
):
    admin = make_client(workspace, scope="admin")
    response = admin.patch(
        "/v1/redaction/policy", {"redactBeforeObservation": False}, format="json"
    )
    assert response.status_code == 200
    _write(conversation, f"Please write to {EMAIL} about the refund of order 42.")

    assert EMAIL in _observe(conversation)


def test_the_observer_reuses_a_current_scan_instead_of_running_presidio(
    conversation, detect_calls, eager_tasks
):
    with eager_tasks():
        _write(conversation, TEXT, CLEAN)
    assert detect_calls == [2]  # the scan task

    observed = _observe(conversation)

    assert detect_calls == [2]  # the Observer read the scan's findings
    assert observed and CARD not in observed and EMAIL not in observed


def test_the_observer_scans_again_what_an_older_policy_scanned(
    conversation, detect_calls, eager_tasks
):
    with eager_tasks():
        _write(conversation, TEXT, CLEAN)
    set_policy(conversation.workspace, allow_list=["Tuesday"])  # a new version

    observed = _observe(conversation)

    assert detect_calls == [2, 2]
    assert CARD not in observed and EMAIL not in observed
    versions = set(MessageScan.objects.values_list("policy_version", flat=True))
    assert versions == {RedactionPolicy.objects.get().version}


def test_with_the_worker_down_the_observer_scans_the_messages_itself(conversation, sent_tasks):
    _write(conversation, TEXT, CLEAN)  # the scan task never runs

    observed = _observe(conversation)

    assert observed and CARD not in observed and EMAIL not in observed
    assert MessageScan.objects.count() == 2
    assert _detected() == {"CREDIT_CARD", "EMAIL_ADDRESS"}
    assert CARD in Message.objects.get(seq=1).content  # the message itself is unchanged
    # When the worker is back, its task finds the scans current.
    late = message_scan_task.apply(args=[[ScanRequest.objects.get().pk]]).get()
    assert late == {"scanned": 0, "reused": 2, "findings": 0}


# --- existing policies -------------------------------------------------------------------------


def test_policies_nobody_edited_move_to_the_new_default_with_an_audit_event(
    workspace, other_workspace
):
    untouched = redaction_policy_get_or_create(workspace_id=workspace.pk)
    edited = redaction_policy_get_or_create(workspace_id=other_workspace.pk)
    RedactionPolicy.objects.filter(pk=untouched.pk).update(redact_before_observation=False)
    RedactionPolicy.objects.filter(pk=edited.pk).update(redact_before_observation=False, version=2)
    migration = importlib.import_module("governance.migrations.0003_message_scan")

    migration.private_by_default(django_apps, None)

    untouched.refresh_from_db()
    edited.refresh_from_db()
    assert untouched.redact_before_observation is True and untouched.version == 1
    assert edited.redact_before_observation is False  # a person chose its settings
    [event] = AuditEvent.objects.filter(workspace=workspace, action="redaction_policy.update")
    assert event.before["redactBeforeObservation"] is False
    assert event.after["redactBeforeObservation"] is True
    assert event.reason.startswith("default changed")
    assert not AuditEvent.objects.filter(
        workspace=other_workspace, action="redaction_policy.update"
    ).exists()
    assert audit_chain_verify(workspace_id=workspace.pk).ok
