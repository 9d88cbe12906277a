"""Search in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): memory
search across conversations leads to the item and to its end user's page, at a phone's
width too."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from memory.models import Observation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def _no_horizontal_scroll(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


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
