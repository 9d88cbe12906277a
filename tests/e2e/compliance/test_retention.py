"""Retention in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): a dry
run counts, then run now shows its progress and the receipt."""

from __future__ import annotations

from core.actors import SYSTEM_ACTOR
from governance.models import RetentionSweep
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Message
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat
from tests.e2e.browser import sign_in


def test_a_dry_run_counts_then_run_now_shows_progress_and_the_receipt(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Old chat")
    chat(conversation)
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="short", message_days=1, reason="test"
    )
    page = open_page()
    page.on("dialog", lambda dialog: dialog.accept())  # the hx-confirm of "Run now"
    sign_in(page, member("compliance"))
    page.goto("/compliance/retention/")

    page.get_by_role("button", name="Dry run: count what would be deleted").click()
    page.wait_for_selector("#sweep-result >> text=nothing was deleted")
    assert page.locator("#count-messages").inner_text() == "6"
    assert Message.objects.filter(conversation=conversation).count() == 6
    screenshot(page, "m1-retention-dry-run")

    page.get_by_role("button", name="Run now").click()
    page.wait_for_selector("#sweep-status.sweep-pending >> text=0 / 0 rows deleted")
    assert page.locator("#sweep-status progress").count() == 1
    screenshot(page, "m2-retention-pending")
    sweep = RetentionSweep.objects.get(dry_run=False)
    retention_sweep(sweep_id=sweep.pk)  # the worker's part; the page polls every 2s
    page.wait_for_selector("#sweep-status.sweep-completed >> text=6 / 6 rows deleted")
    assert page.locator("#count-messages").inner_text() == "6"
    assert page.locator("#sweep-status progress").count() == 0
    screenshot(page, "m3-retention-receipt")
    assert not Message.objects.filter(conversation=conversation).exists()
