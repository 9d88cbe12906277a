"""A compliance officer's daily work in a real Chromium (Debian's /usr/bin/chromium,
driven by Playwright, as in test_compliance.py): filtering the audit log and following
a target; editing the redaction policy with its draft preview, all errors at once and
the re-scan offered after saving; checking an end user id while typing it, then the
erasure, its list updating on its own and its receipt downloaded. The pages touched fit a
phone's width."""

from __future__ import annotations

import json

from core.actors import SYSTEM_ACTOR
from governance.erasure import erasure_execute
from governance.holds import legal_hold_place
from governance.models import AuditEvent, ErasureRequest, RescanRun
from memory.services import conversation_create
from tests.dashboard.factories import chat
from tests.e2e.browser import sign_in
from tests.governance.test_redaction_support import set_policy

EMAIL = "dana.whitfield@example.com"


def test_the_audit_log_filters_in_the_url_and_links_to_its_targets(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Disputed")
    hold = legal_hold_place(
        workspace=workspace, actor=SYSTEM_ACTOR, reason="Claim 17", conversation=conversation
    )
    page = open_page()
    sign_in(page, member("compliance"))
    page.goto("/compliance/audit/")
    page.get_by_label("Action starts with").fill("legal_hold")
    page.get_by_label("Actor").fill("system")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/compliance/audit/?*action=legal_hold*")
    rows = page.locator("#events tbody tr")
    assert rows.count() == 1 and "legal_hold.place" in rows.inner_text()
    export = page.locator("#export-link").get_attribute("href")
    assert "action=legal_hold" in export and "actor=system" in export
    screenshot(page, "d1-audit-filtered")
    rows.get_by_role("link", name=str(hold.pk)).click()
    page.wait_for_url(f"**/compliance/holds/#hold-{hold.pk}")
    assert "Claim 17" in page.locator(f"#hold-{hold.pk}").inner_text()


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


def test_an_erasure_checks_the_id_as_typed_updates_the_list_and_gives_a_receipt(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    chat(conversation)
    page = open_page()
    sign_in(page, member("compliance"))
    page.goto(f"/conversations/{conversation.pk}/")
    page.get_by_role("button", name="Erase end user…").click()
    page.wait_for_url("**/compliance/erasure/?user=dana")
    user = page.get_by_label("End user id")
    assert user.input_value() == "dana"
    user.fill("dnaa")
    page.wait_for_selector("#erasure-user-check >> text=check the spelling")
    user.fill("dana")
    page.wait_for_selector("#erasure-user-check >> text=Covers 1 conversation.")
    page.get_by_label("Reason").fill("GDPR art. 17 request")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Request erasure").click()
    page.wait_for_selector("#erasures-open")
    erasure = ErasureRequest.objects.get()
    erasure_execute(request_id=erasure.pk)  # what the worker does
    page.wait_for_selector(f"#erasure-{erasure.pk} >> text=completed", timeout=6000)
    assert page.locator("#erasures-open").count() == 0

    page.get_by_role("link", name=str(erasure.pk), exact=True).click()
    event = AuditEvent.objects.get(action="erasure.complete")
    assert page.locator("#receipt-ids-hash").inner_text() == event.after["idsSha256"]
    page.locator("#print-receipt").wait_for(state="visible")
    with page.expect_download() as download:
        page.get_by_role("button", name="Download receipt (JSON)").click()
    receipt = json.loads(download.value.path().read_text())
    assert receipt["auditEvent"]["hash"] == event.hash and receipt["endUserId"] == "dana"
    screenshot(page, "d4-erasure-receipt")


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
