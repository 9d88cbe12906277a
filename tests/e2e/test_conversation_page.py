"""The conversation page in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): selecting memory highlights its sources, the keyboard reaches every column,
and links work without JavaScript."""

from __future__ import annotations

import pytest

from memory.models import Observation, Reflection
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)


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


def test_selecting_memory_highlights_its_sources_even_when_not_loaded(
    open_page, member, long_conversation, screenshot
):
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{long_conversation.pk}/")
    assert page.locator("#m-130").is_visible()  # the newest messages, scrolled into view
    assert page.locator("#m-80").count() == 0  # older ones not loaded yet

    # Sources inside the window: marked in place.
    newest = Observation.objects.get(conversation=long_conversation, window_start_seq=125)
    page.locator(f"#obs-{newest.pk} .item-text").click()
    page.wait_for_selector("#m-125.is-highlighted")
    assert page.locator(".msg.is-highlighted").count() == 1
    assert "1 source message highlighted." in page.locator("#selection-status").inner_text()

    # Older observations load on demand (the first screen shows the newest 8, then 50 at
    # a time); their sources are outside the message window, so they are fetched, then
    # marked and scrolled to.
    page.get_by_role("link", name="Load older observations").click()
    loaded = Observation.objects.get(conversation=long_conversation, window_start_seq=73)
    page.wait_for_selector(f"#obs-{loaded.pk}")
    page.get_by_role("link", name="Load older observations").click()
    older = Observation.objects.get(conversation=long_conversation, window_start_seq=40)
    page.wait_for_selector(f"#obs-{older.pk}")
    page.locator(f"#obs-{older.pk} .sources-link").click()
    page.wait_for_selector("#m-40.is-highlighted")
    assert page.locator("#m-40").is_visible()
    assert page.locator(f"#obs-{older.pk}.is-selected").count() == 1
    screenshot(page, "03-observation-selected")

    # A reflection over observations not loaded: they are fetched and marked.
    reflection = Reflection.objects.get(conversation=long_conversation)
    page.locator(f"#refl-{reflection.pk} .item-text").click()
    page.wait_for_selector("#observation-list .is-highlighted")
    assert page.locator("#observation-list .memory-item.is-highlighted").count() == 10
    assert page.get_by_text("behind the selected reflection").is_visible()
    screenshot(page, "04-reflection-selected")

    # Loading older messages keeps working after the jump.
    page.get_by_role("link", name="Load older messages").click()
    page.wait_for_selector("#m-1")


def test_a_reflection_highlights_loaded_observations_in_place(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, user_id="t", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    reflection = Reflection.objects.filter(conversation=conversation).first()
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.locator(f"#refl-{reflection.pk} .item-text").click()
    for observation_id in reflection.source_observation_ids:
        page.wait_for_selector(f"#obs-{observation_id}.is-highlighted")
    assert page.get_by_text("behind the selected reflection").count() == 0  # no fetch needed


def test_links_work_without_javascript(open_page, member, long_conversation):
    page = open_page(javascript=False)
    sign_in(page, member("viewer"))
    page.goto(f"/conversations/{long_conversation.pk}/")
    page.get_by_role("link", name="Load older messages").click()
    page.wait_for_url("**?at=31*")
    assert page.locator("#m-31").count() == 1 and page.locator("#m-130").count() == 0
    page.goto(f"/conversations/{long_conversation.pk}/")
    page.get_by_role("link", name="Load older observations").click()
    page.wait_for_url("**?offset=8*")
    page.get_by_role("link", name="Load older observations").click()
    page.wait_for_url("**?offset=58*")
    older = Observation.objects.get(conversation=long_conversation, window_start_seq=40)
    page.locator(f"#obs-{older.pk} .sources-link").click()
    page.wait_for_selector("#m-40.is-highlighted")
    assert page.locator(f"#obs-{older.pk}.is-selected").count() == 1
