"""/escalations/: the workspace's escalations, and resolving one with a note."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.models import Escalation
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_create

REASON = "Customer Dana Pierce wants to cancel"


@pytest.fixture
def escalated(workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    older = escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="First ask")
    Escalation.objects.filter(pk=older.pk).update(created_at=timezone.now() - timedelta(hours=3))
    newer = escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason=REASON)
    return conversation, older, newer


def test_the_escalations_page_lists_open_ones_newest_first_with_links(login, escalated):
    conversation, older, newer = escalated

    html = login("reviewer").get("/escalations/").content.decode()

    assert html.index(f"escalation-{newer.pk}") < html.index(f"escalation-{older.pk}")
    assert f"/conversations/{conversation.pk}/#escalations" in html
    assert "wants to cancel" in html and "Dana Pierce" not in html  # masked, as messages are
    assert 'action="/escalations/' in html  # a reviewer may resolve


def test_viewers_see_escalations_without_their_reasons(login, escalated):
    _, _, newer = escalated

    response = login("viewer").get("/escalations/")

    html = response.content.decode()
    assert response.status_code == 200
    assert f"escalation-{newer.pk}" in html
    assert REASON not in html and "Dana Pierce" not in html
    assert "Reason withheld" in html
    assert "/resolve/" not in html


def test_another_workspaces_escalations_are_not_listed(login, escalated, other_workspace):
    foreign = conversation_create(workspace=other_workspace, title="Elsewhere")
    theirs = escalation_create(conversation=foreign, actor=SYSTEM_ACTOR, reason="Theirs")

    client = login("admin")
    html = client.get("/escalations/?status=all").content.decode()

    assert f"escalation-{theirs.pk}" not in html
    response = client.post(f"/escalations/{theirs.pk}/resolve/", {"note": "Called them"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "open"


def test_a_reviewer_resolves_an_escalation_with_a_note(login, escalated):
    conversation, _, newer = escalated
    client = login("reviewer")

    response = client.post(
        f"/escalations/{newer.pk}/resolve/", {"note": "Refunded by phone", "back": "conversation"}
    )

    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{conversation.pk}/#escalations"
    newer.refresh_from_db()
    assert newer.status == "resolved"
    assert newer.resolution_note == "Refunded by phone"
    assert newer.resolved_by == f"user:{client.user.pk}"
    event = AuditEvent.objects.get(action="escalation.resolve")
    assert event.target_id == str(newer.pk)
    assert event.after == {"conversationId": str(conversation.pk), "status": "resolved"}
    assert "Refunded" not in str(event.after) + event.reason
    html = client.get("/escalations/").content.decode()
    assert f"escalation-{newer.pk}" not in html  # only open ones by default
    assert f"escalation-{newer.pk}" in client.get("/escalations/?status=resolved").content.decode()


def test_resolving_needs_a_note_and_the_right_role(login, escalated):
    _, _, newer = escalated

    blank = login("reviewer").post(f"/escalations/{newer.pk}/resolve/", {"note": "  "})
    viewer = login("viewer").post(f"/escalations/{newer.pk}/resolve/", {"note": "Done"})

    assert blank.status_code == 422
    assert "Write a note" in blank.content.decode()
    assert viewer.status_code == 403
    newer.refresh_from_db()
    assert newer.status == "open"
    assert not AuditEvent.objects.filter(action="escalation.resolve").exists()


def test_resolving_twice_keeps_the_first_note(login, escalated):
    _, _, newer = escalated
    client = login("reviewer")
    client.post(f"/escalations/{newer.pk}/resolve/", {"note": "First"})

    again = client.post(f"/escalations/{newer.pk}/resolve/", {"note": "Second"})

    assert again.status_code == 422
    assert "already resolved" in again.content.decode()
    newer.refresh_from_db()
    assert newer.resolution_note == "First"


def test_the_conversation_pages_show_its_escalations_and_recall(login, workspace):
    conversation = conversation_create(workspace=workspace, user_id="ann", title="Order")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="Order ORD-123456 was sent to Berlin for €42.")],
    )
    observation_create(
        conversation=conversation,
        actor=SYSTEM_ACTOR,
        text="User's order ORD-123456 went to Berlin.",
        reason="note",
    )
    escalation = escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason=REASON)

    client = login("reviewer")
    html = client.get(f"/conversations/{conversation.pk}/").content.decode()
    context = client.get(f"/conversations/{conversation.pk}/context/").content.decode()

    assert 'id="escalations"' in html and f"escalation-{escalation.pk}" in html
    assert "wants to cancel" in html
    assert "Recall estimate: 67%" in context
    assert "<strong>2 of 3</strong>" in context


@pytest.mark.parametrize("page", ["/escalations/", "conversation"])
def test_an_agents_reason_and_a_reviewers_note_are_masked_for_every_role(
    login, workspace, page
):
    """The reason is the agent's free text: a name and a phone number in it are shown as
    their entity types to reviewers too (issue 24), as a message's are."""
    conversation = conversation_create(workspace=workspace, user_id="al", title="Callback")
    escalation = escalation_create(
        conversation=conversation,
        actor=SYSTEM_ACTOR,
        reason="Alessandro Phoenix asked for a callback at (727) 760-7806",
    )
    reviewer = login("reviewer")
    reviewer.post(
        f"/escalations/{escalation.pk}/resolve/",
        {"note": "Called Alessandro Phoenix back on (727) 760-7806"},
    )
    url = page if page.startswith("/") else f"/conversations/{conversation.pk}/"
    html = reviewer.get(url + ("?status=all" if page.startswith("/") else "")).content.decode()
    assert "asked for a callback at" in html
    for value in ("Alessandro", "Phoenix", "760-7806"):
        assert value not in html
    assert "&lt;PHONE_NUMBER&gt;" in html
    assert Escalation.objects.get(pk=escalation.pk).reason.startswith("Alessandro Phoenix")

