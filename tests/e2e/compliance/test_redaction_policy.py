"""The redaction policy editor in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): the draft's preview, every error at once, the re-scan offered after saving,
the preview updated as you type."""

from __future__ import annotations

from governance.models import AuditEvent, RescanRun
from tests.e2e.browser import sign_in
from tests.governance.builders import set_policy

EMAIL = "dana.whitfield@example.com"


def test_the_policy_editor_previews_the_draft_shows_every_error_and_offers_a_rescan(
    open_page, member, workspace, screenshot
):
    set_policy(workspace, entities=["EMAIL_ADDRESS"])
    page = open_page()
    sign_in(page, member("compliance"))
    page.goto("/compliance/redaction/")
    page.get_by_label("Deny list").fill("Project Falcon")
    text = page.get_by_label("Try a text")
    text.fill(f"Mail {EMAIL} re Project Falcon")
    text.press("End")  # the preview follows keystrokes
    page.wait_for_selector("#preview-draft >> text=DENY_LIST")
    assert "DENY_LIST" not in page.locator("#preview-saved").inner_text()
    assert "Project Falcon" not in page.locator("#draft-text").inner_text()
    screenshot(page, "d2-policy-draft-preview")

    page.get_by_label("Score threshold").fill("3")
    page.get_by_role("button", name="Save policy").click()
    summary = page.locator("#form-error-summary")
    summary.wait_for()
    assert "Score threshold" in summary.inner_text() and "Reason" in summary.inner_text()

    page.get_by_label("Score threshold").fill("0.5")
    page.locator("#id_reason").fill("Codename of a client project")
    page.get_by_role("button", name="Save policy").click()
    page.wait_for_selector("#rescan-offer")
    assert AuditEvent.objects.get(action="redaction_policy.update").reason == (
        "Codename of a client project"
    )
    page.get_by_role("button", name="Re-scan stored data").click()
    page.wait_for_selector("#rescan-status >> text=queued")
    assert RescanRun.objects.get().status == "pending"
    screenshot(page, "d3-policy-saved-rescan")


def test_the_redaction_preview_updates_as_you_type(open_page, member, workspace, screenshot):
    set_policy(workspace, deny_list=["Project Falcon"])
    page = open_page()
    sign_in(page, member("admin"))
    page.goto("/compliance/redaction/")
    page.get_by_label("Try a text").press_sequentially(
        f"Mail {EMAIL} about Project Falcon", delay=5
    )
    page.wait_for_selector("#preview-result >> text=EMAIL_ADDRESS")
    preview = page.locator("#preview-text").inner_text()
    assert EMAIL not in preview and "Project Falcon" not in preview
    assert "DENY_LIST" in page.locator("#preview-result").inner_text()
    screenshot(page, "m6-redaction-preview")
