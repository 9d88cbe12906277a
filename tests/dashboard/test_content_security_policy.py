"""Every page is served with the Content-Security-Policy (config/settings/base.py): scripts
and styles from static/ only, no inline script or style, no eval. And no page, nor any
fragment htmx swaps into one, carries what that policy would make the browser refuse (an
inline script, a style attribute or element, an on* handler), so nothing a page needs
is blocked. The browser's own word on it: tests/e2e/test_content_security_policy.py.

The pages come from the URL configuration, so a new page is covered without a line
here; the transcript keeps its own, stricter policy."""

from __future__ import annotations

import re

import pytest
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from tests.dashboard.factories import UserFactory
from tests.routes import allowed_methods
from tests.world import World

TRANSCRIPT = "conversations/<uuid:conversation_id>/transcript"
# Served as JSON or as a file, not as a page.
NOT_PAGES = {"healthz", "readyz", "compliance/audit/export.jsonl"}
INLINE = {
    # (A json_script data block is not run, so the policy leaves it alone.)
    "an inline script": re.compile(
        r"<script(?![^>]*\b(?:src=|type=\"application/json\"))[^>]*>", re.I
    ),
    "a style element": re.compile(r"<style[\s>]", re.I),
    "a style attribute": re.compile(r"<[^>]+\sstyle\s*=", re.I),
    "an on* handler": re.compile(r"<[^>]+\son[a-z]+\s*=", re.I),
    "an htmx event filter (eval)": re.compile(r"hx-trigger=\"[^\"]*\[", re.I),
    "an hx-on handler (eval)": re.compile(r"\shx-on", re.I),
}


def _directives(header: str) -> dict[str, list[str]]:
    parts = (part.split() for part in header.split(";") if part.strip())
    return {name: values for name, *values in parts}


def assert_strict_policy(response) -> None:
    directives = _directives(response["Content-Security-Policy"])
    assert directives["default-src"] == ["'self'"]
    assert directives["script-src"] == ["'self'"]
    assert directives["style-src"] == ["'self'"]
    assert directives["object-src"] == ["'none'"]
    assert directives["frame-ancestors"] == ["'none'"]
    everything = " ".join(value for values in directives.values() for value in values)
    assert "unsafe" not in everything


def assert_nothing_inline(url: str, response) -> None:
    html = response.content.decode()
    for what, pattern in INLINE.items():
        found = pattern.search(html)
        assert found is None, f"{url} has {what}: {found and found.group(0)[:120]}"


def _page_routes(patterns, prefix: str = ""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            if entry.namespace != "admin":
                yield from _page_routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            route = prefix + str(entry.pattern)
            if (
                not route.startswith(("v1/", "mcp"))
                and route not in NOT_PAGES
                and "GET" in allowed_methods(entry.callback)
            ):
                yield route


def _url(route: str, world: World) -> str:
    notes = "reflections" if "/reflections/" in route else "observations"
    values = {
        "conversation_id": world.c,
        "item_id": str((world.reflection if notes == "reflections" else world.observation).pk),
        "message_id": str(world.message.pk),
        "pin_id": str(world.pin.pk),
        "kind": "observer",
        "run_id": str(world.queued_run.pk),
        "end_user_id": "dana",
        "policy_id": str(world.retention_policy.pk),
        "target_type": "message",
        "target_id": str(world.redacted_message.pk),
    }

    def value(match: re.Match[str]) -> str:
        return values.get(match.group(2), "1")

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", value, route)


@pytest.fixture
def world(workspace, eager_tasks) -> World:
    return World(workspace, eager_tasks)


def test_every_page_and_fragment_has_the_policy_and_nothing_it_would_block(world):
    pages = 0
    for route in sorted(set(_page_routes(get_resolver().url_patterns))):
        url = _url(route, world)
        for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
            response = world.admin.get(url, **headers)
            if not response["Content-Type"].startswith("text/html"):
                continue
            if route == TRANSCRIPT:
                assert response["Content-Security-Policy"].startswith("default-src 'none'")
                continue
            assert_strict_policy(response)
            assert_nothing_inline(url, response)
            pages += response.status_code == 200 and not headers
    assert pages >= 35  # the walk reached the pages, not only their 404s


@pytest.mark.parametrize(
    "url", ["/", "/accounts/login/", "/accounts/password_reset/", "/no/such/page/"]
)
def test_pages_for_visitors_have_the_policy(db, url):
    response = Client().get(url)
    assert response["Content-Type"].startswith("text/html")
    assert_strict_policy(response)
    assert_nothing_inline(url, response)


def test_the_forbidden_page_has_the_policy(login):
    response = login("viewer").get("/settings/api-keys/")
    assert response.status_code == 403
    assert_strict_policy(response)


@override_settings(ROOT_URLCONF="tests.dashboard.failing_urls")
def test_the_server_error_page_has_the_policy(db):
    response = Client(raise_request_exception=False).get("/broken/")
    assert response.status_code == 500
    assert_strict_policy(response)
    assert_nothing_inline("/broken/", response)


@pytest.mark.parametrize(
    "url",
    [
        "/admin/",
        "/admin/tenancy/workspace/",
        "/admin/auth/user/",
        "/admin/axes/accessattempt/",
        "/admin/login/",
    ],
)
def test_admin_pages_have_the_policy(db, workspace, url):
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    response = client.get(url)
    assert response.status_code in (200, 302)
    assert_strict_policy(response)
    if response.status_code == 200:
        assert_nothing_inline(url, response)
