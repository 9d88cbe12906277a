"""/users/<id>/: one end user's conversations and memory, and the compliance
actions that start from it."""

from __future__ import annotations

from urllib.parse import quote

from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.services.conversations import conversation_create
from tests.memory.factories import ObservationFactory


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


def _conversations(workspace, user: str, count: int) -> None:
    for n in range(count):
        conversation = conversation_create(workspace=workspace, user_id=user, title=f"Chat {n}")
        ObservationFactory(conversation=conversation, text=f"Note {n} of {user}.")


def test_an_end_users_lists_come_in_windows_with_more_links(login, workspace):
    _conversations(workspace, "dana", 30)
    client = login("viewer")
    html = _page(client, "/users/dana/")
    assert "30 conversations in" in html and html.count('class="conversation-link"') == 25
    assert "Observations (30)" in html and html.count('class="memory-item obs') == 20
    # Each list's "more" link: the next window as a page of its own without JavaScript,
    # its rows alone for htmx, appended in place of the link.
    more = 'href="/users/dana/?conversations=2#user-conversations-heading"'
    assert more in html and 'hx-get="/users/dana/?conversations=2"' in html
    assert "More conversations (25 of 30 shown)" in html
    rows = client.get("/users/dana/?conversations=2", HTTP_HX_REQUEST="true").content.decode()
    assert rows.count('class="conversation-link"') == 5
    assert "<html" not in rows and "More conversations" not in rows
    page = _page(client, "/users/dana/?conversations=2")
    assert page.count('class="conversation-link"') == 5 and "26–30 of 30" in page
    assert page.count('class="memory-item obs') == 20  # the other lists from their start

    assert 'hx-get="/users/dana/?observations=2"' in html
    older = client.get("/users/dana/?observations=2", HTTP_HX_REQUEST="true").content.decode()
    assert older.count('class="memory-item obs') == 10 and "<html" not in older
    assert _page(client, "/users/dana/?observations=2").count('class="memory-item obs') == 10


def test_an_end_users_page_reads_the_same_queries_however_much_they_hold(login, workspace):
    _conversations(workspace, "few", 2)
    _conversations(workspace, "many", 40)
    client = login("viewer")
    client.get("/conversations/")  # the session's workspace is saved on the first request
    with CaptureQueriesContext(connection) as few:
        _page(client, "/users/few/")
    with CaptureQueriesContext(connection) as many:
        html = _page(client, "/users/many/")
    assert len(many) == len(few)
    assert html.count('class="conversation-link"') == 25
    with CaptureQueriesContext(connection) as few_rows:
        client.get("/users/few/?observations=1", HTTP_HX_REQUEST="true")
    with CaptureQueriesContext(connection) as many_rows:
        client.get("/users/many/?observations=2", HTTP_HX_REQUEST="true")
    assert len(many_rows) == len(few_rows)
