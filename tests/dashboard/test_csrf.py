"""Every dashboard POST needs the CSRF token, and the routes are found, not listed.

The routes come from the URL configuration: every view outside the API (``v1/``, whose
keys are not cookies, and ``mcp``) and the admin that accepts POST. A POST without the
token is refused (403, Django's CSRF page) and changes nothing; the same POST with the
token gets past the check. A new POST route fails ``test_every_dashboard_post_is_known``
until ``POSTS`` says who sends it, where and with what."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.core import mail
from django.test import Client
from django.urls import get_resolver

from tests.dashboard.factories import MembershipFactory
from tests.routes import allowed_methods, url_patterns
from tests.world import World

REASON = "csrf probe"
PAGE = "conversations/<uuid:conversation_id>/"
# Any 32 letters or digits make a valid secret; the cookie and the header must agree.
TOKEN = "csrfprobe" * 3 + "abcde"
# What a refused POST must leave as it was: every row the project stores, sessions too (a
# refused sign-out keeps its session).
STORED_APPS = {"auth", "sessions", "tenancy", "memory", "governance", "dashboard"}


def _no_data(world: World) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Post:
    """Who sends the POST (a role in the world's workspace, or nobody signed in), to
    which address and with which form data (what a valid submit would carry)."""

    role: str | None
    url: Callable[[World], str]
    data: Callable[[World], dict[str, Any]] = field(default=_no_data)


def _note_edit(world: World) -> dict[str, Any]:
    return {"text": "User prefers SMS.", "priority": "high", "reason": REASON}


POSTS: dict[str, Post] = {
    # Signing in and out, and a person's own password (django.contrib.auth's views).
    "accounts/login/": Post(
        None, lambda w: "/accounts/login/", lambda w: {"username": "dana", "password": "x"}
    ),
    "accounts/logout/": Post("viewer", lambda w: "/accounts/logout/"),
    "accounts/password_change/": Post(
        "viewer",
        lambda w: "/accounts/password_change/",
        lambda w: {"old_password": "x", "new_password1": "y", "new_password2": "y"},
    ),
    "accounts/password_reset/": Post(
        None, lambda w: "/accounts/password_reset/", lambda w: {"email": "dana@example.com"}
    ),
    "accounts/reset/<uidb64>/<token>/": Post(
        None,
        lambda w: "/accounts/reset/MQ/set-password/",
        lambda w: {"new_password1": "y", "new_password2": "y"},
    ),
    "workspace/": Post("viewer", lambda w: "/workspace/", lambda w: {"workspace": w.workspace.pk}),
    # A conversation's page.
    f"{PAGE}messages/<uuid:message_id>/reveal/": Post(
        "admin",
        lambda w: (
            f"/conversations/{w.scanned_message.conversation_id}/messages/"
            f"{w.scanned_message.pk}/reveal/"
        ),
        lambda w: {"reason": REASON},
    ),
    f"{PAGE}observations/add/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/observations/add/",
        lambda w: {"text": "User prefers email.", "priority": "medium", "reason": REASON},
    ),
    f"{PAGE}observations/<uuid:item_id>/edit/": Post(
        "admin", lambda w: f"/conversations/{w.c}/observations/{w.observation.pk}/edit/", _note_edit
    ),
    f"{PAGE}observations/<uuid:item_id>/delete/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/observations/{w.observation.pk}/delete/",
        lambda w: {"reason": REASON},
    ),
    f"{PAGE}observations/<uuid:item_id>/revert/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/observations/{w.edited(w.observation).pk}/revert/",
        lambda w: {"version": 1, "reason": REASON},
    ),
    f"{PAGE}reflections/<uuid:item_id>/edit/": Post(
        "admin", lambda w: f"/conversations/{w.c}/reflections/{w.reflection.pk}/edit/", _note_edit
    ),
    f"{PAGE}reflections/<uuid:item_id>/delete/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/reflections/{w.reflection.pk}/delete/",
        lambda w: {"reason": REASON},
    ),
    f"{PAGE}reflections/<uuid:item_id>/revert/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/reflections/{w.edited(w.reflection).pk}/revert/",
        lambda w: {"version": 1, "reason": REASON},
    ),
    f"{PAGE}messages/<uuid:message_id>/pin/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/messages/{w.message.pk}/pin/",
        lambda w: {"reason": REASON},
    ),
    f"{PAGE}pins/<uuid:pin_id>/unpin/": Post(
        "admin",
        lambda w: f"/conversations/{w.c}/pins/{w.pin.pk}/unpin/",
        lambda w: {"reason": REASON},
    ),
    f"{PAGE}observe/": Post("reviewer", lambda w: f"/conversations/{w.c}/observe/"),
    f"{PAGE}reflect/": Post("reviewer", lambda w: f"/conversations/{w.c}/reflect/"),
    f"{PAGE}runs/<str:kind>/<uuid:run_id>/cancel/": Post(
        "reviewer",
        lambda w: f"/conversations/{w.c}/runs/observer/{w.queued_run.pk}/cancel/",
        lambda w: {"reason": REASON},
    ),
    "approvals/<str:kind>/<uuid:note_id>/approve/": Post(
        "reviewer",
        lambda w: f"/approvals/reflection/{w.waiting_reflection.pk}/approve/",
        lambda w: {"text": "Waits for a person.", "reason": REASON},
    ),
    "approvals/<str:kind>/<uuid:note_id>/reject/": Post(
        "reviewer",
        lambda w: f"/approvals/observation/{w.waiting_observation.pk}/reject/",
        lambda w: {"reason": REASON},
    ),
    "escalations/<uuid:escalation_id>/resolve/": Post(
        "reviewer",
        lambda w: f"/escalations/{w.escalation.pk}/resolve/",
        lambda w: {"note": "Called the customer"},
    ),
    # Settings.
    "settings/api-keys/": Post(
        "admin", lambda w: "/settings/api-keys/", lambda w: {"name": "ci", "scope": "agent"}
    ),
    "settings/api-keys/<int:api_key_id>/revoke/": Post(
        "admin", lambda w: f"/settings/api-keys/{w.dashboard_key.pk}/revoke/"
    ),
    "settings/memory/": Post(
        "admin",
        lambda w: "/settings/memory/",
        lambda w: {"fidelity": "compact", "reason": REASON},
    ),
    "settings/members/": Post(
        "admin",
        lambda w: "/settings/members/",
        lambda w: {"username": "new-person", "role": "viewer", "reason": REASON},
    ),
    "settings/members/<int:membership_id>/role/": Post(
        "admin",
        lambda w: f"/settings/members/{w.viewer_membership.pk}/role/",
        lambda w: {
            f"m{w.viewer_membership.pk}-role": "reviewer",
            f"m{w.viewer_membership.pk}-reason": REASON,
        },
    ),
    "settings/members/<int:membership_id>/remove/": Post(
        "admin",
        lambda w: f"/settings/members/{w.viewer_membership.pk}/remove/",
        lambda w: {f"r{w.viewer_membership.pk}-reason": REASON},
    ),
    # Compliance.
    "compliance/review/bulk/": Post(
        "compliance",
        lambda w: "/compliance/review/bulk/",
        lambda w: {"decision": "approve", "finding": w.pending_finding.pk, "reason": REASON},
    ),
    "compliance/review/<int:finding_id>/<str:decision>/": Post(
        "compliance",
        lambda w: f"/compliance/review/{w.pending_finding.pk}/dismiss/",
        lambda w: {"reason": REASON},
    ),
    "compliance/holds/place/": Post(
        "compliance",
        lambda w: "/compliance/holds/place/",
        lambda w: {"end_user": "dana", "reason": REASON},
    ),
    "compliance/holds/<int:hold_id>/release/": Post(
        "compliance",
        lambda w: f"/compliance/holds/{w.hold.pk}/release/",
        lambda w: {"reason": REASON},
    ),
    "compliance/originals/<str:target_type>/<uuid:target_id>/": Post(
        "compliance", lambda w: f"/compliance/originals/message/{w.redacted_message.pk}/"
    ),
    "compliance/pseudonyms/reveal/": Post(
        "compliance",
        lambda w: "/compliance/pseudonyms/reveal/",
        lambda w: (
            w.redacted_message,  # a pseudonym to reveal
            {"label": "<EMAIL_ADDRESS_1>", "reason": REASON},
        )[1],
    ),
    "compliance/retention/policies/new/": Post(
        "compliance",
        lambda w: "/compliance/retention/policies/new/",
        lambda w: {
            "name": "support",
            "conversation_tag": "support",
            "message_days": "30",
            "enabled": "on",
            "reason": REASON,
        },
    ),
    "compliance/retention/policies/<int:policy_id>/": Post(
        "compliance",
        lambda w: f"/compliance/retention/policies/{w.retention_policy.pk}/",
        lambda w: {"name": "default", "message_days": "45", "enabled": "on", "reason": REASON},
    ),
    "compliance/retention/dry-run/": Post("compliance", lambda w: "/compliance/retention/dry-run/"),
    "compliance/retention/run/": Post("compliance", lambda w: "/compliance/retention/run/"),
    "compliance/erasure/request/": Post(
        "compliance",
        lambda w: "/compliance/erasure/request/",
        lambda w: {"end_user": "dana", "reason": REASON},
    ),
    "compliance/redaction/save/": Post(
        "compliance",
        lambda w: "/compliance/redaction/save/",
        lambda w: {"score_threshold": "0.61", "reason": REASON},
    ),
    "compliance/redaction/rescan/start/": Post(
        "compliance",
        lambda w: "/compliance/redaction/rescan/start/",
        lambda w: {"tiers": ["messages"], "reason": REASON},
    ),
    "compliance/redaction/preview/": Post(
        "compliance",
        lambda w: "/compliance/redaction/preview/",
        lambda w: {"text": "Mail dana.pierce@example.com"},
    ),
}


def dashboard_posts() -> set[str]:
    """Every route outside the API and the admin whose view accepts POST."""
    return {
        route
        for route, view in url_patterns(get_resolver().url_patterns)
        if not route.startswith(("v1/", "mcp")) and "POST" in allowed_methods(view)
    }


def test_every_dashboard_post_is_known():
    routes = dashboard_posts()
    assert not routes - POSTS.keys(), (
        "POST routes the CSRF walk cannot exercise: add them to POSTS",
        sorted(routes - POSTS.keys()),
    )
    assert not POSTS.keys() - routes, ("POSTS names routes that are gone", POSTS.keys() - routes)


def _stored() -> dict[str, list[tuple[Any, ...]]]:
    rows = {
        model._meta.label: list(model._default_manager.order_by("pk").values_list())
        for model in apps.get_models()
        if model._meta.app_label in STORED_APPS
    }
    return {**rows, "mail": [(m.subject, tuple(m.to)) for m in mail.outbox]}


def _client(world: World, role: str | None) -> Client:
    client = Client(enforce_csrf_checks=True)
    if role is not None:
        client.force_login(MembershipFactory(workspace=world.workspace, role=role).user)
    return client


@pytest.mark.parametrize("route", sorted(POSTS))
def test_a_post_without_the_csrf_token_is_refused_and_changes_nothing(
    workspace, eager_tasks, route
):
    world = World(workspace, eager_tasks)
    post = POSTS[route]
    url, data = post.url(world), post.data(world)
    client = _client(world, post.role)
    before = _stored()

    refused = client.post(url, data)

    assert refused.status_code == 403
    assert b"CSRF token was missing" in refused.content  # templates/403_csrf.html
    assert _stored() == before

    client.cookies[settings.CSRF_COOKIE_NAME] = TOKEN
    accepted = client.post(url, data, HTTP_X_CSRFTOKEN=TOKEN)

    assert accepted.status_code != 403, accepted.content.decode()[:500]
