"""Sign-in, roles, the workspace switcher, the 403 page, and the 404 for an object the
URL does not hold."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from core.actors import SYSTEM_ACTOR
from dashboard.access import SESSION_WORKSPACE
from memory.models import Message, Observation, ObserverRun, Pin, Reflection
from memory.services.escalations import escalation_create
from memory.services.pins import pin_create
from tenancy.models import ROLE_CAPABILITIES, Capability, Membership, Role, roles_with
from tenancy.services import api_key_create
from tests.dashboard.factories import PASSWORD, MembershipFactory

PAGES = ["/conversations/", "/metrics/", "/settings/api-keys/", "/settings/memory/"]


@pytest.mark.parametrize("url", PAGES)
def test_it_sends_anonymous_visitors_to_sign_in(client, db, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(f"/accounts/login/?next={url}")


def test_the_sign_in_page_has_labelled_fields_and_shows_a_wrong_password(client, db, member):
    user = member("viewer")
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'<label for="id_username">' in page.content
    wrong = client.post("/accounts/login/", {"username": user.username, "password": "nope"})
    assert wrong.status_code == 200
    assert b"Please enter a correct username and password" in wrong.content
    right = client.post("/accounts/login/", {"username": user.username, "password": PASSWORD})
    assert right.status_code == 302 and right["Location"] == "/conversations/"


def test_home_sends_signed_in_users_to_their_conversations(client, login, db):
    assert b"Sign in to the dashboard" in client.get("/").content
    response = login("viewer").get("/")
    assert response.status_code == 302 and response["Location"] == "/conversations/"


def test_roles_map_to_capabilities_in_one_table():
    assert roles_with(Capability.VIEW_MEMORY) == list(Role)
    assert roles_with(Capability.EDIT_MEMORY) == [Role.REVIEWER, Role.COMPLIANCE, Role.ADMIN]
    assert roles_with(Capability.RUN_PIPELINE) == [Role.REVIEWER, Role.COMPLIANCE, Role.ADMIN]
    assert roles_with(Capability.MANAGE_API_KEYS) == [Role.ADMIN]
    assert roles_with(Capability.MANAGE_SETTINGS) == [Role.ADMIN]
    # Restricted originals are the compliance officer's alone (DESIGN.md, redaction).
    assert roles_with(Capability.VIEW_RESTRICTED) == [Role.COMPLIANCE]
    assert roles_with(Capability.REVEAL_PII) == [Role.COMPLIANCE, Role.ADMIN]
    assert set(ROLE_CAPABILITIES) == set(Role.values)


def test_a_member_of_no_workspace_is_told_to_ask_an_admin(login):
    response = login(None).get("/conversations/")
    assert response.status_code == 403
    assert b"no role in any workspace" in response.content
    assert b"ask an admin" in response.content


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance"])
def test_the_403_page_names_the_role_an_action_needs(login, role):
    response = login(role).get("/settings/api-keys/")
    assert response.status_code == 403
    html = response.content.decode()
    assert "To manage API keys in <strong>acme</strong>" in html
    assert '<strong class="required-role">admin</strong> role' in html
    assert f"Your role there is <strong>{role}</strong>" in html


def test_a_superuser_made_with_createsuperuser_sees_every_workspace_as_admin(
    db, workspace, other_workspace, monkeypatch
):
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", PASSWORD)
    call_command(
        "createsuperuser", "--noinput", username="root", email="root@example.com", verbosity=0
    )
    client = Client()
    signed_in = client.post("/accounts/login/", {"username": "root", "password": PASSWORD})
    assert signed_in.status_code == 302
    page = client.get("/conversations/").content.decode()
    assert "acme (admin)" in page and "globex (admin)" in page
    assert client.get("/settings/api-keys/").status_code == 200
    assert not Membership.objects.exists()


def test_the_switcher_changes_workspace_and_refuses_one_you_are_not_in(
    login, workspace, other_workspace, third_workspace
):
    client = login("viewer")
    MembershipFactory(user=client.user, workspace=other_workspace, role="admin")
    page = client.get("/conversations/").content.decode()
    assert "acme (viewer)" in page and "globex (admin)" in page and "initech" not in page
    assert client.get("/settings/api-keys/").status_code == 403  # viewer in acme

    switched = client.post(
        "/workspace/", {"workspace": str(other_workspace.pk), "next": "/settings/api-keys/"}
    )
    assert switched.status_code == 302 and switched["Location"] == "/settings/api-keys/"
    assert client.session[SESSION_WORKSPACE] == str(other_workspace.pk)
    assert client.get("/settings/api-keys/").status_code == 200  # admin in globex

    refused = client.post("/workspace/", {"workspace": str(third_workspace.pk)})
    assert refused.status_code == 404
    assert client.session[SESSION_WORKSPACE] == str(other_workspace.pk)


def test_the_switcher_goes_to_the_list_rather_than_an_object_of_the_old_workspace(
    login, other_workspace, observed_conversation
):
    client = login("viewer")
    MembershipFactory(user=client.user, workspace=other_workspace, role="viewer")
    response = client.post(
        "/workspace/",
        {
            "workspace": str(other_workspace.pk),
            "next": f"/conversations/{observed_conversation.pk}/",
        },
    )
    assert response["Location"] == "/conversations/"
    offsite = client.post(
        "/workspace/", {"workspace": str(other_workspace.pk), "next": "https://evil.example/"}
    )
    assert offsite["Location"] == "/conversations/"


def test_a_shared_link_to_another_of_your_workspaces_opens_there(
    login, other_workspace, foreign_conversation
):
    client = login("viewer")
    MembershipFactory(user=client.user, workspace=other_workspace, role="reviewer")
    page = client.get(f"/conversations/{foreign_conversation.pk}/")
    assert page.status_code == 200
    assert client.session[SESSION_WORKSPACE] == str(other_workspace.pk)
    assert b"Observe now" in page.content  # the role of that workspace applies


def test_a_user_only_sees_their_own_workspaces(db, workspace, other_workspace):
    user = MembershipFactory(workspace=other_workspace, role="viewer").user
    client = Client()
    client.force_login(user)
    page = client.get("/conversations/").content.decode()
    assert "globex (viewer)" in page and "acme" not in page
    assert get_user_model().objects.filter(is_superuser=True).count() == 0


@pytest.fixture
def third_workspace(db):
    from tenancy.services import workspace_get_or_create

    return workspace_get_or_create(name="initech")


# --- an object the URL does not hold -------------------------------------------------------------


def test_an_item_of_another_conversation_is_not_found_on_any_route(
    login, observed_conversation, reflected_conversation
):
    """Every route finds its item within the conversation its URL names: an item of
    another conversation of the same workspace is a 404, as a missing one is."""
    observation = Observation.objects.filter(conversation=reflected_conversation).first()
    reflection = Reflection.objects.filter(conversation=reflected_conversation).first()
    run = ObserverRun.objects.filter(conversation=reflected_conversation).first()
    message = Message.objects.filter(conversation=reflected_conversation).first()
    assert observation and reflection and run and message
    pin = pin_create(
        conversation=reflected_conversation,
        actor=SYSTEM_ACTOR,
        message_id=message.pk,
        reason="keep",
    )
    base = f"/conversations/{observed_conversation.pk}/"
    client = login("admin")
    for url in (
        f"{base}observations/{observation.pk}/edit/",
        f"{base}observations/{observation.pk}/delete/",
        f"{base}observations/{observation.pk}/history/",
        f"{base}reflections/{reflection.pk}/edit/",
        f"{base}reflections/{reflection.pk}/delete/",
        f"{base}reflections/{reflection.pk}/history/",
        f"{base}runs/observer/{run.pk}/",
        f"{base}messages/{message.pk}/pin/",
        f"{base}pins/{pin.pk}/unpin/",
    ):
        assert client.get(url).status_code == 404, url
    for url in (
        f"{base}observations/{observation.pk}/revert/",
        f"{base}reflections/{reflection.pk}/revert/",
        f"{base}runs/observer/{run.pk}/cancel/",
        f"{base}messages/{message.pk}/reveal/",
    ):
        assert client.post(url, {"reason": "x", "version": "1"}).status_code == 404, url
    assert Pin.objects.filter(pk=pin.pk).exists()


def test_a_link_to_an_item_not_in_the_conversation_shows_the_page_without_it(
    login, observed_conversation, reflected_conversation
):
    observation = Observation.objects.filter(conversation=reflected_conversation).first()
    reflection = Reflection.objects.filter(conversation=reflected_conversation).first()
    assert observation and reflection
    client = login("viewer")
    page = client.get(f"/conversations/{observed_conversation.pk}/?highlight={observation.pk}")
    assert page.status_code == 200 and page.context["selected"] is None
    page = client.get(f"/conversations/{observed_conversation.pk}/?reflection={reflection.pk}")
    assert page.status_code == 200 and page.context["obs_page"].reflection is None


def test_another_workspaces_api_key_member_and_escalation_are_not_found(
    login, other_workspace, foreign_conversation
):
    key, _ = api_key_create(
        workspace=other_workspace, actor=SYSTEM_ACTOR, name="theirs", scope="agent"
    )
    theirs = MembershipFactory(workspace=other_workspace, role=Role.VIEWER)
    client = login("admin")
    assert client.post(f"/settings/api-keys/{key.pk}/revoke/").status_code == 404
    assert client.post(f"/settings/members/{theirs.pk}/remove/", {"reason": "x"}).status_code == 404
    escalation = escalation_create(
        conversation=foreign_conversation, actor=SYSTEM_ACTOR, reason="help"
    )
    resolve = f"/escalations/{escalation.pk}/resolve/"
    assert client.post(resolve, {"note": "done"}).status_code == 404
