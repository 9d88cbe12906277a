"""/users/<id>/: one end user's conversations and memory, and the compliance
actions that start from it."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from memory.models import Conversation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.factories import ObservationFactory, ReflectionFactory


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def searchable(workspace, foreign_conversation) -> Conversation:
    conversation = conversation_create(workspace=workspace, user_id="ana/b c?", title="Parcel")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="The zephyr kettle leaks.")],
    )
    ObservationFactory(
        conversation=conversation, text="User's zephyr kettle leaks", priority="high"
    )
    ReflectionFactory(conversation=conversation, text="Zephyr kettle owner, wants a refund")
    # The same word in another workspace must not be found.
    messages_append(
        conversation=foreign_conversation,
        items=[MessageInput(role="user", content="zephyr elsewhere")],
    )
    ObservationFactory(conversation=foreign_conversation, text="zephyr in globex")
    return conversation


def test_an_end_users_page_lists_their_conversations_and_memory(login, searchable, workspace):
    conversation_create(workspace=workspace, user_id="someone else", title="Not theirs")
    client = login("viewer")
    url = f"/users/{quote(searchable.user_id, safe='')}/"
    html = _page(client, url)
    assert 'End user <span class="end-user-id">ana/b c?</span>' in html
    assert "1 conversation in" in html and "Parcel" in html and "Not theirs" not in html
    assert "User&#x27;s zephyr kettle leaks" in html and "Zephyr kettle owner" in html
    # From the list, the search form (?user=) and a search scoped to them.
    listing = _page(client, "/conversations/")
    assert 'href="/users/ana/b%20c%3F/"' in listing
    assert client.get("/users/?user=ana/b c?")["Location"] == "/users/ana/b%20c%3F/"
    scoped = _page(client, "/search/?q=zephyr&user=ana/b c?")
    assert "Messages (1)" in scoped and "Only end user" in scoped


def test_holds_and_erasure_start_from_an_end_users_page_for_compliance(login, searchable):
    url = f"/users/{quote(searchable.user_id, safe='')}/"
    compliance = _page(login("compliance"), url)
    assert 'href="/compliance/holds/?user=ana/b%20c%3F"' in compliance
    assert 'href="/compliance/erasure/?user=ana/b%20c%3F"' in compliance
    prefilled = _page(login("compliance"), "/compliance/erasure/?user=ana/b%20c%3F")
    assert 'value="ana/b c?"' in prefilled
    assert "/compliance/erasure/?user=" not in _page(login("viewer"), url)


def test_an_end_user_of_another_workspace_is_404(login, foreign_conversation):
    assert login("viewer").get("/users/eve/").status_code == 404
    assert login("viewer").get("/users/nobody/").status_code == 404
