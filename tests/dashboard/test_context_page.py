"""The context page (/conversations/<id>/context/): exactly what the API serves
the agent, each tier against the budget, masked as the conversation page masks."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.utils.html import escape

from core.actors import Actor
from governance.redaction.pseudonyms import WorkspacePseudonyms
from memory.context.read import context_for_conversation
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.pins import pin_create
from tests.governance.builders import set_policy
from tests.memory.factories import ObservationFactory

CARD = "4111 1111 1111 1111"


EMAIL = "dana.whitfield@example.com"


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_the_context_page_shows_exactly_what_the_api_serves(
    login, api, role, observed_conversation
):
    messages_append(
        conversation=observed_conversation,
        items=[MessageInput(role="user", content="Any news on it?")],
    )
    observed_conversation.refresh_from_db()
    served = api.get(f"/v1/conversations/{observed_conversation.pk}/context?format=text")
    html = _page(login(role), f"/conversations/{observed_conversation.pk}/context/")

    from html import unescape

    text = unescape(html.split('aria-label="The context as text">', 1)[1].split("</pre>", 1)[0])
    assert text == served.content.decode()
    assert "byte for byte what the agent gets" in html
    assert "## Recent Messages" in text and "[user] Any news on it?" in text
    assert "Not observed yet (1 message," in html and "#7</a>" in html
    assert "As chat messages" in html and "Relevant memory for this conversation" in html


def test_the_context_page_counts_each_tier_against_the_budget(login, observed_conversation):
    pin_create(
        conversation=observed_conversation,
        actor=Actor(type="user", id="1"),
        message_id=Message.objects.get(conversation=observed_conversation, seq=1).pk,
        reason="exact wording",
    )
    observed_conversation.refresh_from_db()
    client = login("viewer")
    html = _page(client, f"/conversations/{observed_conversation.pk}/context/")
    for tier in ("Pinned", "Reflections", "Observations", "Recent messages"):
        assert f'<th scope="row">{tier}</th>' in html
    assert "Pinned (1)" in html and "Share of budget" not in html

    budgeted = _page(client, f"/conversations/{observed_conversation.pk}/context/?max_tokens=30")
    assert "Share of budget" in budgeted and "of 30" in budgeted
    assert "over budget: pins are never dropped" in budgeted or "Left out" in budgeted
    served = context_for_conversation(conversation=observed_conversation, fmt="text", max_tokens=30)
    assert served.body.decode().splitlines()[0] in budgeted


def test_a_bad_budget_is_refused_with_its_message(login, observed_conversation):
    response = login("viewer").get(
        f"/conversations/{observed_conversation.pk}/context/?max_tokens=-3"
    )
    assert response.status_code == 422
    assert "max_tokens must be a positive whole number" in response.content.decode()


def test_another_workspaces_context_is_404(login, foreign_conversation):
    assert (
        login("admin").get(f"/conversations/{foreign_conversation.pk}/context/").status_code == 404
    )


@pytest.mark.parametrize("role", ["viewer", "compliance"])
def test_the_context_page_masks_what_the_conversation_page_masks(
    login, api, role, scanned_conversation
):
    html = _page(login(role), f"/conversations/{scanned_conversation.pk}/context/")
    assert CARD not in html and EMAIL not in html
    assert "&lt;CREDIT_CARD&gt;" in html and "&lt;EMAIL_ADDRESS&gt;" in html
    assert "Personal data is masked here as on the conversation page" in html
    # The agent itself is served the stored text.
    assert (
        CARD
        in api.get(
            f"/v1/conversations/{scanned_conversation.pk}/context?format=text"
        ).content.decode()
    )


def test_re_identified_values_are_shown_as_their_pseudonyms(login, api, workspace):
    set_policy(workspace, redact_at_ingest=True, agents_see_reidentified=True)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=f"Mail {EMAIL}.")]
    )
    ObservationFactory(conversation=conversation, text="User gave <EMAIL_ADDRESS_1>.")
    conversation.refresh_from_db()
    assert EMAIL in api.get(f"/v1/conversations/{conversation.pk}/context").content.decode()

    html = _page(login("viewer"), f"/conversations/{conversation.pk}/context/")

    assert EMAIL not in html
    assert "User gave &lt;EMAIL_ADDRESS_1&gt;." in html
    assert "re-identifies memory for agents" in html


def test_a_speakers_name_the_agent_reads_re_identified_is_shown_as_its_pseudonym(
    login, api, workspace
):
    set_policy(workspace, agents_see_reidentified=True)
    with transaction.atomic():
        label = WorkspacePseudonyms(workspace.pk).label("PERSON", "Maria Lopez")
    conversation = conversation_create(workspace=workspace, user_id="maria")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", name=label, content="Where is my parcel?")],
    )
    conversation.refresh_from_db()
    served = api.get(f"/v1/conversations/{conversation.pk}/context?format=messages").json()
    assert served["messages"][0]["name"] == "Maria_Lopez"

    html = _page(login("viewer"), f"/conversations/{conversation.pk}/context/")

    assert "Maria" not in html
    assert f"[{escape(label)} (user)] Where is my parcel?" in html
    assert (
        '<strong class="chat-name">PERSON_1</strong> <span class="chat-role">(user)</span>' in html
    )


def test_a_speakers_name_is_masked_in_the_preview_as_on_the_conversation_page(login, workspace):
    """The policy redacts people and agents read what is stored: the preview shows what
    the agent is served with the speaker's name masked, as the conversation page masks
    it, in the text and in the chat form."""
    conversation = conversation_create(workspace=workspace, user_id="maria")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", name="Maria Lopez", content="Where is my parcel?")],
    )
    conversation.refresh_from_db()

    html = _page(login("viewer"), f"/conversations/{conversation.pk}/context/")

    assert "Maria" not in html and "Lopez" not in html
    assert "[&lt;PERSON&gt; (user)] Where is my parcel?" in html
    assert '<strong class="chat-name">PERSON</strong>' in html
