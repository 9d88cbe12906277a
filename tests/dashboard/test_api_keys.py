"""/settings/api-keys/: creating a key (shown once) and revoking it, admins only."""

from __future__ import annotations

import json
import re

import pytest

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from tenancy.models import ApiKey
from tenancy.services import api_key_create

HX = {"HTTP_HX_REQUEST": "true"}


def test_an_admin_creates_a_key_and_sees_the_raw_key_once(login, workspace):
    client = login("admin")
    response = client.post("/settings/api-keys/", {"name": "support bot", "scope": "agent"})
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    raw_key = re.search(
        r'id="raw-key" type="text" readonly value="(md_[^"]+)"', response.content.decode()
    ).group(1)
    api_key = ApiKey.objects.get(name="support bot")
    # Only the hash is stored: no column holds the raw key.
    assert api_key.key_hash == ApiKey.hash_raw_key(raw_key)
    assert raw_key not in json.dumps(list(ApiKey.objects.values()), default=str)
    assert raw_key.startswith(api_key.prefix)
    # Never shown again.
    listing = client.get("/settings/api-keys/").content.decode()
    assert raw_key not in listing and f"{api_key.prefix}…" in listing
    # And it works against the agent API.
    from rest_framework.test import APIClient

    agent = APIClient()
    agent.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert agent.get("/v1/conversations").status_code == 200
    event = AuditEvent.objects.get(action="api_key.create")
    assert event.actor_type == "user" and event.actor_role == "admin"
    assert raw_key not in json.dumps(event.after)


def test_an_admin_creates_a_curator_key_that_may_edit_memory(login, workspace):
    client = login("admin")
    page = client.get("/settings/api-keys/").content.decode()
    for scope in ("agent", "curator", "compliance", "admin"):
        assert f'<option value="{scope}"' in page
    response = client.post("/settings/api-keys/", {"name": "curation desk", "scope": "curator"})
    assert response.status_code == 201
    raw_key = re.search(
        r'id="raw-key" type="text" readonly value="(md_[^"]+)"', response.content.decode()
    ).group(1)
    api_key = ApiKey.objects.get(name="curation desk")
    assert api_key.scope == "curator"
    event = AuditEvent.objects.get(action="api_key.create", target_id=str(api_key.pk))
    assert event.after["scope"] == "curator" and event.actor_type == "user"

    from rest_framework.test import APIClient

    curator = APIClient()
    curator.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    conversation = curator.post("/v1/conversations", {}, format="json").json()["id"]
    created = curator.post(
        f"/v1/conversations/{conversation}/observations",
        {"text": "Prefers email.", "reason": "call notes"},
        format="json",
    )
    assert created.status_code == 201
    assert curator.get("/v1/audit/events").status_code == 403


def test_a_key_of_an_unknown_scope_is_refused_next_to_the_field(login):
    response = login("admin").post("/settings/api-keys/", {"name": "x", "scope": "owner"})
    assert response.status_code == 422
    assert b'id="id_scope_error"' in response.content
    assert not ApiKey.objects.exists()


def test_creating_a_key_with_htmx_returns_the_keys_section(login):
    response = login("admin").post("/settings/api-keys/", {"name": "bot", "scope": "admin"}, **HX)
    html = response.content.decode()
    assert response.status_code == 201
    assert html.lstrip().startswith('<div id="keys">') and "Key created: copy it now" in html


def test_a_key_needs_a_name_shown_next_to_the_field(login):
    response = login("admin").post("/settings/api-keys/", {"name": "", "scope": "agent"})
    assert response.status_code == 422
    assert b'<ul class="errorlist" id="id_name_error">' in response.content
    assert not ApiKey.objects.exists()


@pytest.mark.parametrize("role", ["viewer", "reviewer", "compliance"])
def test_only_admins_manage_keys(login, role, workspace):
    api_key, _ = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR)
    client = login(role)
    for response in (
        client.get("/settings/api-keys/"),
        client.post("/settings/api-keys/", {"name": "x", "scope": "agent"}),
        client.post(f"/settings/api-keys/{api_key.pk}/revoke/"),
    ):
        assert response.status_code == 403
        assert b"To manage API keys" in response.content
        assert b'<strong class="required-role">admin</strong>' in response.content
    api_key.refresh_from_db()
    assert api_key.is_active and ApiKey.objects.count() == 1


def test_revoking_a_key(login, workspace):
    api_key, _ = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="old")
    client = login("admin")
    row = client.post(f"/settings/api-keys/{api_key.pk}/revoke/", **HX)
    assert row.status_code == 200
    assert row.content.decode().lstrip().startswith(f'<tr id="key-{api_key.pk}">')
    assert b"revoked" in row.content
    api_key.refresh_from_db()
    assert not api_key.is_active
    assert AuditEvent.objects.filter(action="api_key.revoke").count() == 1
    again = client.post(f"/settings/api-keys/{api_key.pk}/revoke/")
    assert again.status_code == 302 and again["Location"] == "/settings/api-keys/"


def test_another_workspaces_key_is_not_found(login, other_workspace):
    theirs, _ = api_key_create(workspace=other_workspace, actor=SYSTEM_ACTOR)
    response = login("admin").post(f"/settings/api-keys/{theirs.pk}/revoke/")
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.is_active


def test_no_keys_yet_says_what_to_do(login):
    html = login("admin").get("/settings/api-keys/").content.decode()
    assert "No keys yet" in html
