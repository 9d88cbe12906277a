"""The support manager's daily look-ups in a real Chromium: what the agent is served,
and memory search across conversations to an end user's page. Each page is checked at
a phone's width too (no horizontal scroll)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory.context import context_for_conversation
from memory.models import Observation
from memory.services import conversation_create
from tests.dashboard.factories import chat, observe, reflect
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


def test_search_finds_memory_and_leads_to_the_item_and_its_end_user(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="tomas@example", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    observation = Observation.objects.filter(conversation=conversation).first()
    word = observation.text.split()[2]
    page = open_page()
    sign_in(page, member("viewer"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Search").click()
    page.get_by_label("Words, a name or an id").fill(word)
    page.get_by_role("button", name="Search").click()
    page.wait_for_selector(".search-hit")
    page.get_by_role("link", name="Observations (").click()
    page.wait_for_selector(f'a.hit-link[href*="#obs-{observation.pk}"]')
    screenshot(page, "d2-search")
    page.set_viewport_size({"width": 390, "height": 844})
    assert _no_horizontal_scroll(page)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.locator(f'a.hit-link[href*="#obs-{observation.pk}"]').click()
    page.wait_for_selector(f"#obs-{observation.pk}.is-selected")
    page.get_by_role("link", name="tomas@example").first.click()
    expect(page.get_by_role("heading", name="End user tomas@example")).to_be_visible()
    assert page.get_by_role("table").get_by_role("link", name="Refund").is_visible()
    screenshot(page, "d3-end-user")


def test_the_keyboard_reaches_every_column_and_selects_memory(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Keys")
    chat(conversation)
    observe(conversation)
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.keyboard.press("2")
    focused = page.evaluate("document.activeElement.className")
    assert "memory-item obs" in focused
    page.keyboard.press("k")
    page.keyboard.press("Enter")
    page.wait_for_selector(".memory-item.obs.is-selected")
    page.wait_for_selector(".msg.is-highlighted")
    page.keyboard.press("1")
    assert "msg" in page.evaluate("document.activeElement.className")
    page.get_by_role("link", name="Reflections", exact=True).click()
    assert page.evaluate("document.activeElement.id") == "reflections-heading"
