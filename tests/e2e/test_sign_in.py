"""Signing in in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): each
role sees what it may do. Each page is saved as a screenshot (the folder is printed at
the end)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe
from tests.e2e.browser import sign_in


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance", "admin"])
def test_each_role_signs_in_and_sees_what_it_may_do(open_page, member, role, screenshot, workspace):
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    page = open_page()
    if role == "viewer":
        page.goto("/accounts/login/")
        screenshot(page, "01-sign-in")
    sign_in(page, member(role))
    assert page.locator(".role-badge").inner_text() == {"compliance": "compliance officer"}.get(
        role, role
    )
    nav = page.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="API keys").count() == (1 if role == "admin" else 0)
    screenshot(page, f"02-conversations-{role}")
    page.get_by_role("link", name="Broken headphones").click()
    for heading in ("Messages", "Observations", "Reflections"):
        # expect() waits for the navigation the click started; is_visible() would not.
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    can_edit = role != "viewer"
    assert (page.get_by_role("button", name="Observe now").count() == 1) is can_edit
    if role == "viewer":
        page.goto("/settings/api-keys/")
        assert "you need the admin role" in page.locator("main").inner_text()
        screenshot(page, "09-forbidden-viewer")
