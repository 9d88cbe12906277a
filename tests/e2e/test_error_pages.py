"""The pages a person meets when something is missing or broken, in a real Chromium:
the product's own, styled, with a way back; and JSON for the API at the same moment."""

from __future__ import annotations

from tests.e2e.browser import sign_in


def test_missing_and_broken_pages_are_the_products_own(open_page, member, settings, screenshot):
    settings.ROOT_URLCONF = "tests.dashboard.failing_urls"
    page = open_page()
    sign_in(page, member("viewer"))

    response = page.goto("/conversations/00000000-0000-0000-0000-000000000000/")
    assert response.status == 404
    assert page.get_by_role("heading", name="Not found").is_visible()
    # Styled by the product's own stylesheet (served with debug off), not a bare page.
    assert page.evaluate("getComputedStyle(document.body).fontFamily") != "Times New Roman"
    screenshot(page, "40-not-found")
    page.get_by_role("link", name="Back to conversations").click()
    page.wait_for_url("**/conversations/")

    response = page.goto("/broken/")
    assert response.status == 500
    assert page.get_by_role("heading", name="Something went wrong on our side").is_visible()
    assert "RuntimeError" not in page.content()
    screenshot(page, "41-server-error")

    for path, status in (("/v1/no/such/route", 404), ("/v1/broken", 500)):
        api = page.request.get(path)
        assert api.status == status
        assert api.headers["content-type"] == "application/json"
        assert api.json()["message"]
