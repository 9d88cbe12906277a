"""Pinning from the conversation page: a reviewer pins a message and unpins it with a
reason, as the signed-in user in the audit trail; a viewer only sees the pins."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.models import Message, Pin
from memory.services.conversations import conversation_create
from memory.services.pins import pin_create
from tests.dashboard.factories import chat, observe

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def message(observed_conversation) -> Message:
    return observed_conversation.messages.order_by("seq").first()


@pytest.fixture
def pin(observed_conversation, message) -> Pin:
    return pin_create(conversation=observed_conversation, actor=SYSTEM_ACTOR, message_id=message.pk)


def _quoted_masked(html: str) -> bool:
    """The first message of the chat quoted with the name the scan found masked."""
    return (
        'Hi, I&#x27;m <span class="pii-mask" title="PERSON, masked' in html
        and "&lt;PERSON&gt;</span>. My Aero 2 headphones arrived broken, order ORD-123456." in html
    )


def _pin_url(message: Message) -> str:
    return f"/conversations/{message.conversation_id}/messages/{message.pk}/pin/"


def _unpin_url(pin: Pin) -> str:
    return f"/conversations/{pin.conversation_id}/pins/{pin.pk}/unpin/"


@pytest.mark.parametrize("role", ["reviewer", "compliance", "admin"])
def test_a_reviewer_pins_a_message_and_the_pinned_list_is_swapped_in(login, role, message):
    client = login(role)

    response = client.post(_pin_url(message), {"reason": "refund terms"}, **HX)

    assert response.status_code == 201
    html = response.content.decode()
    assert html.lstrip().startswith('<ol id="pin-list"')
    pin = Pin.objects.get()
    assert (pin.message_id, pin.text, pin.start, pin.end) == (
        message.pk,
        message.content,
        None,
        None,
    )
    # The quote is the message as written; the list shows it as the message is shown,
    # with the name the scan found in it masked.
    assert f'id="pin-{pin.pk}"' in html and _quoted_masked(html) and "Dana" not in html
    event = AuditEvent.objects.get(action="pin.create")
    assert (event.actor_type, event.actor_id, event.actor_role, event.reason) == (
        "user",
        str(client.user.pk),
        role,
        "refund terms",
    )


def test_pinning_without_javascript_redirects_to_the_pin(login, message):
    response = login("reviewer").post(_pin_url(message), {"reason": ""})

    pin = Pin.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{message.conversation_id}/#pin-{pin.pk}"


def test_the_page_shows_pins_above_the_reflections_with_pin_and_unpin_actions(
    login, observed_conversation, pin
):
    html = login("reviewer").get(f"/conversations/{observed_conversation.pk}/").content.decode()

    assert html.index('id="pins-heading"') < html.index('id="reflection-list"')
    assert f'id="pin-{pin.pk}"' in html
    assert f'href="/conversations/{observed_conversation.pk}/pins/{pin.pk}/unpin/"' in html
    assert html.count("Pin the whole message") == observed_conversation.messages.count()


def test_a_viewer_sees_pins_but_no_pin_or_unpin_action(login, observed_conversation, pin):
    html = login("viewer").get(f"/conversations/{observed_conversation.pk}/").content.decode()

    assert f'id="pin-{pin.pk}"' in html and _quoted_masked(html) and "Dana" not in html
    assert "Pin the whole message" not in html
    assert "/unpin/" not in html


def test_a_viewer_cannot_pin_or_unpin(login, message, pin):
    client = login("viewer")
    for response in (
        client.post(_pin_url(message), {"reason": "r"}, **HX),
        client.get(_unpin_url(pin)),
        client.post(_unpin_url(pin), {"reason": "r"}, **HX),
    ):
        assert response.status_code == 403
        assert b'<strong class="required-role">reviewer</strong>' in response.content
    assert list(Pin.objects.all()) == [pin]
    assert not AuditEvent.objects.filter(action="pin.create", actor_type="user").exists()


def test_unpinning_with_a_reason_leaves_a_tombstone_and_an_audit_event(login, pin):
    client = login("reviewer")

    form = client.get(_unpin_url(pin), **HX)
    assert form.status_code == 200 and b'name="reason"' in form.content
    response = client.post(_unpin_url(pin), {"reason": "quote was wrong"}, **HX)

    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith(f'<li id="pin-{pin.pk}"')
    assert b"Unpinned" in response.content
    assert not Pin.objects.exists()
    event = AuditEvent.objects.get(action="pin.delete")
    assert (event.actor_id, event.reason) == (str(client.user.pk), "quote was wrong")


def test_unpinning_without_a_reason_is_refused_and_keeps_the_pin(login, pin):
    response = login("reviewer").post(_unpin_url(pin), {"reason": "  "}, **HX)

    assert response.status_code == 422
    assert b"Give a reason" in response.content
    assert response["HX-Retarget"] == f"#pin-{pin.pk}-panel"
    assert Pin.objects.filter(pk=pin.pk).exists()
    assert not AuditEvent.objects.filter(action="pin.delete").exists()


def test_unpinning_without_javascript_redirects_to_the_pins(login, pin):
    page = login("reviewer").get(_unpin_url(pin))
    assert page.status_code == 200 and b"<h1>Unpin</h1>" in page.content

    response = login("reviewer").post(_unpin_url(pin), {"reason": "done"})

    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{pin.conversation_id}/#pins"


def test_another_workspaces_message_and_pin_are_not_found(login, foreign_conversation):
    theirs = foreign_conversation.messages.first()
    their_pin = pin_create(
        conversation=foreign_conversation, actor=SYSTEM_ACTOR, message_id=theirs.pk
    )
    client = login("admin")

    assert client.post(_pin_url(theirs), {"reason": "r"}).status_code == 404
    assert client.post(_unpin_url(their_pin), {"reason": "r"}).status_code == 404
    assert Pin.objects.count() == 1


# --- what the agent is served --------------------------------------------------------------------


def test_the_served_figures_count_pins_as_the_api_metrics_do(
    login, api, observed_conversation, pin
):
    served = api.get(f"/v1/metrics?conversationId={observed_conversation.pk}").json()[
        "servedTokens"
    ]
    client = login("viewer")

    page = client.get(f"/conversations/{observed_conversation.pk}/")
    listed = {c.pk: c for c in client.get("/conversations/").context["page"].object_list}

    stats = page.context["stats"]
    assert stats.pin_count == 1 and stats.pin_tokens == pin.token_count > 0
    assert stats.served_tokens == served
    assert stats.served_tokens == (
        pin.token_count + stats.reflection_tokens + stats.observation_tokens
    ) + max(stats.message_tokens - stats.observed_tokens, 0)
    assert listed[observed_conversation.pk].stats.served_tokens == served
    html = page.content.decode()
    assert f"{served:,}</span>" in html and f"({pin.token_count:,} pinned)" in html
    assert f"{served:,} served" in client.get("/conversations/").content.decode()


def test_a_pin_lowers_the_compression_the_list_sorts_by(
    login, workspace, observed_conversation, pin
):
    unpinned = conversation_create(workspace=workspace, user_id="dana", title="Unpinned")
    chat(unpinned)
    observe(unpinned)
    client = login("viewer")

    def first(sort: str) -> str:
        response = client.get(f"/conversations/?sort={sort}")
        return response.context["page"].object_list[0].title

    assert first("compression") == observed_conversation.title  # lowest first: the pinned one
    assert first("-compression") == "Unpinned"


def test_the_metrics_page_shows_pins_among_the_tiers_served(login, observed_conversation, pin):
    html = (
        login("viewer").get(f"/metrics/?conversation={observed_conversation.pk}").content.decode()
    )
    assert f"Pinned quotes {pin.token_count} tokens" in html
