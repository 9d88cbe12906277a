"""More compliance flows in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright, as in test_compliance.py): a retention dry run, run now with its
progress and receipt; an observation edit and revert that show in the audit log; an
erasure request refused under a legal hold; the live redaction preview."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.holds import legal_hold_place
from governance.models import AuditEvent, ErasureRequest, RetentionSweep
from governance.retention import retention_policy_create, retention_sweep
from memory.models import Message, Observation
from memory.services import conversation_create
from tests.dashboard.factories import chat, observe
from tests.e2e.browser import sign_in
from tests.governance.test_redaction_support import set_policy

EMAIL = "dana.whitfield@example.com"


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


@pytest.mark.parametrize("role", ["compliance", "admin"])
def test_an_observation_edit_and_revert_show_in_the_audit_log(
    open_page, member, workspace, screenshot, role
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Headphones")
    chat(conversation)
    observe(conversation)
    observation = Observation.objects.filter(conversation=conversation).order_by("observed_at")[0]
    page = open_page()
    sign_in(page, member(role))
    page.goto(f"/conversations/{conversation.pk}/")
    item = page.locator(f"#obs-{observation.pk}")
    item.get_by_role("link", name="Edit").click()
    item.get_by_label("Text").fill("Dana's headphones are broken; refund agreed.")
    item.get_by_label("Reason").fill("summarise the outcome")
    item.get_by_role("button", name="Save").click()
    page.wait_for_selector(f"#obs-{observation.pk} .item-text >> text=refund agreed")
    item.get_by_role("link", name="History").click()
    history = item.locator(".history")
    history.wait_for()
    history.get_by_label("Reason").fill("the edit dropped the order number")
    history.get_by_role("button", name="Revert to v1").click()
    page.wait_for_selector(f"#obs-{observation.pk} .history >> text=v2 → v3")

    page.goto("/compliance/audit/?target_type=observation&action=observation.edit")
    edits = page.locator("#events tbody tr")
    assert edits.count() == 1
    assert "summarise the outcome" in edits.inner_text() and role in edits.inner_text()
    edits.get_by_text("Before / after").click()  # the diff opens in place
    assert "refund agreed" in edits.inner_text()
    page.goto("/compliance/audit/?action=observation.revert")
    reverts = page.locator("#events tbody tr")
    assert reverts.count() == 1
    assert "the edit dropped the order number" in reverts.inner_text()
    assert str(observation.pk) in reverts.inner_text()
    assert page.locator("#chain-status").inner_text().startswith("Chain verified")
    screenshot(page, f"m4-audit-revert-{role}")
    assert AuditEvent.objects.filter(target_id=str(observation.pk)).count() >= 2


def test_an_erasure_under_a_legal_hold_is_refused_next_to_the_form(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Held")
    chat(conversation)
    legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="litigation 42", end_user_id="dana"
    )
    page = open_page()
    page.on("dialog", lambda dialog: dialog.accept())
    sign_in(page, member("compliance"))
    page.goto("/compliance/erasure/")
    page.get_by_label("End user id").fill("dana")
    page.get_by_label("Reason").fill("GDPR art. 17 request")
    page.get_by_role("button", name="Request erasure").click()
    page.wait_for_selector("#erasure-refused")
    assert "refused" in page.locator("#erasure-refused").inner_text()
    erasure = ErasureRequest.objects.get()
    assert erasure.status == "refused"
    assert page.locator(f"#erasure-{erasure.pk}").count() == 1
    screenshot(page, "m5-erasure-refused")
    assert Message.objects.filter(conversation=conversation).count() == 6


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
