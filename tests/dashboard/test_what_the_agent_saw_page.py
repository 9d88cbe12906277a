"""The "what the agent saw" page (/conversations/<id>/served/): a read of the ledger picked
by row or by time, its body rendered again after later edits and checked against the
digest served, what changed since, masked as every page masks."""

from __future__ import annotations

from datetime import timedelta
from html import unescape

import pytest

from governance.models import ContextRead
from memory.models import Observation
from tests.dashboard.conftest import CARD, EMAIL


def _body(html: str) -> str:
    return unescape(html.split('aria-label="The body served">', 1)[1].split("</pre>", 1)[0])


@pytest.mark.parametrize("role", ["viewer", "admin"])
def test_the_page_rebuilds_a_read_after_later_edits_and_says_what_changed(
    login, api, curator_api, observed_conversation, role
):
    c = observed_conversation.pk
    served = api.get(f"/v1/conversations/{c}/context", {"format": "text"}).content.decode()
    read = ContextRead.objects.get()
    note = Observation.objects.filter(conversation=observed_conversation).first()
    old_text = note.text
    edited = curator_api.patch(
        f"/v1/conversations/{c}/observations/{note.pk}",
        {"text": "User wants a replacement, not a refund.", "reason": "customer called back"},
        format="json",
    )
    assert edited.status_code == 200
    client = login(role)

    html = client.get(f"/conversations/{c}/served/?read={read.pk}").content.decode()

    assert _body(html) == served  # the text as served, the edit notwithstanding
    assert old_text in _body(html) and "replacement, not a refund" not in _body(html)
    assert "digest matches" in html and read.body_sha256 in html
    assert "customer called back" in html and "observation v1 → v2" in html
    assert "by API key " in html and "api_key:" not in html  # who, as people know them
    # The page now serves the new text; what the agent is served now says so.
    now = api.get(f"/v1/conversations/{c}/context", {"format": "text"}).content.decode()
    assert "replacement, not a refund" in now


def test_a_time_picks_the_latest_read_served_then(login, api, observed_conversation):
    c = observed_conversation.pk
    for budget in (40, 80):
        api.get(f"/v1/conversations/{c}/context", {"format": "text", "max_tokens": budget})
    early, late = ContextRead.objects.order_by("served_at")
    ContextRead.objects.filter(pk=early.pk).update(served_at=early.served_at - timedelta(hours=2))
    client = login("viewer")

    between = (early.served_at - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")
    html = client.get(f"/conversations/{c}/served/", {"at": between}).content.decode()
    assert "budget 40 tokens" in html and "digest matches" in html

    before = (early.served_at - timedelta(hours=3)).isoformat()
    response = client.get(f"/conversations/{c}/served/", {"at": before})
    assert response.status_code == 422
    assert "No context of this conversation was served at or before that time." in (
        response.content.decode()
    )
    bad = client.get(f"/conversations/{c}/served/", {"at": "yesterday"})
    assert bad.status_code == 422 and "Give the time as 2026-12-06T14:02 (UTC)" in (
        bad.content.decode()
    )
    listing = client.get(f"/conversations/{c}/served/").content.decode()
    assert listing.count('href="?read=') == 2 and late.body_sha256[:12] in listing


def test_personal_data_in_a_served_body_is_masked_and_still_checked(
    login, api, scanned_conversation
):
    c = scanned_conversation.pk
    api.get(f"/v1/conversations/{c}/context", {"format": "json"})

    read = ContextRead.objects.get()
    html = login("viewer").get(f"/conversations/{c}/served/?read={read.pk}").content.decode()

    assert CARD not in html and EMAIL not in html
    assert "&lt;CREDIT_CARD&gt;" in html and "digest matches" in html
    assert "Personal data is masked here" in html


def test_another_workspaces_read_is_not_found(login, api, observed_conversation, other_api):
    theirs = other_api.post("/v1/conversations", {"userId": "eve"}, format="json").json()["id"]
    other_api.get(f"/v1/conversations/{theirs}/context")
    their_read = ContextRead.objects.get(conversation_id=theirs)
    client = login("admin")

    mine = client.get(f"/conversations/{observed_conversation.pk}/served/?read={their_read.pk}")
    assert mine.status_code == 404
    assert client.get(f"/conversations/{theirs}/served/").status_code == 404
    assert (
        client.get(f"/conversations/{observed_conversation.pk}/served/?read=nope").status_code
        == 404
    )
