"""/compliance/retention/: retention policies edited with a reason, a dry run that
names conversations, and sweeps."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.holds import legal_hold_place
from governance.models import AuditEvent, RetentionPolicy, RetentionSweep
from governance.retention.plan import retention_dry_run
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def expiring(workspace, quiet_conversation) -> Conversation:
    """Six messages three days old, and a policy that keeps messages one day."""
    chat(quiet_conversation)
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=1, reason="test"
    )
    return quiet_conversation


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_cannot_see_or_run_retention(login, role, expiring):
    client = login(role)
    for response in (
        client.get("/compliance/retention/"),
        client.post("/compliance/retention/dry-run/"),
        client.post("/compliance/retention/run/"),
    ):
        assert response.status_code == 403
        assert '<strong class="required-role">compliance officer</strong>' in (
            response.content.decode()
        )
    assert not RetentionSweep.objects.exists()


def test_the_retention_page_lists_the_policies(login, expiring):
    html = login("compliance").get("/compliance/retention/").content.decode()
    assert "short" in html and "1 days" in html and "forever" in html
    assert "No sweeps yet." in html


def test_a_dry_run_counts_without_deleting(login, expiring):
    client = login("compliance")
    response = client.post("/compliance/retention/dry-run/", **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<article id="sweep-status"') and "hx-trigger" not in html
    assert '<dd id="count-messages">6</dd>' in html and "nothing was deleted" in html
    assert Message.objects.filter(conversation=expiring).count() == 6
    response = client.post("/compliance/retention/dry-run/")
    sweep = RetentionSweep.objects.order_by("-pk").first()
    assert response["Location"] == f"/compliance/retention/sweeps/{sweep.pk}/"


def test_run_now_queues_a_sweep_that_the_page_polls_until_its_receipt(login, expiring):
    client = login("compliance")
    response = client.post("/compliance/retention/run/", **HX)
    assert response.status_code == 201
    sweep = RetentionSweep.objects.get(dry_run=False)
    url = f"/compliance/retention/sweeps/{sweep.pk}/"
    html = response.content.decode()
    assert f'hx-get="{url}"' in html and 'hx-trigger="every 2s"' in html
    assert "pending" in html and "0 / 0 rows deleted" in html
    assert AuditEvent.objects.filter(action="retention_sweep.request").count() == 1
    # A second sweep is refused while the first is open.
    again = client.post("/compliance/retention/run/", **HX)
    assert again.status_code == 422 and "still pending" in again.content.decode()
    assert client.post("/compliance/retention/run/").status_code == 302  # without JS
    assert "still pending" in client.get("/compliance/retention/").content.decode()

    retention_sweep(sweep_id=sweep.pk)  # what the worker does
    polled = client.get(url, **HX).content.decode()
    assert "hx-trigger" not in polled and "completed" in polled
    assert "6 / 6 rows deleted" in polled and '<dd id="count-messages">6</dd>' in polled
    assert not Message.objects.filter(conversation=expiring).exists()
    assert "Retention sweep" in client.get(url).content.decode()  # the whole page


def test_run_now_without_js_redirects_to_the_sweep(login, expiring):
    response = login("admin").post("/compliance/retention/run/")
    sweep = RetentionSweep.objects.get()
    assert response["Location"] == f"/compliance/retention/sweeps/{sweep.pk}/"


def test_another_workspaces_sweep_is_not_found(login, other_workspace):
    theirs = retention_dry_run(workspace=other_workspace, actor=SYSTEM_ACTOR)
    assert login("compliance").get(f"/compliance/retention/sweeps/{theirs.pk}/").status_code == 404


def _retention(**changes):
    data = {
        "name": "Support chats",
        "conversation_tag": "",
        "message_days": "1",
        "observation_days": "",
        "reflection_days": "",
        "enabled": "on",
        "reason": "Retention schedule v3",
    }
    data.update(changes)
    return data


def test_a_policy_is_created_and_edited_in_the_dashboard_with_a_reason(login, workspace):
    client = login("compliance")
    assert client.get("/compliance/retention/policies/new/").status_code == 200
    response = client.post("/compliance/retention/policies/new/", _retention())
    assert response.status_code == 302
    policy = RetentionPolicy.objects.get(workspace=workspace)
    assert (policy.message_days, policy.observation_days) == (1, None)
    created = AuditEvent.objects.get(action="retention_policy.create")
    assert created.reason == "Retention schedule v3"
    url = f"/compliance/retention/policies/{policy.pk}/"
    assert 'value="Support chats"' in client.get(url).content.decode()
    client.post(url, _retention(message_days="30", reason="Longer for disputes"))
    policy.refresh_from_db()
    assert policy.message_days == 30
    assert AuditEvent.objects.get(action="retention_policy.update").reason == "Longer for disputes"
    assert "Support chats" in client.get("/compliance/retention/").content.decode()


def test_a_bad_retention_policy_shows_every_error_in_the_forms_words(login, workspace):
    retention_policy_create(workspace=workspace, actor=SYSTEM_ACTOR, name="Default", reason="x")
    response = login("compliance").post(
        "/compliance/retention/policies/new/", _retention(message_days="0", reason="")
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert "Keep it at least 1 day" in html and "Give a reason" in html
    duplicate = login("compliance").post("/compliance/retention/policies/new/", _retention())
    assert "already governs every untagged conversation" in duplicate.content.decode()
    assert RetentionPolicy.objects.count() == 1


def test_another_workspaces_policy_is_not_found(login, other_workspace):
    theirs = retention_policy_create(
        workspace=other_workspace, actor=SYSTEM_ACTOR, name="Theirs", reason="x"
    )
    assert (
        login("compliance").get(f"/compliance/retention/policies/{theirs.pk}/").status_code == 404
    )


def test_the_dry_run_lists_conversations_and_those_held_back(login, workspace, dana_conversation):
    held = conversation_create(workspace=workspace, user_id="eve", title="Disputed")
    chat(held)
    legal_hold_place(workspace=workspace, actor=SYSTEM_ACTOR, reason="claim", end_user_id="eve")
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=1, reason="x"
    )
    client = login("compliance")
    response = client.post("/compliance/retention/dry-run/")
    html = client.get(response["Location"]).content.decode()
    assert "1 conversation would lose rows" in html
    assert f'<tr id="due-{dana_conversation.pk}">' in html and "Refund" in html
    assert "1 conversation with expired rows is held back by a legal hold" in html
    assert "Disputed" in html.split('id="held-conversations"')[1]
