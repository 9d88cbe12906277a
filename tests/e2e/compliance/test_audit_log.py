"""The audit log in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): its
filters stay in the URL and its targets link to what they name; an observation's edit
and revert show in it."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from governance.holds import legal_hold_place
from governance.models import AuditEvent
from memory.models import Observation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe
from tests.e2e.browser import sign_in


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
    # The trail outlives the note: it shows the text's digest changing, never the words
    # (the note's history shows them while the note exists).
    assert "textDigest" in edits.inner_text() and "refund agreed" not in edits.inner_text()
    page.goto("/compliance/audit/?action=observation.revert")
    reverts = page.locator("#events tbody tr")
    assert reverts.count() == 1
    assert "the edit dropped the order number" in reverts.inner_text()
    assert str(observation.pk) in reverts.inner_text()
    assert page.locator("#chain-status").inner_text().startswith("Chain verified")
    screenshot(page, f"m4-audit-revert-{role}")
    assert AuditEvent.objects.filter(target_id=str(observation.pk)).count() >= 2
