"""The API keys page in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
an admin creates a key and sees it once."""

from __future__ import annotations

from tests.e2e.browser import sign_in


def test_an_admin_creates_a_key_and_sees_it_once(open_page, member, screenshot):
    page = open_page()
    sign_in(page, member("admin"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("support bot")
    page.get_by_role("button", name="Create key").click()
    raw_key = page.locator("#raw-key").input_value()
    assert raw_key.startswith("md_")
    screenshot(page, "10-api-key-created")
    page.reload()
    assert raw_key not in page.content()
