"""/compliance/originals/: revealing a restricted original, for the compliance
officer only, audited."""

from __future__ import annotations

import pytest

from governance.models import AuditEvent
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.governance.builders import set_policy

HX = {"HTTP_HX_REQUEST": "true"}


EMAIL = "dana.whitfield@example.com"


@pytest.fixture
def redacted_message(workspace, quiet_conversation) -> Message:
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)
    messages_append(
        conversation=quiet_conversation,
        items=[MessageInput(role="user", content=f"My email is {EMAIL}")],
    )
    message = Message.objects.get(conversation=quiet_conversation)
    assert EMAIL not in message.content
    return message


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_only_the_compliance_officer_may_reveal_an_original(login, role, redacted_message):
    url = f"/compliance/originals/message/{redacted_message.pk}/"
    client = login(role)
    for response in (client.get(url), client.post(url)):
        assert response.status_code == 403
        html = response.content.decode()
        assert "To read restricted originals in <strong>acme</strong>" in html
        assert '<strong class="required-role">compliance officer</strong> role' in html
        assert f"Your role there is <strong>{role}</strong>" in html
        assert EMAIL not in html
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_revealing_shows_the_original_and_writes_an_audit_event(login, redacted_message):
    url = f"/compliance/originals/message/{redacted_message.pk}/"
    client = login("compliance")
    page = client.get(url).content.decode()
    assert 'id="reveal-original"' in page and EMAIL not in page
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()
    refused = client.post(url, {"reason": " "}, **HX)
    assert refused.status_code == 422 and EMAIL not in refused.content.decode()
    assert "A reason is required" in refused.content.decode()
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()
    response = client.post(url, {"reason": "DSAR-4"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="original"') and "<html" not in html
    assert f"My email is {EMAIL}" in html
    assert response["Cache-Control"] == "private, no-store"
    event = AuditEvent.objects.get(action="restricted_original.read")
    assert (event.target_type, event.target_id, event.actor_role) == (
        "message",
        str(redacted_message.pk),
        "compliance",
    )
    assert EMAIL not in str(event.after)
    without_htmx = client.post(url, {"reason": "DSAR-4"}).content.decode()
    assert f"My email is {EMAIL}" in without_htmx


def test_the_audit_log_links_redacted_messages_to_their_reveal(login, redacted_message):
    link = f'href="/compliance/originals/message/{redacted_message.pk}/"'
    assert link in login("compliance").get("/compliance/audit/").content.decode()
    assert link not in login("admin").get("/compliance/audit/").content.decode()


def test_an_original_that_is_not_kept_or_not_ours_is_not_found(
    login, workspace, quiet_conversation, foreign_conversation, other_workspace
):
    client = login("compliance")
    kept_nowhere = Message.objects.filter(conversation=foreign_conversation).first()
    assert (
        client.post(
            f"/compliance/originals/message/{kept_nowhere.pk}/", {"reason": "DSAR-4"}
        ).status_code
        == 404
    )
    assert (
        client.post(
            f"/compliance/originals/essay/{kept_nowhere.pk}/", {"reason": "DSAR-4"}
        ).status_code
        == 404
    )
    assert not AuditEvent.objects.filter(action="restricted_original.read").exists()


def test_another_workspaces_original_is_not_found(login, other_workspace):
    set_policy(other_workspace, redact_at_ingest=True, keep_originals=True)
    theirs = conversation_create(workspace=other_workspace, user_id="eve")
    messages_append(conversation=theirs, items=[MessageInput(role="user", content=EMAIL)])
    message = Message.objects.get(conversation=theirs)
    response = login("compliance").post(
        f"/compliance/originals/message/{message.pk}/", {"reason": "DSAR-4"}
    )
    assert response.status_code == 404 and EMAIL not in response.content.decode()
