"""Legal holds in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright): a
hold placed on the page blocks deletion until it is released."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from core.errors import MemdeskError
from governance.models import LegalHold
from memory.services.conversations import conversation_create, conversation_delete
from tests.e2e.browser import sign_in


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
