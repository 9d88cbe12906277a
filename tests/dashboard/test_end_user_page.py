"""/users/<id>/: one end user's conversations and memory, and the compliance
actions that start from it."""

from __future__ import annotations

from urllib.parse import quote

from memory.services.conversations import conversation_create


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_an_end_users_page_lists_their_conversations_and_memory(
    login, searchable_conversation, workspace
):
    conversation_create(workspace=workspace, user_id="someone else", title="Not theirs")
    client = login("viewer")
    url = f"/users/{quote(searchable_conversation.user_id, safe='')}/"
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


def test_holds_and_erasure_start_from_an_end_users_page_for_compliance(
    login, searchable_conversation
):
    url = f"/users/{quote(searchable_conversation.user_id, safe='')}/"
    compliance = _page(login("compliance"), url)
    assert 'href="/compliance/holds/?user=ana/b%20c%3F"' in compliance
    assert 'href="/compliance/erasure/?user=ana/b%20c%3F"' in compliance
    prefilled = _page(login("compliance"), "/compliance/erasure/?user=ana/b%20c%3F")
    assert 'value="ana/b c?"' in prefilled
    assert "/compliance/erasure/?user=" not in _page(login("viewer"), url)


def test_an_end_user_of_another_workspace_is_404(login, foreign_conversation):
    assert login("viewer").get("/users/eve/").status_code == 404
    assert login("viewer").get("/users/nobody/").status_code == 404
