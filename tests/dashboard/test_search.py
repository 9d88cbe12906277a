"""/search/: memory search across the workspace's conversations, by kind, paged,
never finding masked values."""

from __future__ import annotations

from urllib.parse import quote

from memory.models import Observation, Reflection
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append

CARD = "4111 1111 1111 1111"


EMAIL = "dana.whitfield@example.com"


HX = {"HTTP_HX_REQUEST": "true"}


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def test_search_finds_each_kind_and_links_to_the_item(login, searchable_conversation):
    client = login("viewer")
    html = _page(client, "/search/?q=ZEPHYR")
    assert "Messages (1)" in html and "Observations (1)" in html and "Reflections (1)" in html
    assert "1 message matches “ZEPHYR”" in html
    assert f"/conversations/{searchable_conversation.pk}/?at=1#m-1" in html
    assert "<mark>zephyr</mark>" in html and "globex" not in html

    observation = Observation.objects.get(conversation=searchable_conversation)
    html = _page(client, "/search/?q=zephyr&kind=observations")
    assert f"?highlight={observation.pk}#obs-{observation.pk}" in html
    assert "high</span>" in html and "elsewhere" not in html and "in globex" not in html

    reflection = Reflection.objects.get(conversation=searchable_conversation)
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


def test_search_does_not_find_masked_values(login, scanned_conversation):
    html = _page(login("viewer"), f"/search/?q={quote(EMAIL)}")
    # Found in the stored text, but only inside a masked value: not a hit.
    assert "Messages (0)" in html and "No message holds" in html
    assert 'class="search-hit"' not in html
    shown = _page(login("viewer"), "/search/?q=card")
    assert "My <mark>card</mark> is &lt;CREDIT_CARD&gt;" in shown and CARD not in shown


def test_search_without_words_shows_only_the_form(login, workspace):
    html = _page(login("viewer"), "/search/")
    assert 'role="search"' in html and 'id="results"' in html and "Messages (" not in html


def test_a_question_finds_the_answer_first_with_its_words_marked(login, workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content="Hello, I have a question about my order."),
            MessageInput(role="assistant", content="Refunds reach your card within 5 days."),
            MessageInput(role="user", content="Thanks, bye."),
        ],
    )

    html = _page(login("viewer"), "/search/?q=" + quote("how long does a refund take?"))

    assert "1 message matches" in html
    assert "<mark>Refunds</mark> reach your card within 5 days." in html


def test_the_conversation_list_does_not_tell_who_holds_a_masked_value(
    login, scanned_conversation
):
    client = login("viewer")

    for raw in (CARD, EMAIL):
        html = _page(client, f"/conversations/?q={quote(raw)}")
        assert "0 conversations" in html or "No conversation" in html, raw
        assert str(scanned_conversation.pk) not in html

    # What the page shows is still found: the words around the masked values.
    assert str(scanned_conversation.pk) in _page(client, "/conversations/?q=card")
