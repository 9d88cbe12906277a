"""The compliance pages in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright, as in test_dashboard.py): revealing a restricted original is for the compliance
officer only and lands in the audit log; approving a finding; a hold placed on the page
blocks deletion. Pages are saved as screenshots."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.models import AuditEvent, LegalHold, RedactionFinding
from memory import pipeline
from memory.models import Message, Observation
from memory.services import (
    MessageInput,
    conversation_create,
    conversation_delete,
    messages_append,
)
from tests.e2e.browser import sign_in
from tests.governance.test_redaction_support import set_policy
from tests.memory.factories import ObservationFactory

EMAIL = "dana.whitfield@example.com"
PHONE = "(977) 625-2661"


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


def test_a_compliance_officer_approves_a_finding(open_page, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, title="Call")
    ObservationFactory(conversation=conversation, text=f"User said {PHONE} on the call.")
    pipeline.observations_for_reflection(conversation=conversation)
    finding = RedactionFinding.objects.get(status="pending_review")

    page = open_page()
    sign_in(page, member("compliance"))
    page.goto("/compliance/review/")
    row = page.locator(f"#finding-{finding.pk}")
    assert row.locator("mark").inner_text() == PHONE
    screenshot(page, "c4-review-queue")
    page.get_by_label("Reason for the decisions below").fill("a customer's phone number")
    row.get_by_role("button", name="Approve").click()
    page.wait_for_selector(f"#finding-{finding.pk} >> text=redacted after review")
    finding.refresh_from_db()
    assert finding.status == "approved"
    assert PHONE not in Observation.objects.get(pk=finding.target_id).text
    event = AuditEvent.objects.get(action="redaction_finding.approve")
    assert event.reason == "a customer's phone number"


def test_a_hold_placed_on_the_page_blocks_deletion_until_released(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Held")
    page = open_page()
    sign_in(page, member("compliance"))
    page.goto("/compliance/holds/")
    page.get_by_label("Conversation id").fill(str(conversation.pk))
    page.get_by_label("Reason").fill("Litigation 2026-17")
    page.get_by_role("button", name="Place hold").click()
    page.wait_for_selector("#holds tbody >> text=Litigation 2026-17")
    hold = LegalHold.objects.get()
    screenshot(page, "c5-holds")
    with pytest.raises(MemdeskError) as refused:
        conversation_delete(conversation=conversation, actor=SYSTEM_ACTOR, reason="cleanup")
    assert refused.value.code == "legal_hold"

    page.get_by_label(f"Reason for releasing hold {hold.pk}").fill("Case closed")
    page.get_by_role("button", name="Release").click()
    page.wait_for_selector(f"#hold-{hold.pk} >> text=released")
    conversation_delete(conversation=conversation, actor=SYSTEM_ACTOR, reason="cleanup")
    assert not LegalHold.objects.exists() or LegalHold.objects.get().released_at is not None
