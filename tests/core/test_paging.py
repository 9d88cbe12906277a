from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.utils import timezone

from core.errors import MemdeskError
from core.paging import PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX, keyset_page, parse_limit
from memory.models import Conversation
from tests.memory.factories import ConversationFactory, WorkspaceFactory

KEYS = ("updated_at", "id")


@pytest.fixture
def conversations(db) -> list[Conversation]:
    """Seven conversations, five of them updated at the same instant (ties on the first
    key), newest first as the pager returns them."""
    workspace = WorkspaceFactory()
    now = timezone.now()
    stamps = [now, now - timedelta(minutes=1)] + [now - timedelta(minutes=2)] * 5
    for stamp in stamps:
        ConversationFactory(workspace=workspace, updated_at=stamp)
    return list(Conversation.objects.order_by("-updated_at", "-id"))


def _walk(limit: int) -> list[list[Conversation]]:
    pages, cursor = [], None
    while True:
        page = keyset_page(Conversation.objects.all(), keys=KEYS, limit=limit, cursor=cursor)
        pages.append(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return pages


@pytest.mark.parametrize("limit", [1, 2, 3, 6])
def test_cursors_walk_every_row_once_in_order_across_ties(conversations, limit):
    pages = _walk(limit)
    assert [row.pk for page in pages for row in page] == [row.pk for row in conversations]
    assert all(len(page) == limit for page in pages[:-1])


def test_the_last_full_page_has_no_cursor(conversations):
    page = keyset_page(Conversation.objects.all(), keys=KEYS, limit=7, cursor=None)
    assert len(page.items) == 7 and page.next_cursor is None


def test_a_cursor_stays_correct_when_newer_rows_arrive(conversations):
    first = keyset_page(Conversation.objects.all(), keys=KEYS, limit=3, cursor=None)
    ConversationFactory(workspace=conversations[0].workspace)
    rest = keyset_page(Conversation.objects.all(), keys=KEYS, limit=10, cursor=first.next_cursor)
    assert [row.pk for row in first.items + rest.items] == [row.pk for row in conversations]


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b'{"a": 1}').decode(),  # not a list
        base64.urlsafe_b64encode(b'["2026-01-01T00:00:00+00:00"]').decode(),  # one key short
        base64.urlsafe_b64encode(b'["yesterday", "not-a-uuid"]').decode(),
    ],
)
def test_a_malformed_cursor_is_refused_as_invalid_cursor(conversations, cursor):
    with pytest.raises(MemdeskError) as refused:
        keyset_page(Conversation.objects.all(), keys=KEYS, limit=2, cursor=cursor)
    assert refused.value.code == "invalid_cursor"
    assert refused.value.field == "cursor"
    assert refused.value.status_code == 400


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, PAGE_LIMIT_DEFAULT), ("", PAGE_LIMIT_DEFAULT), ("1", 1), (PAGE_LIMIT_MAX, 200)],
)
def test_parse_limit_accepts_1_to_the_maximum(raw, expected):
    assert parse_limit(raw) == expected


@pytest.mark.parametrize("raw", ["0", 0, "-3", PAGE_LIMIT_MAX + 1, "ten", "2.5"])
def test_parse_limit_refuses_values_out_of_bounds(raw):
    with pytest.raises(MemdeskError) as refused:
        parse_limit(raw)
    assert (refused.value.code, refused.value.field) == ("invalid_limit", "limit")
    assert f"from 1 to {PAGE_LIMIT_MAX}" in refused.value.message
