"""Masking by role in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
a viewer sees a card number and an e-mail address only as their types; a compliance
officer reveals one value, then the rest of the message, for a reason, and both reveals
are in the audit log with it. Pages are saved as screenshots."""

from __future__ import annotations

from governance.models import AuditEvent, ScanRequest
from governance.redaction.scan import message_scan_requests
from memory.models import Message
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.e2e.browser import sign_in

CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"


def test_a_viewer_sees_types_and_a_compliance_officer_reveals_values(
    open_page, member, workspace, screenshot
):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Card")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", content=f"My card is {CARD} and my email is {EMAIL}."),
            MessageInput(role="assistant", content="Thanks, noted."),
        ],
    )
    # What the worker does once the write has committed.
    message_scan_requests(request_ids=list(ScanRequest.objects.values_list("pk", flat=True)))
    url = f"/conversations/{conversation.pk}/"
    message = Message.objects.get(conversation=conversation, seq=1)

    viewer = open_page()
    sign_in(viewer, member("viewer"))
    viewer.goto(url)
    text = viewer.locator("#m-1 .msg-text").inner_text()
    assert text == "My card is <CREDIT_CARD> and my email is <EMAIL_ADDRESS>."
    assert CARD not in viewer.content() and EMAIL not in viewer.content()
    assert viewer.get_by_role("button", name="Reveal personal data").count() == 0
    viewer.goto(f"{url}transcript")
    assert CARD not in viewer.content() and "<CREDIT_CARD>" in viewer.locator("body").inner_text()
    viewer.goto(url)
    screenshot(viewer, "m1-masked-for-a-viewer")

    officer = open_page()
    sign_in(officer, member("compliance"))
    officer.goto(url)
    officer.locator("#m-1 button.pii-mask", has_text="<CREDIT_CARD>").click()
    # No reason given: the browser asks for one and sends nothing.
    assert officer.locator("#m-1 input[name=reason]:invalid").count() == 1
    assert officer.locator("#m-1 mark.pii-revealed").count() == 0
    officer.get_by_label("Reason for revealing personal data in message 1").fill(
        "chargeback dispute"
    )
    officer.locator("#m-1 button.pii-mask", has_text="<CREDIT_CARD>").click()
    officer.wait_for_selector(f"#m-1 mark.pii-revealed >> text={CARD}")
    text = officer.locator("#m-1 .msg-text").inner_text()
    assert text == f"My card is {CARD} and my email is <EMAIL_ADDRESS>."
    screenshot(officer, "m2-one-value-revealed")
    officer.locator("#m-1").get_by_role("button", name="Reveal personal data").click()
    officer.wait_for_selector(f"#m-1 mark.pii-revealed >> text={EMAIL}")
    assert officer.locator("#m-1 .badge", has_text="revealed").count() == 1
    screenshot(officer, "m3-message-revealed")

    events = list(AuditEvent.objects.filter(action="message.reveal").order_by("sequence"))
    assert [e.after["whole"] for e in events] == [False, True]
    assert {e.reason for e in events} == {"chargeback dispute"}  # kept for the second
    assert {e.target_id for e in events} == {str(message.pk)}
    officer.goto("/compliance/audit/?action=message.reveal")
    assert officer.locator("main").get_by_text("message.reveal").count() >= 2
    assert CARD not in officer.content() and EMAIL not in officer.content()
