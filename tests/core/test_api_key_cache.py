"""API keys are authenticated from a short-lived cache (shared, and each process's own):
revoking through the service ends a key at once in that process and within seconds in
the others, a revocation that bypasses it within the caches' lifetime, and a cache
outage changes nothing but speed."""

from __future__ import annotations

import time
from datetime import timedelta

from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from core.actors import SYSTEM_ACTOR
from tenancy import auth
from tenancy.models import DEFAULT_CONTEXT_MAX_TOKENS, ApiKey
from tenancy.services import api_key_revoke
from tests.resilience.redis_server import DEAD_REDIS

SETTINGS = "/v1/workspace/settings"


def _key(client) -> ApiKey:
    return ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(client.raw_key))


def _expire_cached_key(client) -> None:
    """What the passing of API_KEY_CACHE_SECONDS does to a cached key."""
    key_hash = _key(client).key_hash
    cache.delete(ApiKey.cache_key_of(key_hash))
    auth._LOCAL_KEYS.pop(key_hash, None)


def test_a_key_revoked_through_the_service_is_refused_at_once(api):
    assert api.get(SETTINGS).status_code == 200  # the key is in the cache now

    api_key_revoke(api_key=_key(api), actor=SYSTEM_ACTOR)

    response = api.get(SETTINGS)
    assert response.status_code == 401
    assert "revoked" in response.json()["message"]


def test_a_key_revoked_in_another_process_is_refused_here_within_seconds(api, monkeypatch):
    assert api.get(SETTINGS).status_code == 200  # this process keeps the key now
    # Another web process revokes it: the row and the shared cache change, not this
    # process's copy.
    ApiKey.objects.filter(pk=_key(api).pk).update(revoked_at=timezone.now())
    cache.delete(ApiKey.cache_key_of(_key(api).key_hash))

    assert api.get(SETTINGS).status_code == 200
    later = time.monotonic() + auth.API_KEY_LOCAL_SECONDS + 0.01
    monkeypatch.setattr(auth.time, "monotonic", lambda: later)
    assert api.get(SETTINGS).status_code == 401


def test_a_revocation_that_bypasses_the_service_ends_when_the_cached_key_expires(api):
    assert api.get(SETTINGS).status_code == 200
    ApiKey.objects.filter(pk=_key(api).pk).update(revoked_at=timezone.now())

    assert api.get(SETTINGS).status_code == 200  # served from the cache, for seconds
    _expire_cached_key(api)

    assert api.get(SETTINGS).status_code == 401


def test_a_cached_key_costs_no_query_and_last_use_is_written_once_a_minute(api):
    api.get(SETTINGS)
    first_use = _key(api).last_used_at
    assert first_use is not None

    with CaptureQueriesContext(connection) as queries:
        api.get(SETTINGS)
    assert not [q for q in queries.captured_queries if "memory_apikey" in q["sql"]]
    assert _key(api).last_used_at == first_use

    a_minute_ago = first_use - timedelta(minutes=2)
    ApiKey.objects.filter(pk=_key(api).pk).update(last_used_at=a_minute_ago)
    _expire_cached_key(api)
    api.get(SETTINGS)
    assert _key(api).last_used_at > a_minute_ago


def test_a_workspace_change_is_seen_at_once_though_the_key_is_cached(api, workspace):
    assert api.get(SETTINGS).json()["contextMaxTokens"] == DEFAULT_CONTEXT_MAX_TOKENS
    workspace.context_max_tokens = 4000
    workspace.save()

    assert api.get(SETTINGS).json()["contextMaxTokens"] == 4000


def test_keys_authenticate_and_revoked_keys_are_refused_while_the_cache_is_down(
    api, make_client, workspace, settings
):
    revoked = make_client(workspace)
    api_key_revoke(api_key=_key(revoked), actor=SYSTEM_ACTOR)
    settings.CACHES = DEAD_REDIS

    assert api.get(SETTINGS).status_code == 200
    assert revoked.get(SETTINGS).status_code == 401


def test_a_wrong_x_workspace_id_is_refused_for_a_cached_key(api, workspace, other_workspace):
    api.get(SETTINGS)

    assert api.get(SETTINGS, HTTP_X_WORKSPACE_ID=workspace.name).status_code == 200
    assert api.get(SETTINGS, HTTP_X_WORKSPACE_ID=str(workspace.pk)).status_code == 200
    assert api.get(SETTINGS, HTTP_X_WORKSPACE_ID=other_workspace.name).status_code == 403
    assert api.get(SETTINGS, HTTP_X_WORKSPACE_ID=str(other_workspace.pk)).status_code == 403


def test_a_cached_context_read_is_one_query(api, ledger_buffered):
    # The versions the body depends on, with the workspace's default budget and whether
    # its redaction policy lets agents see re-identified memory; the key comes from the
    # cache, the body from the worker's own copy; the read ledger's row is written after
    # the response, with others.
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    path = f"/v1/conversations/{conversation_id}/context"
    first = api.get(path)

    with CaptureQueriesContext(connection) as queries:
        again = api.get(path)

    assert again.status_code == 200 and again.content == first.content
    assert ledger_buffered.waiting() == 2
    [sql] = [q["sql"] for q in queries.captured_queries]
    assert "memory_conversation" in sql and "governance_redactionpolicy" in sql


def test_a_cached_context_follows_the_workspace_budget_at_once(api, workspace):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages",
        {"role": "user", "content": "word " * 400},
        format="json",
    )
    path = f"/v1/conversations/{conversation_id}/context"
    assert len(api.get(path).json()["recentMessages"]) == 1

    workspace.context_max_tokens = 50
    workspace.save()

    body = api.get(path).json()
    assert body["recentMessages"] == []
    assert body["maxTokens"] == 50


def test_a_message_write_reads_the_policy_with_the_conversation(api):
    # Whether to redact at ingest comes in the conversation's own query; the seq numbers
    # are taken and read back in one statement.
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    path = f"/v1/conversations/{conversation_id}/messages/bulk"
    api.post(path, {"messages": [{"role": "user", "content": "warm"}]}, format="json")

    with CaptureQueriesContext(connection) as queries:
        response = api.post(
            path, {"messages": [{"role": "user", "content": "hello"}] * 3}, format="json"
        )

    assert response.status_code == 201
    sql = [q["sql"] for q in queries.captured_queries]
    assert [s for s in sql if "governance_redactionpolicy" in s] == sql[:1]
    [update] = [s for s in sql if "memory_conversation" in s and s.startswith("UPDATE")]
    assert "RETURNING" in update
    assert not [s for s in sql[1:] if s.startswith('SELECT "memory_conversation"."last_seq"')]
