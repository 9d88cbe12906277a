"""API keys and workspaces: who may call, and that no workspace sees another's data."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.models import Conversation, Message, Observation
from tenancy.models import ApiKey
from tenancy.services import api_key_create, api_key_revoke
from tests.memory.factories import ObservationFactory

ROUTES = [
    ("get", "/v1/conversations/{c}"),
    ("delete", "/v1/conversations/{c}"),
    ("get", "/v1/conversations/{c}/messages"),
    ("post", "/v1/conversations/{c}/messages"),
    ("post", "/v1/conversations/{c}/messages/bulk"),
    ("post", "/v1/conversations/{c}/search"),
    ("get", "/v1/conversations/{c}/context"),
    ("get", "/v1/conversations/{c}/observations"),
    ("post", "/v1/conversations/{c}/observations"),
    ("get", "/v1/conversations/{c}/observations/{o}"),
    ("patch", "/v1/conversations/{c}/observations/{o}"),
    ("delete", "/v1/conversations/{c}/observations/{o}"),
    ("get", "/v1/conversations/{c}/observations/{o}/history"),
    ("get", "/v1/conversations/{c}/reflections"),
    ("get", "/v1/conversations/{c}/extraction-status"),
]
BODIES = {
    "/v1/conversations/{c}/messages": {"role": "user", "content": "intruder"},
    "/v1/conversations/{c}/messages/bulk": {"messages": [{"role": "user", "content": "intruder"}]},
    "/v1/conversations/{c}/search": {"query": "secret"},
    "/v1/conversations/{c}/observations": {"text": "planted", "reason": "x"},
    "/v1/conversations/{c}/observations/{o}": {"text": "changed", "reason": "x"},
}


@pytest.fixture
def victim(api) -> tuple[str, str]:
    conversation_id = api.post("/v1/conversations", {"userId": "alice"}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "secret plans"},
        format="json",
    )
    observation = ObservationFactory(conversation_id=conversation_id, text="secret note")
    return conversation_id, str(observation.pk)


@pytest.mark.parametrize(("method", "template"), ROUTES)
def test_another_workspace_gets_404_on_every_route_and_changes_nothing(
    make_client, other_workspace, victim, method, template
):
    # A curator key reaches every route here, so only the workspace can stop it.
    other_api = make_client(other_workspace, scope="curator")
    conversation_id, observation_id = victim
    path = template.format(c=conversation_id, o=observation_id)
    response = getattr(other_api, method)(path, BODIES.get(template, {}), format="json")
    if (method, template) == ("delete", "/v1/conversations/{c}"):
        # Idempotent, as NAMS clients expect: 204, as for an id no workspace holds.
        assert (response.status_code, response.content) == (204, b"")
    else:
        assert response.status_code == 404, response.content
        assert response.json()["code"] == "not_found"
    assert Conversation.objects.filter(pk=conversation_id).exists()
    assert list(
        Message.objects.filter(conversation_id=conversation_id).values_list("content", flat=True)
    ) == ["secret plans"]
    assert Observation.objects.get(pk=observation_id).text == "secret note"


def test_another_workspace_does_not_see_conversations_in_its_list(api, other_api, victim):
    assert other_api.get("/v1/conversations").json()["conversations"] == []
    assert len(api.get("/v1/conversations").json()["conversations"]) == 1


def test_an_observation_of_another_conversation_is_404(api, victim):
    _, observation_id = victim
    mine = api.post("/v1/conversations", {}, format="json").json()["id"]
    response = api.get(f"/v1/conversations/{mine}/observations/{observation_id}")
    assert response.status_code == 404


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer ", "Basic abc", "Bearer md_not_a_real_key", "md_raw_key"]
)
def test_missing_or_bad_key_is_a_401_json_body(db, header):
    client = APIClient()
    if header is not None:
        client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/v1/conversations")
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["code"] == "unauthorized"
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_key_is_refused(workspace):
    api_key, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.get("/v1/conversations").status_code == 200
    api_key_revoke(api_key=api_key, actor=SYSTEM_ACTOR)
    response = client.get("/v1/conversations")
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]
    assert AuditEvent.objects.filter(action="api_key.revoke", target_id=str(api_key.pk)).exists()


def test_only_a_hash_of_the_key_is_stored_and_the_prefix_identifies_it(workspace):
    api_key, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="bot")
    stored = ApiKey.objects.get(pk=api_key.pk)
    assert raw_key not in {stored.key_hash, stored.prefix, stored.name}
    assert raw_key.startswith(stored.prefix)
    assert stored.key_hash == ApiKey.hash_raw_key(raw_key)


def test_use_of_a_key_is_recorded(api, workspace):
    assert ApiKey.objects.get(workspace=workspace).last_used_at is None
    api.get("/v1/conversations")
    assert ApiKey.objects.get(workspace=workspace).last_used_at is not None


def test_x_workspace_id_must_name_the_keys_workspace(api, workspace, other_workspace):
    assert api.get("/v1/conversations", HTTP_X_WORKSPACE_ID=str(workspace.id)).status_code == 200
    assert api.get("/v1/conversations", HTTP_X_WORKSPACE_ID=workspace.name).status_code == 200
    response = api.get("/v1/conversations", HTTP_X_WORKSPACE_ID=str(other_workspace.id))
    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
