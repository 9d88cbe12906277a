"""Masking by role: viewers and reviewers see the personal data the scan found in
messages as its type, on the conversation page, in the raw transcript and in pins;
compliance officers and admins may reveal it, per message or per value, and every
reveal is audited without the value. The agent API is not masked."""

from __future__ import annotations

import json

import pytest

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, RedactionFinding
from memory.models import Conversation, Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.pins import pin_create
from tests.governance.builders import set_policy

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"
TEXT = f"My card is {CARD} and my email is {EMAIL}."
HX = {"HTTP_HX_REQUEST": "true"}
REASON = {"reason": "chargeback dispute 7731"}


@pytest.fixture
def scanned_card_and_email(workspace, eager_tasks) -> Conversation:
    """A conversation whose messages the scan task has read."""
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Card")
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[
                MessageInput(role="user", content=TEXT),
                MessageInput(role="assistant", content="Thanks, I have noted it."),
            ],
        )
    return conversation


def _message(conversation: Conversation, seq: int = 1) -> Message:
    return Message.objects.get(conversation=conversation, seq=seq)


def _finding(entity_type: str) -> RedactionFinding:
    return RedactionFinding.objects.get(target_type="message", entity_type=entity_type)


def _transcript(client, conversation: Conversation) -> str:
    response = client.get(f"/conversations/{conversation.pk}/transcript?format=text")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_every_role_sees_the_values_masked_by_type(login, role, scanned_card_and_email):
    client = login(role)

    page = client.get(f"/conversations/{scanned_card_and_email.pk}/").content.decode()
    transcript = _transcript(client, scanned_card_and_email)

    for text in (page, transcript):
        assert CARD not in text and EMAIL not in text
        assert "4111 1111" not in text  # (a bare "4111" may be part of a random id)
    assert "&lt;CREDIT_CARD&gt;" in page and "&lt;EMAIL_ADDRESS&gt;" in page
    assert "My card is <CREDIT_CARD> and my email is <EMAIL_ADDRESS>." in transcript
    assert "PII found" in page


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
def test_viewers_and_reviewers_get_no_reveal_control(login, role, scanned_card_and_email):
    page = login(role).get(f"/conversations/{scanned_card_and_email.pk}/").content.decode()
    assert "/reveal/" not in page and "Reveal personal data" not in page
    assert 'class="pii-mask" title="CREDIT_CARD, masked for your role"' in page


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_compliance_and_admin_get_a_reveal_control(login, role, scanned_card_and_email):
    page = login(role).get(f"/conversations/{scanned_card_and_email.pk}/").content.decode()
    message = _message(scanned_card_and_email)
    assert (
        f'action="/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/"' in page
    )
    card = _finding("CREDIT_CARD")
    assert f'form="reveal-{message.pk}" name="finding" value="{card.pk}"' in page
    form = page[page.index(f'<form id="reveal-{message.pk}"') :]
    form = form[: form.index("</form>")]
    assert 'name="reason"' in form and "required" in form


def test_older_messages_loaded_later_are_masked_too(login, workspace, eager_tasks):
    conversation = conversation_create(workspace=workspace)
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[MessageInput(role="user", content=TEXT)]
            + [MessageInput(role="user", content=f"filler {n}") for n in range(60)],
        )
    client = login("viewer")

    first = client.get(f"/conversations/{conversation.pk}/").content.decode()
    older = client.get(f"/conversations/{conversation.pk}/messages/?before=12", **HX)

    assert 'id="m-1"' not in first  # the first page shows the newest 50
    html = older.content.decode()
    assert 'id="m-1"' in html and "&lt;CREDIT_CARD&gt;" in html and CARD not in html


def test_a_long_message_is_masked_in_its_summary_too(login, workspace, eager_tasks):
    conversation = conversation_create(workspace=workspace)
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[MessageInput(role="tool", content=f"{TEXT} " + "log line ok. " * 300)],
        )
    html = login("viewer").get(f"/conversations/{conversation.pk}/").content.decode()
    assert 'class="msg-long"' in html and CARD not in html and EMAIL not in html


def test_pins_of_a_message_are_masked(login, scanned_card_and_email):
    message = _message(scanned_card_and_email)
    pin_create(
        conversation=scanned_card_and_email,
        message_id=message.pk,
        start=TEXT.index("My card"),
        end=TEXT.index(" and my email"),
        actor=SYSTEM_ACTOR,
    )
    pin_create(conversation=scanned_card_and_email, message_id=message.pk, actor=SYSTEM_ACTOR)
    html = login("viewer").get(f"/conversations/{scanned_card_and_email.pk}/").content.decode()
    pins = html[html.index('id="pin-list"') :]
    assert pins.count('<span class="pii-mask" title="CREDIT_CARD, masked">') == 2
    assert "&lt;EMAIL_ADDRESS&gt;" in pins and CARD not in html and EMAIL not in html


def test_a_message_not_yet_scanned_says_so(login, workspace, django_capture_on_commit_callbacks):
    conversation = conversation_create(workspace=workspace)
    with django_capture_on_commit_callbacks(execute=False):  # the worker has not run
        messages_append(conversation=conversation, items=[MessageInput(role="user", content=TEXT)])
    client = login("viewer")

    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    transcript = _transcript(client, conversation)

    assert "not scanned yet" in page
    assert "#1  " in transcript and "[not scanned for personal data yet" in transcript


# --- revealing ---------------------------------------------------------------------------------


def test_a_reviewer_cannot_reveal(login, scanned_card_and_email):
    message = _message(scanned_card_and_email)
    response = login("reviewer").post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/", **HX
    )
    assert response.status_code == 403
    assert "To reveal personal data in messages" in response.content.decode()
    assert (
        '<strong class="required-role">compliance officer</strong> or '
        '<strong class="required-role">admin</strong>'
    ) in response.content.decode()
    assert CARD not in response.content.decode()
    assert not AuditEvent.objects.filter(action="message.reveal").exists()


def test_compliance_reveals_a_message_and_the_reveal_is_audited(login, scanned_card_and_email):
    client = login("compliance")
    message = _message(scanned_card_and_email)

    response = client.post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/", REASON, **HX
    )

    assert response.status_code == 200
    assert response["Cache-Control"] == "private, no-store"
    html = response.content.decode()
    assert html.lstrip().startswith(f'<li id="m-{message.seq}"') and "<html" not in html
    assert (
        f'<mark class="pii-revealed" title="CREDIT_CARD, revealed to you (audited)">{CARD}' in html
    )
    assert EMAIL in html and "Reveal personal data" not in html  # nothing left masked
    [event] = AuditEvent.objects.filter(action="message.reveal")
    assert event.target_type == "message" and event.target_id == str(message.pk)
    assert event.actor_id == str(client.user.pk) and event.actor_role == "compliance"
    assert event.after["entities"] == {"CREDIT_CARD": 1, "EMAIL_ADDRESS": 1}
    assert event.after["whole"] is True
    assert event.reason == "chargeback dispute 7731"
    stored = json.dumps([event.before, event.after, event.reason])
    assert CARD not in stored and EMAIL not in stored
    # Revealing shows; it changes nothing stored, and the next page load masks again.
    assert _message(scanned_card_and_email).content == TEXT
    assert CARD not in client.get(f"/conversations/{scanned_card_and_email.pk}/").content.decode()


def test_an_admin_reveals_one_value(login, scanned_card_and_email):
    message = _message(scanned_card_and_email)
    card = _finding("CREDIT_CARD")

    response = login("admin").post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/",
        {"finding": str(card.pk), **REASON},
        **HX,
    )

    html = response.content.decode()
    assert response.status_code == 200 and CARD in html
    assert EMAIL not in html and "&lt;EMAIL_ADDRESS&gt;" in html  # still masked
    [event] = AuditEvent.objects.filter(action="message.reveal")
    assert event.after["findingIds"] == [card.pk] and event.after["whole"] is False


def test_revealing_without_javascript_shows_a_page(login, scanned_card_and_email):
    message = _message(scanned_card_and_email)
    response = login("compliance").post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/", REASON
    )
    html = response.content.decode()
    assert response.status_code == 200 and "<html" in html and CARD in html
    assert "recorded in the audit log" in html


@pytest.mark.parametrize("posted", [{}, {"reason": "   "}, {"finding": "{card}"}])
@pytest.mark.parametrize("htmx", [True, False])
def test_a_reveal_without_a_reason_reveals_nothing(login, scanned_card_and_email, posted, htmx):
    message = _message(scanned_card_and_email)
    card = _finding("CREDIT_CARD")
    data = {key: value.format(card=card.pk) for key, value in posted.items()}

    response = login("compliance").post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/",
        data,
        **(HX if htmx else {}),
    )

    assert response.status_code == 422
    html = response.content.decode()
    assert CARD not in html and EMAIL not in html and "4111 1111" not in html
    assert "Give a reason" in html  # next to the field, which is shown again
    assert f'<form id="reveal-{message.pk}"' in html and 'name="reason"' in html
    if htmx:
        assert html.lstrip().startswith(f'<li id="m-{message.seq}"') and "<html" not in html
    else:
        assert "<html" in html
    assert not AuditEvent.objects.filter(action="message.reveal").exists()


def test_bad_reveal_requests(login, scanned_card_and_email, foreign_conversation):
    client = login("compliance")
    message = _message(scanned_card_and_email)
    url = f"/conversations/{scanned_card_and_email.pk}/messages/{message.pk}/reveal/"
    other = RedactionFinding.objects.create(
        workspace=scanned_card_and_email.workspace,
        conversation=scanned_card_and_email,
        target_type="message",
        target_id=_message(scanned_card_and_email, 2).pk,
        entity_type="PERSON",
        start=0,
        end=6,
        score=0.9,
        operator="replace",
        status="detected",
        policy_version=1,
    )

    not_ids = client.post(url, {"finding": "12; DROP", **REASON}, **HX)
    elsewhere = client.post(url, {"finding": str(other.pk), **REASON}, **HX)
    foreign_message = foreign_conversation.messages.first()
    theirs = client.post(
        f"/conversations/{foreign_conversation.pk}/messages/{foreign_message.pk}/reveal/",
        REASON,
        **HX,
    )
    wrong_message = client.post(
        f"/conversations/{scanned_card_and_email.pk}/messages/{foreign_message.pk}/reveal/",
        REASON,
        **HX,
    )

    assert not_ids.status_code == 400 and "finding must be" in not_ids.content.decode()
    assert elsewhere.status_code == 404
    assert theirs.status_code == 404 and wrong_message.status_code == 404
    assert client.get(url).status_code == 405
    assert not AuditEvent.objects.filter(action="message.reveal").exists()


def test_values_the_policy_keeps_are_not_masked(login, workspace, eager_tasks):
    set_policy(workspace, operators={"EMAIL_ADDRESS": "keep"})
    conversation = conversation_create(workspace=workspace)
    with eager_tasks():
        messages_append(conversation=conversation, items=[MessageInput(role="user", content=TEXT)])
    html = login("viewer").get(f"/conversations/{conversation.pk}/").content.decode()
    assert EMAIL in html and CARD not in html


def test_the_agent_api_reads_messages_as_written(api, scanned_card_and_email):
    messages = api.get(f"/v1/conversations/{scanned_card_and_email.pk}/messages").json()["messages"]
    assert TEXT in [m["content"] for m in messages]
