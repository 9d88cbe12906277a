"""Hostile path segments and query values on every route, from the URL configuration:
Unicode digits that ``str.isdigit()`` accepts and ``int()`` refuses (``²``), impossible
dates and NUL bytes. Each must be answered with a 4xx (or ignored), never a 500."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from core.readiness import worker_heartbeat_record
from memory import unsupported
from memory.models import Conversation
from memory.services.conversations import conversation_create
from tenancy.models import Role
from tests.dashboard.factories import chat, observe

SUPERSCRIPT = "²"
QUERIES = [
    {"cursor": SUPERSCRIPT},
    {"page": SUPERSCRIPT, "at": SUPERSCRIPT, "offset": SUPERSCRIPT, "version": SUPERSCRIPT},
    {"before": SUPERSCRIPT, "after": "¹", "limit": SUPERSCRIPT},
    {"at": "9" * 25, "offset": "9" * 25, "before": "9" * 25, "page": "9" * 25},
    {"since": "2024-02-30T00:00:00", "until": "2024-13-01"},
    {"q": "a\x00b", "user": "\x00", "userId": "\x00", "actor": "\x00", "action": "\x00"},
    {"conversation": "\x00", "end_user": "\x00", "target": "\x00", "type": "\x00"},
]
# A uuid in a path is the probed workspace's conversation, so that the view gets as far
# as reading its query; an int is a row that does not exist.
CONVERSATION_ID = uuid.UUID(int=7)
CONVERTED = {"int": "1", "uuid": str(CONVERSATION_ID)}


def _routes(resolver: URLResolver, prefix: str = "") -> Iterator[str]:
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _routes(entry, route)
        elif isinstance(entry, URLPattern) and entry.name != unsupported.URL_NAME:
            # (The NAMS routes Memdesk does not serve answer 501 to anything:
            # tests/memory/test_nams_routes.py.)
            yield route


def _concrete(route: str) -> str | None:
    if route.startswith(("admin/", "^")) or "(?P" in route:
        return None
    path = route
    while "<" in path:
        start, end = path.index("<"), path.index(">")
        converter = path[start + 1 : end].split(":")[0]
        path = path[:start] + CONVERTED.get(converter, SUPERSCRIPT) + path[end + 1 :]
    return "/" + path


ROUTES = sorted({p for r in _routes(get_resolver()) if (p := _concrete(r)) is not None})
API_ROUTES = [r for r in ROUTES if r.startswith("/v1/")]
PAGE_ROUTES = [r for r in ROUTES if not r.startswith("/v1/")]


@pytest.fixture
def probed(workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Probe")
    Conversation.objects.filter(pk=conversation.pk).update(id=CONVERSATION_ID)
    conversation.pk = CONVERSATION_ID
    chat(conversation)
    observe(conversation)
    worker_heartbeat_record(hostname="celery@probe")  # /readyz answers 200, not 503
    return workspace


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(q))
@pytest.mark.parametrize("route", PAGE_ROUTES)
def test_no_dashboard_page_answers_500_to_hostile_input(member, probed, route, query):
    client = Client()
    client.force_login(member(Role.ADMIN))
    for response in (
        client.get(route, query),
        client.post(route, {**query, "finding": SUPERSCRIPT, "reason": "probe"}),
    ):
        assert response.status_code < 500, (route, query, response.status_code)


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: ",".join(q))
@pytest.mark.parametrize("route", API_ROUTES)
def test_no_api_route_answers_500_to_hostile_input(make_client, probed, route, query):
    client = make_client(probed, scope="admin")
    for response in (
        client.get(route, query),
        client.post(route + "?" + "&".join(f"{k}={v}" for k, v in query.items()), {}),
    ):
        assert response.status_code < 500, (route, query, response.status_code)


def test_a_nul_in_a_query_parameter_is_a_400_naming_the_parameter(api):
    response = api.get("/v1/conversations", {"userId": "dana\x00@example.com"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_query"
    assert body["field"] == "userId"
    assert "dana" not in response.content.decode()


def test_an_impossible_date_in_the_audit_filter_is_a_400(make_client, workspace):
    client = make_client(workspace, scope="compliance")
    response = client.get("/v1/audit/events", {"since": "2024-02-30T00:00:00"})
    assert response.status_code == 400
