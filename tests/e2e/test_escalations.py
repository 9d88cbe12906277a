"""The escalations page in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): a reviewer resolves one from the list."""

from __future__ import annotations

from playwright.sync_api import expect

from core.actors import SYSTEM_ACTOR
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from tests.e2e.browser import sign_in


def test_a_reviewer_resolves_an_escalation_from_the_list(open_page, member, workspace):
    conversation = conversation_create(workspace=workspace, title="Refund call")
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Asks for a manager")
    page = open_page()
    sign_in(page, member("reviewer"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Escalations").click()
    expect(page.get_by_text("Asks for a manager")).to_be_visible()
    page.get_by_label("What was done").fill("Called back, refund approved")
    page.get_by_role("button", name="Resolve").click()
    page.wait_for_selector("text=Escalation resolved.")
    assert page.get_by_text("No open escalations.").is_visible()
    page.get_by_role("link", name="Resolved").click()
    page.get_by_role("link", name="Refund call").click()
    assert "Called back, refund approved" in page.locator("#escalations").inner_text()
