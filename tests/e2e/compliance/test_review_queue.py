"""The review queue in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
a compliance officer approves a finding."""

from __future__ import annotations

from governance.models import AuditEvent, RedactionFinding
from memory.models import Observation
from memory.pipeline.reflector import observations_for_reflection
from memory.services.conversations import conversation_create
from tests.e2e.browser import sign_in
from tests.memory.factories import ObservationFactory

PHONE = "(977) 625-2661"


def test_a_compliance_officer_approves_a_finding(open_page, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, title="Call")
    ObservationFactory(conversation=conversation, text=f"User said {PHONE} on the call.")
    observations_for_reflection(conversation=conversation)
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
