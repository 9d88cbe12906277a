"""The support manager's daily work: what the agent is served, memory search across
conversations, end users' pages, priorities, the conversation list's figures, who wrote a
manual observation, keyboard reach and the raw transcript."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import quote

import pytest
from django.utils import timezone

from core.actors import Actor
from memory.context import context_for_conversation
from memory.models import Conversation, Message, Observation, Reflection
from memory.services import (
    MessageInput,
    conversation_create,
    messages_append,
    observation_create,
    pin_create,
)
from memory.wire import relative_date
from tests.governance.test_redaction_support import set_policy
from tests.memory.factories import ObservationFactory, ReflectionFactory

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"
HX = {"HTTP_HX_REQUEST": "true"}


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


# --- 1. what the agent is served ---------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_the_context_page_shows_exactly_what_the_api_serves(login, api, role, conversation):
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content="Any news on it?")]
    )
    conversation.refresh_from_db()
    served = api.get(f"/v1/conversations/{conversation.pk}/context?format=text")
    html = _page(login(role), f"/conversations/{conversation.pk}/context/")

    from html import unescape

    text = unescape(html.split('aria-label="The context as text">', 1)[1].split("</pre>", 1)[0])
    assert text == served.content.decode()
    assert "byte for byte what the agent gets" in html
    assert "## Recent Messages" in text and "[user] Any news on it?" in text
    assert "Not observed yet (1 message," in html and "#7</a>" in html
    assert "As chat messages" in html and "Relevant memory for this conversation" in html


def test_the_context_page_counts_each_tier_against_the_budget(login, conversation):
    pin_create(
        conversation=conversation,
        actor=Actor(type="user", id="1"),
        message_id=Message.objects.get(conversation=conversation, seq=1).pk,
        reason="exact wording",
    )
    conversation.refresh_from_db()
    client = login("viewer")
    html = _page(client, f"/conversations/{conversation.pk}/context/")
    for tier in ("Pinned", "Reflections", "Observations", "Recent messages"):
        assert f'<th scope="row">{tier}</th>' in html
    assert "Pinned (1)" in html and "Share of budget" not in html

    budgeted = _page(client, f"/conversations/{conversation.pk}/context/?max_tokens=30")
    assert "Share of budget" in budgeted and "of 30" in budgeted
    assert "over budget: pins are never dropped" in budgeted or "Left out" in budgeted
    served = context_for_conversation(conversation=conversation, fmt="text", max_tokens=30)
    assert served.body.decode().splitlines()[0] in budgeted


def test_a_bad_budget_is_refused_with_its_message(login, conversation):
    response = login("viewer").get(f"/conversations/{conversation.pk}/context/?max_tokens=-3")
    assert response.status_code == 422
    assert "max_tokens must be a positive whole number" in response.content.decode()


def test_another_workspaces_context_is_404(login, foreign):
    assert login("admin").get(f"/conversations/{foreign.pk}/context/").status_code == 404


@pytest.fixture
def scanned(workspace, eager_tasks) -> Conversation:
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Card")
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[MessageInput(role="user", content=f"My card is {CARD}, mail {EMAIL}.")],
        )
    return Conversation.objects.get(pk=conversation.pk)


@pytest.mark.parametrize("role", ["viewer", "compliance"])
def test_the_context_page_masks_what_the_conversation_page_masks(login, api, role, scanned):
    html = _page(login(role), f"/conversations/{scanned.pk}/context/")
    assert CARD not in html and EMAIL not in html
    assert "&lt;CREDIT_CARD&gt;" in html and "&lt;EMAIL_ADDRESS&gt;" in html
    assert "Personal data is masked here as on the conversation page" in html
    # The agent itself is served the stored text.
    assert CARD in api.get(f"/v1/conversations/{scanned.pk}/context?format=text").content.decode()


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


def test_messages_not_observed_yet_are_marked_on_the_conversation_page(login, conversation):
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content="Still there?")]
    )
    html = _page(login("viewer"), f"/conversations/{conversation.pk}/")
    newest = html[html.index('id="m-7"') :]
    newest = newest[: newest.index("</li>")]
    assert "is-unobserved" in newest and "not observed yet" in newest
    first = html[html.index('id="m-1"') :]
    assert "not observed yet" not in first[: first.index("</li>")]
    assert f'href="/conversations/{conversation.pk}/context/"' in html


# --- 2. search and end users ---------------------------------------------------------------------


@pytest.fixture
def searchable(workspace, foreign) -> Conversation:
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
        conversation=foreign, items=[MessageInput(role="user", content="zephyr elsewhere")]
    )
    ObservationFactory(conversation=foreign, text="zephyr in globex")
    return conversation


def test_search_finds_each_kind_and_links_to_the_item(login, searchable):
    client = login("viewer")
    html = _page(client, "/search/?q=ZEPHYR")
    assert "Messages (1)" in html and "Observations (1)" in html and "Reflections (1)" in html
    assert "1 message matches “ZEPHYR”" in html
    assert f"/conversations/{searchable.pk}/?at=1#m-1" in html
    assert "<mark>zephyr</mark>" in html and "globex" not in html

    observation = Observation.objects.get(conversation=searchable)
    html = _page(client, "/search/?q=zephyr&kind=observations")
    assert f"?highlight={observation.pk}#obs-{observation.pk}" in html
    assert "high</span>" in html and "elsewhere" not in html and "in globex" not in html

    reflection = Reflection.objects.get(conversation=searchable)
    html = _page(client, "/search/?q=zephyr&kind=reflections")
    assert f"?reflection={reflection.pk}#refl-{reflection.pk}" in html


def test_search_pages_its_results_and_works_as_an_htmx_partial(login, workspace):
    conversation = conversation_create(workspace=workspace, title="Many")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=f"needle {n}") for n in range(30)],
    )
    client = login("viewer")
    first = _page(client, "/search/?q=needle&kind=messages")
    assert "30 messages match" in first and "Page 1 of 2" in first and 'rel="next"' in first
    second = _page(client, "/search/?q=needle&kind=messages&page=2")
    assert second.count('class="search-hit"') == 5
    partial = client.get("/search/?q=needle", **HX).content.decode()
    assert partial.lstrip().startswith('<section id="results"') and "<html" not in partial


def test_search_does_not_find_masked_values(login, scanned):
    html = _page(login("viewer"), f"/search/?q={quote(EMAIL)}")
    # Found in the stored text, but only inside a masked value: not a hit.
    assert "Messages (0)" in html and "No message holds" in html
    assert 'class="search-hit"' not in html
    shown = _page(login("viewer"), "/search/?q=card")
    assert "My <mark>card</mark> is &lt;CREDIT_CARD&gt;" in shown and CARD not in shown


def test_search_without_words_shows_only_the_form(login, workspace):
    html = _page(login("viewer"), "/search/")
    assert 'role="search"' in html and 'id="results"' in html and "Messages (" not in html


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


def test_an_end_user_of_another_workspace_is_404(login, foreign):
    assert login("viewer").get("/users/eve/").status_code == 404
    assert login("viewer").get("/users/nobody/").status_code == 404


# --- 3. priorities --------------------------------------------------------------------------------


def test_priorities_have_a_legend_and_a_filter_that_works_without_javascript(login, conversation):
    priorities = dict(
        Observation.objects.filter(conversation=conversation).values_list("pk", "priority")
    )
    high = [pk for pk, p in priorities.items() if p == "high"]
    assert high and len(high) < len(priorities)
    client = login("viewer")
    html = _page(client, f"/conversations/{conversation.pk}/")
    legend = html[html.index('class="priority-filter"') :]
    legend = legend[: legend.index("</form>")]
    for word in ("high", "medium", "low", "completed"):
        assert f'<input type="radio" name="priority" value="{word}"' in legend
        assert f'aria-hidden="true"></span>{word}' in legend

    filtered = _page(client, f"/conversations/{conversation.pk}/?priority=high")
    assert filtered.count('class="memory-item obs ') == len(high)
    assert 'value="high" checked' in filtered
    partial = client.get(
        f"/conversations/{conversation.pk}/observations/?priority=high", **HX
    ).content.decode()
    assert partial.count('class="memory-item obs ') == len(high)
    redirected = client.get(f"/conversations/{conversation.pk}/observations/?priority=high")
    assert redirected["Location"].endswith("?priority=high#observations")
    # An unknown priority filters nothing.
    everything = _page(client, f"/conversations/{conversation.pk}/?priority=urgent")
    assert everything.count('class="memory-item obs ') == len(priorities)


# --- 4. the conversation list ---------------------------------------------------------------------


def test_the_list_counts_active_and_reflected_observations(login, reflected, conversation):
    html = _page(login("viewer"), "/conversations/")
    reflected_count = Observation.objects.filter(conversation=reflected, status="reflected").count()
    assert reflected_count
    assert f"{reflected_count} reflected" in html
    assert "0 active" in html


def test_the_list_cuts_long_titles_at_a_word_and_says_how_many_match(login, workspace):
    conversation_create(
        workspace=workspace,
        user_id="kim",
        title="Customer cannot sign in after resetting the password twice on the mobile app today",
    )
    client = login("viewer")
    html = _page(client, "/conversations/?user=kim")
    assert "1 conversation matches these filters" in html
    assert ">Customer cannot sign in after resetting the password twice on the mobile app…<" in html


def test_last_activity_is_the_newest_messages_own_time(login, workspace):
    conversation = conversation_create(workspace=workspace, user_id="imp", title="Imported")
    said = timezone.now() - timedelta(days=30)
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="old", created_at=said)],
    )
    html = _page(login("viewer"), "/conversations/")
    row = html[html.index(">Imported<") :]
    assert f'datetime="{said.isoformat()}"' in row[: row.index("</tr>")]
    assert relative_date(said, today=timezone.now().date()) in row[: row.index("</tr>")]


# --- 6. manual observations are attributed --------------------------------------------------------


def test_a_manual_observation_says_who_wrote_it(login, conversation):
    client = login("reviewer")
    response = client.post(
        f"/conversations/{conversation.pk}/observations/add/",
        {"text": "Call back on Monday", "priority": "high", "reason": "phone call"},
    )
    assert response.status_code == 302
    observation = Observation.objects.get(conversation=conversation, text="Call back on Monday")
    html = _page(login("viewer"), f"/conversations/{conversation.pk}/")
    item = html[html.index(f'id="obs-{observation.pk}"') :]
    assert f"written by {client.user.username}" in item[: item.index("</li>")]
    added = client.post(
        f"/conversations/{conversation.pk}/observations/add/",
        {"text": "Another note", "priority": "low", "reason": "r"},
        **HX,
    )
    assert f"written by {client.user.username}" in added.content.decode()


def test_an_observation_by_an_agent_is_not_called_a_person(login, conversation):
    observation_create(
        conversation=conversation, actor=Actor(type="api_key", id="9"), text="Agent note"
    )
    html = _page(login("viewer"), f"/conversations/{conversation.pk}/")
    item = html[html.index(">Agent note<") :]
    assert "an agent over the API" in item[: item.index("</li>")]


# --- 14. keyboard ---------------------------------------------------------------------------------


def test_every_item_is_a_tab_stop_and_the_shortcuts_are_on_the_page(login, reflected):
    html = _page(login("viewer"), f"/conversations/{reflected.pk}/")
    assert 'Jump to: <a href="#messages"' in html
    assert 'href="#observations"' in html and 'href="#reflections"' in html
    assert "Keyboard shortcuts" in html and "<kbd>j</kbd>" in html
    messages = html.count('class="msg role-')
    assert messages and html.count('data-message-id="') == messages
    for marker in ('class="msg role-', 'class="memory-item obs ', 'class="memory-item refl '):
        for chunk in html.split(marker)[1:]:
            assert 'tabindex="0"' in chunk[: chunk.index(">")]


# --- 16. the add bar, the transcript --------------------------------------------------------------


def test_the_add_bar_sits_above_the_list_not_over_it(login, conversation):
    html = _page(login("reviewer"), f"/conversations/{conversation.pk}/")
    bar = html.index('class="add-observation"')
    assert bar < html.index('id="observation-list"')
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static/css/memdesk.css").read_text()
    assert ".add-observation[open] + .column-body" in css
