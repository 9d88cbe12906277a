"""/settings/memory/: every member sees how much detail the workspace's memory keeps; an
admin changes it with a reason, audited, through the same service as the API."""

from __future__ import annotations

import re

import pytest

from governance.models import AuditEvent
from tenancy.models import DEFAULT_CONTEXT_MAX_TOKENS, Workspace
from tests.dashboard.factories import MembershipFactory

URL = "/settings/memory/"
HX = {"HTTP_HX_REQUEST": "true"}


def _stored_fidelity(workspace: Workspace) -> str:
    workspace.refresh_from_db()
    return workspace.fidelity


def test_an_admin_sees_the_levels_explained_and_the_one_in_force(login, workspace):
    response = login("admin").get(URL)

    assert response.status_code == 200
    html = response.content.decode()
    assert '<span class="stat-value" id="fidelity-in-force">balanced</span>' in html
    assert "the server's default" in html
    for level, explanation in [
        ("compact", "The smallest memory"),
        ("balanced", "keeps about 90% of what later questions ask"),
        ("detailed", "more of each answer, longer sentences"),
    ]:
        assert f'value="{level}"' in html and explanation in html
    # Following the default is the choice checked until someone picks a level.
    checked = re.findall(r'<input type="radio" name="fidelity" value="(\w+)"[^>]* checked', html)
    assert checked == ["default"]
    assert 'name="reason"' in html
    assert "next runs" in html


def test_the_page_is_linked_from_the_navigation_for_every_role(login):
    for role in ("viewer", "admin"):
        html = login(role).get("/conversations/").content.decode()
        assert f'href="{URL}"' in html


def test_an_admin_saves_a_level_with_a_reason_and_it_is_audited(login, workspace):
    client = login("admin")

    response = client.post(URL, {"fidelity": "detailed", "reason": "quote our answers"})

    assert response.status_code == 302 and response["Location"] == URL
    assert _stored_fidelity(workspace) == "detailed"
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert (event.actor_type, event.actor_id, event.actor_role) == (
        "user",
        str(client.user.pk),
        "admin",
    )
    assert event.before == {
        "fidelity": None,
        "effectiveFidelity": "balanced",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }
    assert event.after == {
        "fidelity": "detailed",
        "effectiveFidelity": "detailed",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }
    assert event.reason == "quote our answers"
    page = client.get(URL).content.decode()
    assert '<span class="stat-value" id="fidelity-in-force">detailed</span>' in page
    assert "chosen for this workspace" in page
    assert "the Observer&#x27;s next runs use the detailed level" in page


def test_following_the_default_again_clears_the_workspaces_level(login, workspace):
    workspace.fidelity = "compact"
    workspace.save()

    login("admin").post(URL, {"fidelity": "default", "reason": "as everyone else"})

    assert _stored_fidelity(workspace) == ""
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert event.after == {
        "fidelity": None,
        "effectiveFidelity": "balanced",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }


def test_saving_with_htmx_returns_the_settings_section(login, workspace):
    response = login("admin").post(URL, {"fidelity": "compact", "reason": "short"}, **HX)

    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="settings">')
    assert '<span class="stat-value" id="fidelity-in-force">compact</span>' in html
    assert _stored_fidelity(workspace) == "compact"


@pytest.mark.parametrize("reason", ["", "   "])
def test_a_save_without_a_reason_is_shown_next_to_the_field_and_changes_nothing(
    login, workspace, reason
):
    response = login("admin").post(URL, {"fidelity": "compact", "reason": reason})

    assert response.status_code == 422
    html = response.content.decode()
    assert '<ul class="errorlist" id="id_reason_error">' in html
    assert "every change to memory settings needs one" in html
    assert _stored_fidelity(workspace) == ""
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


def test_an_unknown_level_is_refused_and_changes_nothing(login, workspace):
    response = login("admin").post(URL, {"fidelity": "verbose", "reason": "more"})

    assert response.status_code == 422
    assert b'<ul class="errorlist" id="id_fidelity_error">' in response.content
    assert _stored_fidelity(workspace) == ""


def test_saving_the_same_level_says_nothing_changed(login, workspace):
    workspace.fidelity = "compact"
    workspace.save()
    client = login("admin")

    client.post(URL, {"fidelity": "compact", "reason": "again"})

    assert "Nothing changed." in client.get(URL).content.decode()
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance"])
def test_other_roles_see_the_settings_read_only_and_cannot_save(login, workspace, role):
    workspace.fidelity = "compact"
    workspace.save()
    client = login(role)

    page = client.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert '<span class="stat-value" id="fidelity-in-force">compact</span>' in html
    assert "<strong>compact</strong> (in force)" in html
    assert '<form method="post" action="/settings/memory/"' not in html
    assert 'name="reason"' not in html
    assert "Changing it needs the admin role" in html

    response = client.post(URL, {"fidelity": "detailed", "reason": "I want more"})
    assert response.status_code == 403
    assert b"To change memory settings in <strong>acme</strong>" in response.content
    assert b'<strong class="required-role">admin</strong>' in response.content
    assert _stored_fidelity(workspace) == "compact"
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


def test_it_acts_in_the_switched_workspace_only(login, workspace, other_workspace):
    client = login("admin")
    MembershipFactory(user=client.user, workspace=other_workspace, role="admin")
    switched = client.post("/workspace/", {"workspace": str(other_workspace.pk), "next": URL})
    assert switched["Location"] == URL

    client.post(URL, {"fidelity": "compact", "reason": "globex only"})

    assert _stored_fidelity(other_workspace) == "compact"
    assert _stored_fidelity(workspace) == ""


def test_the_page_shows_the_default_context_budget(login, workspace):
    assert (
        '<span class="stat-value" id="context-budget">32,000</span>'
        in login("viewer").get(URL).content.decode()
    )
    workspace.context_max_tokens = None
    workspace.save()
    assert (
        '<span class="stat-value" id="context-budget">none</span>'
        in login("viewer").get(URL).content.decode()
    )

    workspace.context_max_tokens = 12000
    workspace.save()

    html = login("viewer").get(URL).content.decode()
    assert '<span class="stat-value" id="context-budget">12,000</span>' in html
