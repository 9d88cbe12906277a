"""Roles given in the dashboard, in a real Chromium: an admin adds a new person with a
reason, the person signs in with the password shown once, and sees what the role allows."""

from __future__ import annotations

from governance.models import AuditEvent
from tests.e2e.browser import sign_in


def test_an_admin_gives_a_new_person_a_role_and_they_sign_in(
    open_page, member, workspace, screenshot
):
    page = open_page()
    sign_in(page, member("admin"))
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Members").click()
    page.locator("#id_username").fill("jo")
    page.locator("#id_role").select_option("reviewer")
    page.locator("#id_reason").fill("joins the support team")
    page.get_by_role("button", name="Give the role").click()
    page.get_by_role("heading", name="jo is now reviewer").wait_for()
    password = page.get_by_label("Password for jo").input_value()
    screenshot(page, "50-members-added")
    assert page.locator("#members tbody tr", has_text="jo").count() == 1
    event = AuditEvent.objects.get(workspace=workspace, action="membership.grant")
    assert event.reason == "joins the support team"

    newcomer = open_page()
    newcomer.goto("/accounts/login/")
    newcomer.get_by_label("Username").fill("jo")
    newcomer.get_by_label("Password").fill(password)
    newcomer.get_by_role("button", name="Sign in").click()
    newcomer.wait_for_url("**/conversations/")
    assert newcomer.locator(".role-badge").inner_text() == "reviewer"
    nav = newcomer.get_by_role("navigation", name="Main")
    assert nav.get_by_role("link", name="Members").count() == 0
