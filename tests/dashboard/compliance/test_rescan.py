"""/compliance/redaction/rescan/: a compliance officer re-scans the workspace's stored
memory from the dashboard (reason required, audited), a worker runs it, and the run's
page shows its progress, polled by htmx until it is done."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, MessageScan, RedactionFinding, RescanRun
from governance.redaction.review import rescan_run_request
from governance.tasks import redaction_rescan_task
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create

CARD = "4111 1111 1111 1111"
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def old_messages(workspace) -> Conversation:
    """Messages stored before messages were scanned."""
    conversation = conversation_create(workspace=workspace, user_id="dana")
    Message.objects.bulk_create(
        Message(conversation=conversation, seq=n, role="user", content=text, token_count=9)
        for n, text in enumerate(
            [f"User paid with card {CARD}.", "User wants a refund.", "All good, thanks."],
            start=1,
        )
    )
    return conversation


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_only_compliance_and_admin_may_rescan(login, role, workspace):
    client = login(role)
    assert client.get("/compliance/redaction/rescan/").status_code == 403
    refused = client.post("/compliance/redaction/rescan/start/", {"reason": "x"})
    assert refused.status_code == 403 and not RescanRun.objects.exists()


def test_the_page_offers_the_form_and_lists_runs(login, workspace):
    html = login("compliance").get("/compliance/redaction/rescan/").content.decode()
    assert 'id="start-rescan"' in html and 'name="reason"' in html
    assert 'value="messages"' in html and "No re-scans yet" in html
    assert 'aria-current="page">Re-scan</a>' in html


def test_a_rescan_needs_a_reason(login, workspace, sent_tasks):
    response = login("compliance").post(
        "/compliance/redaction/rescan/start/",
        {"reason": "", "tiers": ["messages"]},
        **HX,
    )
    assert response.status_code == 422
    assert "Give a reason: every re-scan is audited with one." in response.content.decode()
    assert not RescanRun.objects.exists() and not sent_tasks


def test_a_rescan_from_the_dashboard_scans_old_messages_with_progress(
    login, workspace, old_messages, sent_tasks, django_capture_on_commit_callbacks
):
    client = login("compliance")
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/compliance/redaction/rescan/start/",
            {"reason": "messages written before the scan", "tiers": ["messages"]},
            **HX,
        )

    assert response.status_code == 201
    run = RescanRun.objects.get()
    html = response.content.decode()
    assert html.lstrip().startswith('<article id="rescan-status"')
    assert f'hx-get="/compliance/redaction/rescan/{run.pk}/"' in html  # polls
    assert "queued" in html
    assert sent_tasks == [("governance.tasks.redaction_rescan_task", [run.pk])]
    [event] = AuditEvent.objects.filter(action="redaction.rescan_request")
    assert event.reason == "messages written before the scan"
    assert event.actor_id == str(client.user.pk) and event.actor_role == "compliance"

    # What the page shows mid-run: the counts the worker stores after each batch.
    RescanRun.objects.filter(pk=run.pk).update(
        status="running",
        total=3,
        done=2,
        counts={"messages": {"total": 3, "scanned": 2, "findings": 1, "skipped": 0}},
    )
    running = client.get(f"/compliance/redaction/rescan/{run.pk}/", **HX).content.decode()
    assert "2 of 3 objects scanned" in running and "2 of 3 messages" in running
    assert 'hx-trigger="every 2s"' in running
    RescanRun.objects.filter(pk=run.pk).update(status="pending", total=0, done=0)  # queued again

    assert redaction_rescan_task.apply(args=[run.pk]).get() == "completed"

    done = client.get(f"/compliance/redaction/rescan/{run.pk}/", **HX).content.decode()
    assert "done:</strong> 3 of 3 objects scanned" in done and "3 of 3 messages" in done
    assert "hx-trigger" not in done  # no more polling
    assert MessageScan.objects.count() == 3
    [finding] = RedactionFinding.objects.filter(target_type="message")
    assert (finding.entity_type, finding.status) == ("CREDIT_CARD", "detected")
    listed = client.get("/compliance/redaction/rescan/").content.decode()
    assert f'id="rescan-{run.pk}"' in listed and "completed" in listed
    page = client.get(f"/conversations/{old_messages.pk}/").content.decode()
    assert CARD not in page and "&lt;CREDIT_CARD&gt;" in page and "PII found" in page


def test_a_second_rescan_waits_for_the_first(login, workspace, sent_tasks):
    client = login("compliance")
    first = client.post(
        "/compliance/redaction/rescan/start/", {"reason": "one", "tiers": ["messages"]}
    )
    assert first.status_code == 302

    second = client.post(
        "/compliance/redaction/rescan/start/", {"reason": "two", "tiers": ["messages"]}, **HX
    )

    assert second.status_code == 422
    run = RescanRun.objects.get()
    assert f"Re-scan {run.pk} of this workspace is still pending" in second.content.decode()


def test_another_workspaces_run_is_not_found(login, other_workspace, sent_tasks):
    theirs = rescan_run_request(workspace=other_workspace, actor=SYSTEM_ACTOR, reason="x")
    client = login("compliance")
    assert client.get(f"/compliance/redaction/rescan/{theirs.pk}/").status_code == 404
    assert client.get("/compliance/redaction/rescan/nope/").status_code == 404
