"""API-key scopes: agent < curator < compliance < admin, each with the rights of those
before it; a route a key's scope does not reach is a 403 naming the scope it needs."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.models import Conversation, Observation, Reflection
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from tenancy.models import ApiKey, Workspace
from tenancy.services import api_key_create
from tests.memory.factories import ObservationFactory, ReflectionFactory

SCOPES = ["agent", "curator", "compliance", "admin"]

C = "/v1/conversations/{c}"
# Representative routes of each family and the least scope that reaches them.
ROUTES = [
    ("get", "/v1/conversations", None, "agent"),
    ("post", "/v1/conversations", {}, "agent"),
    ("get", C, None, "agent"),
    ("post", f"{C}/messages", {"role": "user", "content": "hello"}, "agent"),
    ("get", f"{C}/messages", None, "agent"),
    ("get", f"{C}/context", None, "agent"),
    ("post", f"{C}/search", {"query": "hello"}, "agent"),
    ("post", f"{C}/observe", None, "agent"),
    ("post", f"{C}/reflect", None, "agent"),
    ("post", "/v1/runs/{run}/cancel", None, "agent"),
    ("get", f"{C}/observations", None, "agent"),
    ("get", f"{C}/observations/{{o}}/history", None, "agent"),
    ("get", f"{C}/reflections", None, "agent"),
    ("get", "/v1/workspace/settings", None, "agent"),
    ("get", "/v1/redaction/policy", None, "agent"),
    ("post", f"{C}/observations", {"text": "Prefers email.", "reason": "call"}, "curator"),
    ("patch", f"{C}/observations/{{o}}", {"content": "Prefers SMS.", "reason": "r"}, "curator"),
    ("delete", f"{C}/observations/{{o}}?reason=wrong", None, "curator"),
    ("post", f"{C}/observations/{{o}}/revert", {"version": 1, "reason": "r"}, "curator"),
    ("patch", f"{C}/reflections/{{r}}", {"priority": "high", "reason": "r"}, "curator"),
    ("delete", f"{C}/reflections/{{r}}?reason=wrong", None, "curator"),
    ("post", f"{C}/reflections/{{r}}/revert", {"version": 1, "reason": "r"}, "curator"),
    ("get", "/v1/audit/events", None, "compliance"),
    ("get", "/v1/audit/verify", None, "compliance"),
    ("get", "/v1/retention/policies", None, "compliance"),
    ("post", "/v1/retention/dry-run", {}, "compliance"),
    ("get", "/v1/legal-holds", None, "compliance"),
    ("get", "/v1/erasure-requests", None, "compliance"),
    ("get", "/v1/redaction/findings", None, "compliance"),
    ("patch", "/v1/redaction/policy", {"scoreThreshold": 0.9}, "compliance"),
    ("patch", "/v1/workspace/settings", {"fidelity": "detailed", "reason": "r"}, "admin"),
]


def _send(client: APIClient, method: str, path: str, body: object) -> object:
    if body is None:
        return getattr(client, method)(path)
    return getattr(client, method)(path, body, format="json")


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize(("method", "template", "body", "needed"), ROUTES)
def test_each_scope_reaches_its_routes_and_no_others(
    make_client, workspace, scope, method, template, body, needed
):
    conversation = conversation_create(workspace=workspace)
    observation = ObservationFactory(conversation=conversation, text="Prefers email.")
    reflection = ReflectionFactory(conversation=conversation)
    run = observer_schedule(conversation=conversation, trigger="manual")
    path = template.format(c=conversation.pk, o=observation.pk, r=reflection.pk, run=run.pk)
    client = make_client(workspace, scope=scope)
    events_before = AuditEvent.objects.count()

    response = _send(client, method, path, body)

    if SCOPES.index(scope) >= SCOPES.index(needed):
        assert response.status_code not in (401, 403), response.content
        assert response.status_code < 500
    else:
        assert response.status_code == 403, response.content
        assert response.json()["code"] == "forbidden"
        assert f"needs a {needed} API key" in response.json()["message"]
        assert f"--scope {needed}" in response.json()["message"]
        # Refused before anything changed.
        assert AuditEvent.objects.count() == events_before
        assert Observation.objects.get(pk=observation.pk).text == "Prefers email."
        assert Reflection.objects.filter(pk=reflection.pk).exists()


def test_an_agent_key_s_delete_is_audited_as_the_agent_s_with_the_key_s_name(workspace):
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="support-bot")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    conversation = conversation_create(workspace=workspace)

    assert client.delete(f"/v1/conversations/{conversation.pk}").status_code == 204

    assert not Conversation.objects.filter(pk=conversation.pk).exists()
    event = AuditEvent.objects.get(action="conversation.delete", target_id=str(conversation.pk))
    assert event.reason == "deleted by agent"
    assert event.actor_type == "api_key" and event.actor_role == "agent"
    assert event.after["deletedBy"]["apiKey"] == "support-bot"
    key = ApiKey.objects.get(name="support-bot")
    assert event.actor_id == event.after["deletedBy"]["apiKeyId"] == str(key.pk)


def test_a_curator_key_s_delete_keeps_the_reason_it_gave(make_client, workspace):
    conversation = conversation_create(workspace=workspace)
    curator = make_client(workspace, scope="curator")

    response = curator.delete(f"/v1/conversations/{conversation.pk}?reason=duplicate")

    assert response.status_code == 204
    event = AuditEvent.objects.get(action="conversation.delete", target_id=str(conversation.pk))
    assert event.reason == "duplicate" and event.actor_role == "curator"
    assert event.after is None


@pytest.mark.parametrize(
    ("arguments", "scope"),
    [
        ([], "agent"),
        (["--scope", "curator"], "curator"),
        (["--scope", "compliance"], "compliance"),
        (["--scope", "admin"], "admin"),
        (["--admin"], "admin"),
        (["--admin", "--scope", "admin"], "admin"),
    ],
)
def test_create_api_key_takes_a_scope(db, arguments, scope):
    out = StringIO()
    call_command("create_api_key", "--workspace", "newco", *arguments, stdout=out)
    raw_key = out.getvalue().strip()
    key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(raw_key))
    assert key.scope == scope
    created = AuditEvent.objects.get(action="api_key.create", target_id=str(key.pk))
    assert created.after["scope"] == scope


def test_create_api_key_refuses_an_unknown_scope_or_a_contradiction(db):
    with pytest.raises(CommandError, match="invalid choice: 'owner'"):
        call_command("create_api_key", "--workspace", "newco", "--scope", "owner")
    with pytest.raises(CommandError, match="--admin means --scope admin"):
        call_command("create_api_key", "--workspace", "newco", "--admin", "--scope", "curator")
    assert not Workspace.objects.filter(name="newco").exists()
    assert not ApiKey.objects.exists()
