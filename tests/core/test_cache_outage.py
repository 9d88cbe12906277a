"""The cache is an optimisation: with Redis unreachable, context reads still answer, with
the same bytes, and the provider circuit breaker lets calls through instead of failing."""

from __future__ import annotations

import logging

import pytest

from core import cache as soft_cache
from memory.engines.openai_engine import CircuitBreaker

# Nothing listens on port 1: every cache call fails at once with a connection error.
DEAD_REDIS = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": "redis://127.0.0.1:1/0",
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}


@pytest.fixture
def conversation_id(api) -> str:
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()
    path = f"/v1/conversations/{conversation['id']}/messages"
    api.post(path, {"role": "user", "content": "My order 123 is late."}, format="json")
    return conversation["id"]


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
def test_context_reads_answer_while_the_cache_is_down(
    api, conversation_id, settings, caplog, monkeypatch, fmt
):
    path = f"/v1/conversations/{conversation_id}/context?format={fmt}"
    before = api.get(path)
    assert before.status_code == 200

    settings.CACHES = DEAD_REDIS
    monkeypatch.setattr(soft_cache, "_last_warning", 0.0)
    with caplog.at_level(logging.WARNING, logger="core.cache"):
        during = [api.get(path) for _ in range(3)]

    assert [r.status_code for r in during] == [200, 200, 200]
    assert {r.content for r in during} == {before.content}
    warnings = [r for r in caplog.records if r.name == "core.cache"]
    assert len(warnings) == 1  # one line a minute, not one per request
    assert "cache unavailable" in warnings[0].getMessage()
    assert "order 123" not in caplog.text


def test_the_breaker_lets_calls_through_while_the_cache_is_down(settings):
    settings.CACHES = DEAD_REDIS
    breaker = CircuitBreaker(
        base_url="http://model.invalid/v1", failure_threshold=2, cooldown=30, trial_ttl=5
    )
    assert breaker.before_call() is False  # closed: the call goes ahead
    assert breaker.record_failure(trial=False) is False
    assert breaker.is_open() is False
    breaker.record_success()
