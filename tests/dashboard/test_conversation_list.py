"""/conversations/: search, filters, sorting, pagination and the per-tier figures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memory.models import Conversation, Observation, ObserverRun
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.wire import relative_date
from tests.dashboard.factories import ROLES, chat, observe
from tests.governance.factories import LegalHoldFactory, RedactionFindingFactory


def _page(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def _titles(response) -> list[str]:
    return [c.title for c in response.context["page"].object_list]


@pytest.mark.parametrize("role", ROLES)
def test_every_role_sees_the_list_with_per_tier_figures(
    login, role, reflected_conversation, observed_conversation
):
    response = login(role).get("/conversations/")
    assert response.status_code == 200
    rows = {c.title: c for c in response.context["page"].object_list}
    row = rows["Refund"].stats
    assert row.message_count == 6
    active = Observation.objects.filter(conversation=reflected_conversation, status="active")
    # What the Reflector condensed is reflected; what it did not stays active.
    assert row.reflection_count >= 1 and row.observation_count == active.count() > 0
    assert row.message_tokens > row.served_tokens > 0
    assert row.compression == pytest.approx(row.message_tokens / row.served_tokens)
    assert rows["Broken headphones"].stats.observation_count >= 1
    html = response.content.decode()
    assert "Refund" in html and f"{row.compression:.1f}×" in html


def test_it_lists_only_the_current_workspace(login, observed_conversation, foreign_conversation):
    response = login("admin").get("/conversations/")
    assert _titles(response) == ["Broken headphones"]
    assert b"Globex chat" not in response.content


def test_search_matches_title_end_user_id_and_message_text(login, workspace, observed_conversation):
    other = conversation_create(workspace=workspace, user_id="zed", title="Shipping")
    chat(other, [("user", "Where is my parcel to Lisbon?")])
    client = login("viewer")
    assert _titles(client.get("/conversations/?q=headphones")) == ["Broken headphones"]
    assert _titles(client.get("/conversations/?q=ZED")) == ["Shipping"]
    assert _titles(client.get("/conversations/?q=lisbon")) == ["Shipping"]
    assert _titles(client.get(f"/conversations/?q={other.pk}")) == ["Shipping"]


def test_filters_by_end_user_and_date_range(login, workspace):
    old = conversation_create(workspace=workspace, user_id="ann", title="Old")
    # No messages: its last activity is when it started.
    long_ago = timezone.now() - timedelta(days=40)
    Conversation.objects.filter(pk=old.pk).update(created_at=long_ago, updated_at=long_ago)
    conversation_create(workspace=workspace, user_id="bob", title="New")
    client = login("viewer")
    assert _titles(client.get("/conversations/?user=ann")) == ["Old"]
    since = (timezone.now() - timedelta(days=7)).date().isoformat()
    assert _titles(client.get(f"/conversations/?active_from={since}")) == ["New"]
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    assert _titles(client.get(f"/conversations/?active_to={until}")) == ["Old"]


def test_a_bad_date_range_is_shown_next_to_its_field(login, observed_conversation):
    response = login("viewer").get("/conversations/?active_from=2026-02-10&active_to=2026-02-01")
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="id_active_to_error"' in html
    assert "The end date is before the start date." in html


def test_filters_pii_found_legal_hold_and_pipeline_failures(
    login, workspace, observed_conversation
):
    pii = conversation_create(workspace=workspace, user_id="p", title="With PII")
    RedactionFindingFactory(conversation=pii)
    held = conversation_create(workspace=workspace, user_id="h", title="Held")
    LegalHoldFactory(conversation=held)
    conversation_create(workspace=workspace, user_id="sam", title="User held")
    LegalHoldFactory(workspace=workspace, conversation=None, end_user_id="sam")
    released = conversation_create(workspace=workspace, user_id="r", title="Released")
    LegalHoldFactory(conversation=released, released_at=timezone.now())
    failing = conversation_create(workspace=workspace, user_id="f", title="Failing")
    ObserverRun.objects.create(
        conversation=failing, trigger="manual", status="failed", error="provider down"
    )
    client = login("viewer")
    # Dana's chat names her: the scan of its messages flagged it as well.
    assert sorted(_titles(client.get("/conversations/?pii=on"))) == [
        "Broken headphones",
        "With PII",
    ]
    assert sorted(_titles(client.get("/conversations/?hold=on"))) == ["Held", "User held"]
    failed = client.get("/conversations/?failed=on")
    assert _titles(failed) == ["Failing"]
    assert b"run failed" in failed.content
    everything = client.get("/conversations/").content.decode()
    assert "PII found" in everything and "on hold" in everything


@pytest.mark.parametrize(
    ("sort", "first"), [("-messages", "Long"), ("user", "Long"), ("-compression", "Observed")]
)
def test_sorting(login, workspace, sort, first):
    long = conversation_create(workspace=workspace, user_id="a-first", title="Long")
    chat(long, [("user", f"Message number {n} about the order.") for n in range(12)])
    observed = conversation_create(workspace=workspace, user_id="b-second", title="Observed")
    chat(observed)
    observe(observed)
    assert _titles(login("viewer").get(f"/conversations/?sort={sort}"))[0] == first


def test_pagination_keeps_the_filters(login, workspace):
    for n in range(30):
        conversation_create(workspace=workspace, user_id="many", title=f"Chat {n:02}")
    client = login("viewer")
    first = client.get("/conversations/?user=many&sort=user")
    assert len(_titles(first)) == 25
    assert "?user=many&amp;sort=user&amp;page=2" in first.content.decode()
    second = client.get("/conversations/?user=many&sort=user&page=2")
    assert len(_titles(second)) == 5


def test_the_htmx_branch_returns_only_the_results(login, observed_conversation):
    response = login("viewer").get("/conversations/?q=headphones", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="results"')
    assert "<html" not in html and "Broken headphones" in html


def test_the_list_costs_the_same_queries_for_5_or_25_conversations(
    login, workspace, django_assert_max_num_queries
):
    client = login("viewer")
    for n in range(5):
        chat(conversation_create(workspace=workspace, title=f"c{n}"))
    with django_assert_max_num_queries(10) as few:
        client.get("/conversations/")
    for n in range(20):
        chat(conversation_create(workspace=workspace, title=f"d{n}"))
    with django_assert_max_num_queries(len(few.captured_queries)):
        client.get("/conversations/")


def test_empty_states_say_what_to_do(login, workspace):
    client = login("admin")
    empty = client.get("/conversations/").content.decode()
    assert "No conversations in acme yet" in empty and "/settings/api-keys/" in empty
    conversation_create(workspace=workspace, title="One")
    filtered = client.get("/conversations/?q=nothing-like-this").content.decode()
    assert "No conversation matches these filters" in filtered


def test_filters_conversations_whose_pipeline_run_is_retrying(
    login, workspace, observed_conversation
):
    retrying = conversation_create(workspace=workspace, user_id="r", title="Retrying")
    ObserverRun.objects.create(
        conversation=retrying,
        trigger="threshold",
        status="retrying",
        attempts=1,
        error="provider returned 503",
        next_attempt_at=timezone.now(),
    )
    failing = conversation_create(workspace=workspace, user_id="f", title="Failing")
    ObserverRun.objects.create(
        conversation=failing, trigger="manual", status="failed", error="provider down"
    )
    client = login("viewer")

    found = client.get("/conversations/?retrying=on")
    assert _titles(found) == ["Retrying"]
    assert b"run retrying" in found.content
    assert _titles(client.get("/conversations/?failed=on")) == ["Failing"]
    assert sorted(_titles(client.get("/conversations/?failed=on&retrying=on"))) == [
        "Failing",
        "Retrying",
    ]


def test_the_list_counts_active_and_reflected_observations(
    login, reflected_conversation, observed_conversation
):
    html = _page(login("viewer"), "/conversations/")
    reflected_count = Observation.objects.filter(
        conversation=reflected_conversation, status="reflected"
    ).count()
    active_count = Observation.objects.filter(
        conversation=reflected_conversation, status="active"
    ).count()
    assert reflected_count and active_count
    assert f"{reflected_count} reflected" in html
    assert f"{active_count} active" in html


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
