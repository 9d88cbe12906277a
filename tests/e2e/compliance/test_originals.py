"""Restricted originals in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): only the compliance officer reveals one, and the reveal lands in the audit
log. Pages are saved as screenshots."""

from __future__ import annotations

from governance.models import AuditEvent
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.e2e.browser import sign_in
from tests.governance.builders import set_policy

EMAIL = "dana.whitfield@example.com"


def test_only_the_compliance_officer_reveals_an_original_and_it_is_audited(
    open_page, member, workspace, screenshot
):
    set_policy(workspace, redact_at_ingest=True, keep_originals=True)
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Email")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content=f"My email is {EMAIL}")],
    )
    message = Message.objects.get(conversation=conversation)
    url = f"/compliance/originals/message/{message.pk}/"

    reviewer = open_page()
    sign_in(reviewer, member("reviewer"))
    nav = reviewer.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Compliance").count() == 0
    response = reviewer.goto(url)
    assert response.status == 403
    text = reviewer.locator("main").inner_text()
    assert "you need the compliance officer role" in text and EMAIL not in text
    screenshot(reviewer, "c1-reveal-forbidden-reviewer")

    officer = open_page()
    sign_in(officer, member("compliance"))
    officer.get_by_role("navigation", name="Main").get_by_role("link", name="Compliance").click()
    officer.wait_for_url("**/compliance/audit/")
    officer.locator(f'a.reveal-link[href="{url}"]').first.click()
    officer.wait_for_url(f"**{url}")
    assert EMAIL not in officer.locator("main").inner_text()
    officer.get_by_label("Reason for reading it").fill("DSAR-4")
    officer.get_by_role("button", name="Reveal original").click()
    officer.wait_for_selector(f"#original >> text=My email is {EMAIL}")
    screenshot(officer, "c2-reveal-original")
    assert AuditEvent.objects.filter(action="restricted_original.read").count() == 1

    officer.goto("/compliance/audit/?action=restricted_original.read")
    row = officer.locator("#events tbody tr")
    assert row.count() == 1
    assert "restricted_original.read" in row.inner_text()
    assert "compliance" in row.inner_text()
    assert officer.locator("#chain-status").inner_text().startswith("Chain verified")
    screenshot(officer, "c3-audit-log")
