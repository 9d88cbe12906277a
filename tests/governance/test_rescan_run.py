"""Re-scans of a workspace's stored memory as runs with progress: requested with a reason
(audited, one open at a time), executed by a worker, recovered by the sweep when their
worker or task is lost, and recorded by the rescan_redaction command too."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.models import AuditEvent, MessageScan, RedactionFinding, RescanRun
from governance.redaction.review import rescan_run_execute, rescan_run_request, rescan_run_sweep
from governance.tasks import redaction_rescan_task
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create
from tests.memory.factories import ObservationFactory

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"
OLD_TEXTS = [
    f"User paid with card {CARD} on Feb 10.",
    "User prefers a refund over a replacement.",
    f"User's email is {EMAIL} and she wants the invoice there.",
]


@pytest.fixture
def old_conversation(workspace) -> Conversation:
    """Messages stored before messages were scanned: no scan rows, no findings."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    Message.objects.bulk_create(
        Message(conversation=conversation, seq=n, role="user", content=text, token_count=9)
        for n, text in enumerate(OLD_TEXTS, start=1)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=len(OLD_TEXTS))
    ObservationFactory(conversation=conversation, text=f"User's email is {EMAIL}.")
    return conversation


def test_a_rescan_needs_a_reason_and_is_audited_with_it(workspace, sent_tasks):
    with pytest.raises(MemdeskError) as refused:
        rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="  ")
    assert refused.value.code == "reason_required" and not RescanRun.objects.exists()

    run = rescan_run_request(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="policy v3: cards added"
    )

    assert (run.status, run.tiers) == ("pending", ["messages", "observations", "reflections"])
    [event] = AuditEvent.objects.filter(action="redaction.rescan_request")
    assert event.reason == "policy v3: cards added" and event.target_id == str(run.pk)


def test_one_rescan_at_a_time_per_workspace(workspace, other_workspace, sent_tasks):
    first = rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="first")

    with pytest.raises(MemdeskError) as refused:
        rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="second")

    assert refused.value.status_code == 409 and str(first.pk) in refused.value.message
    rescan_run_request(workspace=other_workspace, actor=SYSTEM_ACTOR, reason="theirs")
    assert RescanRun.objects.count() == 2


def test_unknown_tiers_are_refused(workspace):
    with pytest.raises(MemdeskError) as refused:
        rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="x", tiers=["pins"])
    assert refused.value.code == "invalid_tiers" and "pins" in refused.value.message


def test_the_worker_scans_old_messages_and_records_progress(
    workspace, old_conversation, django_capture_on_commit_callbacks, sent_tasks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="old data")
    assert sent_tasks == [("governance.tasks.redaction_rescan_task", [run.pk])]
    progress: list[tuple[str, int, int]] = []

    run = rescan_run_execute(
        run_id=run.pk,
        batch_size=2,
        progress=lambda tier, counts, total: progress.append((tier, counts["scanned"], total)),
    )

    assert run.status == "completed" and (run.done, run.total) == (4, 4)
    assert run.counts["messages"] == {"total": 3, "scanned": 3, "findings": 2, "skipped": 0}
    assert run.counts["observations"]["scanned"] == 1
    assert progress == [("messages", 2, 3), ("messages", 3, 3), ("observations", 1, 1)]
    detected = RedactionFinding.objects.filter(target_type="message", status="detected")
    assert set(detected.values_list("entity_type", flat=True)) == {"CREDIT_CARD", "EMAIL_ADDRESS"}
    assert MessageScan.objects.count() == 3
    assert CARD in Message.objects.get(seq=1).content  # scanned, not rewritten
    [summary] = AuditEvent.objects.filter(action="redaction.rescan")
    assert summary.after["status"] == "completed" and summary.after["counts"] == run.counts
    assert CARD not in json.dumps(summary.after) and EMAIL not in json.dumps(summary.after)
    # Delivered twice, the task does nothing the second time.
    assert redaction_rescan_task.apply(args=[run.pk]).get() == "completed"
    assert AuditEvent.objects.filter(action="redaction.rescan").count() == 1


def test_a_failing_rescan_is_recorded_as_failed(
    workspace, old_conversation, monkeypatch, sent_tasks
):
    run = rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="x")

    def broken(**_: object) -> None:
        raise RuntimeError(f"engine exploded on {CARD}")

    monkeypatch.setattr("governance.redaction.scan.messages_scan", broken)

    run = rescan_run_execute(run_id=run.pk)

    assert run.status == "failed" and run.error == "RuntimeError (see the worker log)"
    assert CARD not in run.error


def test_the_sweep_fails_lost_rescans_and_sends_again_those_never_started(
    workspace, other_workspace, sent_tasks, django_capture_on_commit_callbacks
):
    lost = rescan_run_request(workspace=workspace, actor=SYSTEM_ACTOR, reason="lost")
    never = rescan_run_request(workspace=other_workspace, actor=SYSTEM_ACTOR, reason="never")
    long_ago = timezone.now() - timedelta(hours=1)
    RescanRun.objects.filter(pk=lost.pk).update(status="running", updated_at=long_ago)
    RescanRun.objects.filter(pk=never.pk).update(created_at=long_ago)
    sent_tasks.clear()

    with django_capture_on_commit_callbacks(execute=True):
        counts = rescan_run_sweep()

    assert counts == {"rescansAbandoned": 1, "rescansRequeued": 1}
    lost.refresh_from_db()
    assert lost.status == "failed" and lost.error.startswith("abandoned")
    assert sent_tasks == [("governance.tasks.redaction_rescan_task", [never.pk])]


def test_the_command_records_its_run(workspace, old_conversation, sent_tasks):
    out = StringIO()

    call_command("rescan_redaction", "--workspace", "acme", "--reason", "upgrade", stdout=out)

    [run] = RescanRun.objects.all()
    assert (run.status, run.reason, run.requested_by, run.requested_by_role) == (
        "completed",
        "upgrade",
        "system:command:rescan_redaction",
        "system",
    )
    # The run's events say which command asked for it, with the system's role.
    assert set(
        AuditEvent.objects.filter(action__startswith="redaction.rescan").values_list(
            "actor_id", "actor_role"
        )
    ) == {("command:rescan_redaction", "system")}
    assert "messages: 3/3" in out.getvalue() and CARD not in out.getvalue()
    assert not sent_tasks  # run by the command itself, not queued for a worker
