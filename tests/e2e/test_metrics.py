"""The metrics page in a real Chromium (Debian's /usr/bin/chromium, driven by Playwright):
the charts draw."""

from __future__ import annotations

from core.actors import SYSTEM_ACTOR
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from tests.dashboard.factories import chat, observe, reflect
from tests.e2e.browser import sign_in


def test_the_metrics_charts_draw(open_page, member, workspace, screenshot):
    conversation = conversation_create(workspace=workspace, title="Measured")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Wants a person")
    page = open_page()
    sign_in(page, member("viewer"))
    page.goto("/metrics/")
    page.wait_for_function("window.memdeskCharts && window.memdeskCharts.length === 8")
    painted = page.evaluate(
        """() => [...document.querySelectorAll('canvas')].map(canvas => {
            const context = canvas.getContext('2d');
            const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
            let count = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) count++;
            return count;
        })"""
    )
    assert len(painted) == 8 and all(pixels > 0 for pixels in painted)
    screenshot(page, "08-metrics")
    page.locator("#scope").select_option(str(conversation.pk))
    page.wait_for_selector("#charts >> text=One conversation")
    page.wait_for_function("window.memdeskCharts && window.memdeskCharts.length === 8")
