"""The context page in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
what the agent is served, at a phone's width too (no horizontal scroll)."""

from __future__ import annotations

import pytest

from memory.context.read import context_for_conversation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe
from tests.e2e.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def _no_horizontal_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_context_page_shows_what_the_api_serves(open_page, member, workspace, screenshot):
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.get_by_role("button", name="What the agent is served").click()
    page.wait_for_url(f"**/conversations/{conversation.pk}/context/")
    api_text = context_for_conversation(conversation=conversation, fmt="text").body.decode()
    shown = page.locator("section", has=page.get_by_role("heading", name="As text")).locator("pre")
    assert shown.inner_text() == api_text
    assert page.get_by_role("row", name="Observations").is_visible()
    page.get_by_role("spinbutton", name="Token budget").fill("40")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**/context/?max_tokens=40")
    assert "of 40" in page.locator("tfoot").inner_text()
    screenshot(page, "d1-context")
    page.set_viewport_size({"width": 390, "height": 844})
    assert _no_horizontal_scroll(page)
