"""manage.py add_member: roles from the command line, each grant audited."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command

from governance.models import AuditEvent
from tenancy.models import Membership
from tests.dashboard.factories import PASSWORD, MembershipFactory, UserFactory


def _add(*args: str) -> str:
    out = StringIO()
    call_command("add_member", *args, stdout=out)
    return out.getvalue()


def test_it_creates_the_account_and_grants_the_role(workspace):
    output = _add(
        "--workspace", "acme", "--username", "jo", "--role", "reviewer", "--password", PASSWORD
    )

    assert "jo (created account) is reviewer in workspace acme." in output
    assert authenticate(username="jo", password=PASSWORD) is not None
    membership = Membership.objects.get(user__username="jo", workspace=workspace)
    assert membership.role == "reviewer"
    event = AuditEvent.objects.get(workspace=workspace, action="membership.grant")
    assert (event.actor_id, event.actor_role) == ("command:add_member", "system")
    assert event.reason == "granted with manage.py add_member"
    assert event.after == {"userId": membership.user_id, "role": "reviewer"}


def test_a_new_account_without_a_password_gets_one_printed_once(workspace):
    output = _add("--workspace", "acme", "--username", "sam", "--role", "viewer")
    password = output.split("Password: ")[1].split()[0]
    assert authenticate(username="sam", password=password) is not None


def test_an_existing_member_gets_the_new_role_and_keeps_the_password(workspace):
    member = MembershipFactory(workspace=workspace, role="viewer", user=UserFactory(username="jo"))

    output = _add(
        "--workspace", "acme", "--username", "jo", "--role", "compliance", "--reason", "audit"
    )

    assert "jo (existing account) is compliance officer" in output
    assert "Password" not in output
    member.refresh_from_db()
    assert member.role == "compliance"
    event = AuditEvent.objects.get(workspace=workspace, action="membership.change")
    assert (event.before["role"], event.after["role"], event.reason) == (
        "viewer",
        "compliance",
        "audit",
    )
    assert authenticate(username="jo", password=PASSWORD) is not None


def test_bad_input_is_refused_and_changes_nothing(workspace):
    with pytest.raises(CommandError, match="invalid choice: 'owner'"):
        _add("--workspace", "acme", "--username", "jo", "--role", "owner")
    with pytest.raises(CommandError, match="too short"):
        _add("--workspace", "acme", "--username", "jo", "--role", "viewer", "--password", "x")
    assert not get_user_model().objects.filter(username="jo").exists()
    assert not Membership.objects.exists()
