"""The Content-Security-Policy in a real Chromium (Debian's /usr/bin/chromium, driven by
Playwright): each main page is served with it, and while the page does what it does
(htmx columns and panels load, charts draw, previews update) the browser reports no
violation, so the policy blocks nothing a page needs. And what it is there for: a script
that got into a page does not run.

Violations are collected twice: Chromium's console messages and the page's
``securitypolicyviolation`` events (recorded by a script Playwright adds, which the
policy does not apply to)."""

from __future__ import annotations

import pytest

from core.actors import SYSTEM_ACTOR
from memory.services.conversations import conversation_create
from memory.services.escalations import escalation_create
from tests.dashboard.factories import PASSWORD, chat, observe, reflect
from tests.e2e.browser import sign_in

pytestmark = pytest.mark.django_db(transaction=True)

RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline"));
});
"""


class Watched:
    """A page whose CSP violations are collected, visited page by page."""

    def __init__(self, page) -> None:
        self.page = page
        self.console: list[str] = []
        page.add_init_script(RECORD_VIOLATIONS)
        page.on("console", self._console)

    def _console(self, message) -> None:
        if "Content Security Policy" in message.text or "evalDisallowed" in message.text:
            self.console.append(message.text)

    def visit(self, url: str) -> None:
        response = self.page.goto(url)
        assert response is not None and response.ok, url
        policy = response.headers.get("content-security-policy", "")
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        self.page.wait_for_load_state("load")

    def violations(self) -> list[str]:
        # From the document now open, and every console line since the start.
        events = self.page.evaluate("window.cspViolations || []")
        return [*self.console, *events]


@pytest.fixture
def watched(open_page, member, workspace):
    page = open_page()
    watched = Watched(page)
    watched.visit("/accounts/login/")
    sign_in(page, member("admin"))
    return watched


@pytest.fixture
def conversation(workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Headphones")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    escalation_create(conversation=conversation, actor=SYSTEM_ACTOR, reason="Wants a person")
    return conversation


def test_the_conversation_pages_work_with_no_violation(watched, conversation):
    page = watched.page
    watched.visit("/conversations/")
    page.locator("#id_q").fill("headphones")
    page.wait_for_url("**q=headphones**")
    assert watched.violations() == []

    watched.visit(f"/conversations/{conversation.pk}/")
    page.locator("#observation-list .memory-item.obs .item-text").first.click()
    page.wait_for_selector(".msg.is-highlighted")
    page.locator("#observation-list .item-actions").first.get_by_role("link", name="Edit").click()
    page.wait_for_selector("#observation-list .item-panel textarea")
    page.locator("#observation-list .item-panel [data-close-panel]").first.click()
    with page.expect_response(lambda r: "/observations/?priority=high" in r.url):
        page.locator("#observations .priority-filter input[value=high]").check()
    assert watched.violations() == []

    for url in (
        f"/conversations/{conversation.pk}/context/",
        "/search/?q=refund",
        "/escalations/",
        "/users/",
        "/metrics/",
    ):
        watched.visit(url)
        assert watched.violations() == [], url
    page.wait_for_function("window.memdeskCharts && window.memdeskCharts.length > 0")
    assert watched.violations() == []


def test_the_compliance_and_settings_pages_work_with_no_violation(watched, conversation):
    page = watched.page
    watched.visit("/compliance/redaction/")
    page.locator("#preview-input").press_sequentially("Mail dana@example.com", delay=5)
    page.wait_for_selector("#preview-result >> text=EMAIL_ADDRESS")
    assert watched.violations() == []
    for url in (
        "/compliance/audit/",
        "/compliance/review/",
        "/compliance/holds/",
        "/compliance/retention/",
        "/compliance/retention/policies/new/",
        "/compliance/erasure/",
        "/compliance/pseudonyms/",
        "/compliance/redaction/rescan/",
        "/settings/api-keys/",
        "/settings/memory/",
        "/settings/members/",
    ):
        watched.visit(url)
        assert watched.violations() == [], url


def test_the_admin_and_the_lockout_page_have_no_violation(open_page, member, settings, screenshot):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 2
    watched = Watched(open_page())
    page = watched.page
    admin = member("admin")
    admin.is_staff = admin.is_superuser = True
    admin.save()
    watched.visit("/admin/login/")
    page.get_by_label("Username").fill(admin.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_selector("text=Site administration")
    watched.visit("/admin/tenancy/workspace/")
    assert watched.violations() == []

    # Two wrong passwords lock the account (and this browser's address).
    user = member("viewer")
    watched = Watched(open_page())
    page = watched.page
    for _ in range(2):
        watched.visit("/accounts/login/")
        page.get_by_label("Username").fill(user.username)
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
    page.wait_for_selector("text=Too many failed sign-ins")
    screenshot(page, "s1-sign-in-locked")
    assert watched.violations() == []


def test_a_column_does_not_reload_over_an_open_panel(watched, conversation):
    """The observations column reloads when reflections are re-derived, but not while an
    edit panel in it is open (dashboard.js, which does without an eval'd htmx filter)."""
    page = watched.page
    watched.visit(f"/conversations/{conversation.pk}/")
    reloads: list[str] = []
    page.on(
        "request",
        lambda r: (
            reloads.append(r.url)
            if "/observations/?" in r.url or r.url.endswith("/observations/")
            else None
        ),
    )
    page.locator("#observation-list .item-actions").first.get_by_role("link", name="Edit").click()
    text = page.locator("#observation-list .item-panel textarea")
    text.fill("Typed, not saved yet")

    page.evaluate("htmx.trigger(document.body, 'memory-rederived')")
    assert text.input_value() == "Typed, not saved yet"

    page.locator("#observation-list .item-panel [data-close-panel]").first.click()
    with page.expect_request(lambda r: r.url.endswith("/observations/")):
        page.evaluate("htmx.trigger(document.body, 'memory-rederived')")
    assert len(reloads) == 1  # only the reload after the panel closed was sent
    assert watched.violations() == []


def test_a_script_that_got_into_a_page_does_not_run(watched, conversation):
    watched.visit(f"/conversations/{conversation.pk}/")
    watched.page.evaluate(
        """() => {
            const script = document.createElement("script");
            script.textContent = "window.injected = true";
            document.body.appendChild(script);
            document.body.insertAdjacentHTML(
                "beforeend", '<img src="data:," onload="window.injected = true">');
        }"""
    )
    watched.page.wait_for_function("window.cspViolations.length >= 2")
    assert watched.page.evaluate("window.injected === undefined")
    assert any("script-src" in violation for violation in watched.violations())


def test_the_api_docs_work_with_no_violation(open_page, db):
    watched = Watched(open_page())
    watched.visit("/v1/docs/")
    watched.page.wait_for_selector("#swagger-ui .opblock-summary-path")
    assert watched.violations() == []
