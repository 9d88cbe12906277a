"""The Members page: workspace admins give, change and take away roles, each with a
reason that the audit log keeps; nobody else can; the last admin stays."""

from __future__ import annotations

import pytest
from django.contrib.auth import authenticate

from governance.models import AuditEvent
from tenancy.models import Membership
from tests.dashboard.factories import MembershipFactory, UserFactory


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance"])
def test_only_admins_manage_members(login, role):
    client = login(role)
    assert client.get("/settings/members/").status_code == 403
    response = client.post(
        "/settings/members/", {"username": "x", "role": "admin", "reason": "because"}
    )
    assert response.status_code == 403
    assert not Membership.objects.filter(user__username="x").exists()


def test_the_page_lists_members_and_the_nav_links_it_for_admins(login, workspace):
    admin = login("admin")
    MembershipFactory(workspace=workspace, role="viewer", user=UserFactory(username="jo"))
    html = admin.get("/settings/members/").content.decode()
    assert ">jo<" in html or ">jo " in html
    assert 'href="/settings/members/"' in html
    assert 'href="/settings/members/"' not in login("compliance").get("/metrics/").content.decode()


def test_an_admin_adds_a_new_person_who_can_sign_in(login, workspace):
    admin = login("admin")
    response = admin.post(
        "/settings/members/",
        {"username": "jo", "role": "reviewer", "reason": "joins support"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 201
    html = response.content.decode()
    assert "jo is now reviewer" in html
    password = html.split('id="new-password" type="text" readonly value="')[1].split('"')[0]
    assert authenticate(username="jo", password=password) is not None
    assert response["Cache-Control"] == "no-store"
    event = AuditEvent.objects.get(workspace=workspace, action="membership.grant")
    assert event.reason == "joins support"
    assert event.actor_id == str(admin.user.pk)


def test_adding_an_existing_account_grants_the_role_without_a_password(login, workspace):
    UserFactory(username="sam")
    response = login("admin").post(
        "/settings/members/", {"username": "sam", "role": "viewer", "reason": "reads"}
    )
    assert response.status_code == 200
    assert "new-password" not in response.content.decode()
    assert Membership.objects.get(user__username="sam", workspace=workspace).role == "viewer"


def test_every_error_is_shown_in_the_forms_words(login):
    response = login("admin").post("/settings/members/", {"username": "", "role": "owner"})
    assert response.status_code == 422
    html = response.content.decode()
    assert "This field is required." in html
    assert "Select a valid choice. owner is not one of the available choices." in html
    assert "Give a reason: every change of roles needs one." in html


def test_an_admin_changes_a_role_with_a_reason(login, workspace):
    member = MembershipFactory(workspace=workspace, role="viewer")
    admin = login("admin")
    refused = admin.post(f"/settings/members/{member.pk}/role/", {f"m{member.pk}-role": "admin"})
    assert refused.status_code == 422
    assert "Give a reason" in refused.content.decode()
    member.refresh_from_db()
    assert member.role == "viewer"

    response = admin.post(
        f"/settings/members/{member.pk}/role/",
        {f"m{member.pk}-role": "compliance", f"m{member.pk}-reason": "new DPO"},
    )
    assert response.status_code == 302
    member.refresh_from_db()
    assert member.role == "compliance"
    event = AuditEvent.objects.get(workspace=workspace, action="membership.change")
    assert (event.before["role"], event.after["role"]) == ("viewer", "compliance")


def test_removing_takes_the_role_away(login, workspace):
    member = MembershipFactory(workspace=workspace, role="reviewer")
    response = login("admin").post(
        f"/settings/members/{member.pk}/remove/", {f"r{member.pk}-reason": "left the team"}
    )
    assert response.status_code == 302
    assert not Membership.objects.filter(pk=member.pk).exists()
    event = AuditEvent.objects.get(workspace=workspace, action="membership.revoke")
    assert event.reason == "left the team"


def test_the_last_admin_cannot_be_demoted_or_removed(login, workspace):
    admin = login("admin")
    [own] = Membership.objects.filter(workspace=workspace, role="admin")
    demoted = admin.post(
        f"/settings/members/{own.pk}/role/",
        {f"m{own.pk}-role": "viewer", f"m{own.pk}-reason": "oops"},
    )
    assert demoted.status_code == 422
    assert "only admin" in demoted.content.decode()
    removed = admin.post(f"/settings/members/{own.pk}/remove/", {f"r{own.pk}-reason": "oops"})
    assert removed.status_code == 422
    own.refresh_from_db()
    assert own.role == "admin"
    assert not AuditEvent.objects.filter(action__startswith="membership.").exists()


def test_another_workspaces_member_is_not_found(login, other_workspace):
    stranger = MembershipFactory(workspace=other_workspace, role="viewer")
    response = login("admin").post(
        f"/settings/members/{stranger.pk}/remove/", {f"r{stranger.pk}-reason": "x"}
    )
    assert response.status_code == 404
    assert Membership.objects.filter(pk=stranger.pk).exists()
