"""Erasure in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): the end
user id checked as it is typed, the list updated and the receipt given; a request under
a legal hold refused next to the form."""

from __future__ import annotations

import json

from core.actors import SYSTEM_ACTOR
from governance.erasure import erasure_execute
from governance.holds import legal_hold_place
from governance.models import AuditEvent, ErasureRequest
from memory.models import Message
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat
from tests.e2e.browser import sign_in


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
