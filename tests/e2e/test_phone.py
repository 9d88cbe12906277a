"""Every page on a phone (390 px wide, as an iPhone 14), in a real Chromium: nothing
scrolls sideways, the header folds into a menu, and the wide tables scroll inside their
own box instead of pushing the page."""

from __future__ import annotations

import pytest

from governance.models import RedactionFinding
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def phone(browser, live_server):
    context = browser.new_context(viewport=PHONE, base_url=live_server.url, is_mobile=True)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()


def _sideways(page) -> int:
    """How many pixels the page is wider than the screen (0 when nothing scrolls)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_no_page_scrolls_sideways_on_a_phone(phone, member, workspace, screenshot):
    conversation = conversation_create(
        workspace=workspace,
        user_id="dana.pierce@example.com",
        title="Refund for the broken Aero 2 headphones, order ORD-123456, " * 2,
    )
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    sign_in(phone, member("admin"))
    pages = [
        "/conversations/",
        f"/conversations/{conversation.pk}/",
        f"/conversations/{conversation.pk}/context/",
        f"/conversations/{conversation.pk}/transcript",
        "/search/?q=refund",
        f"/users/{conversation.user_id}/",
        "/metrics/",
        "/escalations/",
        "/settings/api-keys/",
        "/settings/members/",
        "/settings/memory/",
        "/compliance/audit/",
        "/compliance/review/",
        "/compliance/redaction/",
        "/compliance/pseudonyms/",
        "/compliance/redaction/rescan/",
        "/compliance/holds/",
        "/compliance/retention/",
        "/compliance/erasure/",
        "/no/such/page/",
    ]
    wide = {}
    for path in pages:
        phone.goto(path)
        overflow = _sideways(phone)
        if overflow > 0:
            wide[path] = overflow
    assert not wide, f"pages wider than a 390 px phone (px too wide): {wide}"
    phone.goto(f"/conversations/{conversation.pk}/")
    screenshot(phone, "60-phone-conversation")


def test_the_header_folds_into_a_menu_on_a_phone(phone, member, screenshot):
    sign_in(phone, member("admin"))
    nav = phone.get_by_role("navigation", name="Main")
    conversations = nav.get_by_role("link", name="Conversations")
    assert not conversations.is_visible()  # folded away
    phone.get_by_role("button", name="Menu").click()
    assert conversations.is_visible()
    screenshot(phone, "61-phone-menu-open")
    nav.get_by_role("link", name="Metrics").click()
    phone.wait_for_url("**/metrics/")


def test_the_review_and_audit_tables_stay_usable_on_a_phone(phone, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Call")
    chat(conversation)
    observe(conversation)  # an audit event to list
    sign_in(phone, member("compliance"))
    phone.goto("/compliance/audit/")
    # The table scrolls inside its own box, which fits the screen.
    box = phone.locator(".table-scroll").first.bounding_box()
    assert box is not None and box["width"] <= PHONE["width"]
    assert _sideways(phone) <= 0
    first_cell = phone.locator(".table-scroll tbody tr td").first
    assert first_cell.is_visible()
    screenshot(phone, "62-phone-audit")
    phone.goto("/compliance/review/")
    assert _sideways(phone) <= 0
    if RedactionFinding.objects.filter(status="pending_review").exists():
        assert phone.get_by_role("button", name="Approve").first.is_visible()


def test_on_a_laptop_the_header_shows_its_links_in_one_row(open_page, member):
    page = open_page()
    sign_in(page, member("admin"))
    assert not page.get_by_role("button", name="Menu").is_visible()
    nav = page.get_by_role("navigation", name="Main")
    brand = nav.get_by_role("link", name="Memdesk").bounding_box()
    conversations = nav.get_by_role("link", name="Conversations").bounding_box()
    assert brand and conversations
    assert abs(brand["y"] - conversations["y"]) < 10  # one row


def test_the_compliance_pages_fit_a_phone(open_page, member, workspace):
    page = open_page()
    sign_in(page, member("compliance"))
    page.set_viewport_size({"width": 390, "height": 844})
    for url in (
        "/compliance/audit/",
        "/compliance/review/",
        "/compliance/redaction/",
        "/compliance/retention/",
        "/compliance/retention/policies/new/",
        "/compliance/holds/",
        "/compliance/erasure/",
    ):
        page.goto(url)
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{url} scrolls sideways by {overflow}px at 390px"
