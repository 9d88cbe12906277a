"""/search/: memory search across the workspace's conversations, by kind, paged,
never finding masked values."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.models import AuditEvent
from memory.models import Conversation, Observation, Reflection
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


def test_the_conversation_list_does_not_tell_who_holds_a_masked_value(login, scanned_conversation):
    client = login("viewer")

    for raw in (CARD, EMAIL):
        html = _page(client, f"/conversations/?q={quote(raw)}")
        assert "0 conversations" in html or "No conversation" in html, raw
        assert str(scanned_conversation.pk) not in html

    # What the page shows is still found: the words around the masked values.
    assert str(scanned_conversation.pk) in _page(client, "/conversations/?q=card")


# ---- search sees what the role sees

CUSTOMER = "Crystal Whitfield"
CUSTOMER_EMAIL = "crystal.whitfield@example.com"
MASKED_SEARCH = "message.search_masked"


@pytest.fixture
def customer_conversation(workspace, eager_tasks) -> Conversation:
    """A scanned message holding a customer's name, card number and e-mail address (all
    masked on every page) among ordinary words; its title and end user id hold none."""
    conversation = conversation_create(workspace=workspace, user_id="u-17", title="Kettle")
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[
                MessageInput(
                    role="user",
                    content=f"Hi, I am {CUSTOMER}. My card is {CARD}, mail {CUSTOMER_EMAIL}. "
                    "The kettle leaks.",
                )
            ],
        )
    return conversation


def _hit_texts(html: str) -> list[str]:
    return re.findall(r'<p class="item-text">(.*?)</p>', html, flags=re.S)


def _masked_searches() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=MASKED_SEARCH).order_by("sequence"))


@pytest.mark.parametrize("role", ["viewer", "reviewer"])
@pytest.mark.parametrize("raw", [CARD, CUSTOMER_EMAIL, "Whitfield", "Crystal"])
def test_a_role_that_sees_masks_finds_nothing_by_a_masked_value(
    login, role, raw, customer_conversation
):
    client = login(role)

    listed = _page(client, f"/conversations/?q={quote(raw)}")
    found = _page(client, f"/search/?q={quote(raw)}")

    assert "No conversation matches" in listed and str(customer_conversation.pk) not in listed
    assert "Messages (0)" in found and not _hit_texts(found)
    assert _masked_searches() == []


def test_a_role_that_sees_masks_still_finds_the_words_around_them(login, customer_conversation):
    client = login("viewer")

    listed = _page(client, "/conversations/?q=kettle")
    found = _page(client, "/search/?q=kettle")

    assert "1 conversation matches" in listed and str(customer_conversation.pk) in listed
    assert "Messages (1)" in found
    [text] = _hit_texts(found)
    assert "I am &lt;PERSON&gt;" in text and "<mark>kettle</mark>" in text
    assert _masked_searches() == []


@pytest.mark.parametrize("role", ["compliance", "admin"])
@pytest.mark.parametrize(
    ("raw", "label"),
    [(CARD, "CREDIT_CARD"), (CUSTOMER_EMAIL, "EMAIL_ADDRESS"), ("Whitfield", "PERSON")],
)
def test_a_role_that_may_reveal_finds_a_masked_value_and_the_search_is_audited(
    login, role, raw, label, customer_conversation
):
    from governance.redaction.masked_search import query_digest

    client = login(role)

    found = _page(client, f"/search/?q={quote(raw)}")
    listed = _page(client, f"/conversations/?q={quote(raw)}")

    # The hit is shown masked, its masked value marked: the page reveals it (audited).
    assert "Messages (1)" in found
    [text] = _hit_texts(found)
    assert f"<mark>&lt;{label}&gt;</mark>" in text and raw not in text
    assert "in masked data</span>" in found
    assert "1 conversation matches" in listed and str(customer_conversation.pk) in listed
    assert "found in masked data</span>" in listed
    events = _masked_searches()
    assert [e.after["page"] for e in events] == ["search", "conversations"]
    for event in events:
        assert event.actor_id == str(client.user.pk) and event.actor_role == role
        assert event.target_type == "workspace"
        assert event.target_id == str(customer_conversation.workspace_id)
        assert event.after["queryDigest"] == query_digest(
            raw, workspace_id=customer_conversation.workspace_id
        )
        assert event.after["matches"] == 1 and event.after["maskedMatches"] == 1
        recorded = json.dumps([event.before, event.after, event.reason]).lower()
        assert raw.lower() not in recorded
        assert not any(word in recorded for word in ("4111", "whitfield", "crystal"))


def test_a_search_that_owes_nothing_to_a_masked_value_is_not_audited(login, customer_conversation):
    client = login("compliance")

    listed = _page(client, "/conversations/?q=kettle")
    assert "1 conversation matches" in listed and "found in masked data</span>" not in listed
    found = _page(client, "/search/?q=kettle")
    assert "Messages (1)" in found and "in masked data</span>" not in found
    # The conversation is listed for "kettle" whoever searches: nothing to audit. On
    # /search/ the hit marks the masked name too, which a viewer's would not.
    assert "1 conversation matches" in _page(client, "/conversations/?q=whitfield+kettle")
    assert _masked_searches() == []
    [text] = _hit_texts(_page(client, "/search/?q=whitfield+kettle"))
    assert "<mark>&lt;PERSON&gt;</mark>" in text and "<mark>kettle</mark>" in text
    [event] = _masked_searches()
    assert event.after["page"] == "search" and event.after["maskedMatches"] == 1


def test_the_query_digest_reads_a_query_as_typed_in_any_case_and_spacing(
    login, customer_conversation
):
    client = login("compliance")
    for query in ("Whitfield", "  WHITFIELD ", "Crystal"):
        _page(client, f"/search/?q={quote(query)}")

    first, second, third = (e.after["queryDigest"] for e in _masked_searches())

    assert first == second != third and len(first) == 16


def _needles(workspace, count: int, title: str) -> None:
    conversation = conversation_create(workspace=workspace, title=title)
    for start in range(0, count, 100):
        messages_append(
            conversation=conversation,
            items=[
                MessageInput(role="user", content=f"{title} needle {n}")
                for n in range(start, min(start + 100, count))
            ],
        )


def test_search_results_come_in_windows_with_a_more_link(login, workspace):
    _needles(workspace, 30, "haystack")
    client = login("viewer")
    html = _page(client, "/search/?q=needle&kind=messages")
    assert html.count('class="search-hit"') == 25
    # The next window: a page of its own without JavaScript, its hits alone for htmx,
    # appended in place of the link.
    link = "?q=needle&amp;kind=messages&amp;page=2"
    assert f'href="{link}"' in html and f'hx-get="{link}"' in html
    assert "More messages (25 of 30 shown)" in html
    more = client.get("/search/?q=needle&kind=messages&page=2", **HX).content.decode()
    assert more.count('class="search-hit"') == 5
    assert "<section" not in more and "More messages" not in more
    assert _page(client, "/search/?q=needle&kind=messages&page=2").count('class="search-hit"') == 5


def test_a_search_reads_the_same_queries_however_many_hits(login, workspace):
    client = login("viewer")
    client.get("/conversations/")  # the session's workspace is saved on the first request
    _needles(workspace, 30, "alpha")
    with CaptureQueriesContext(connection) as few:
        first = _page(client, "/search/?q=alpha&kind=messages")
    _needles(workspace, 150, "bravo")
    with CaptureQueriesContext(connection) as many:
        html = _page(client, "/search/?q=bravo&kind=messages")
    assert len(many) == len(few)
    assert first.count('class="search-hit"') == html.count('class="search-hit"') == 25
    assert "More messages (25 of 30 shown)" in first
    assert "More messages (25 of 150 shown)" in html


def test_a_search_that_fills_the_index_candidates_says_more_may_match(login, workspace):
    _needles(workspace, 210, "charlie")
    html = _page(login("viewer"), "/search/?q=charlie&kind=messages")
    assert "Messages (200+)" in html and "More messages (25 of 200+ shown)" in html
