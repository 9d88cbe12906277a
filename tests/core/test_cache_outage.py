"""The cache is an optimisation: with Redis unreachable, context reads still answer, with
the same bytes, and the provider circuit breaker lets calls through instead of failing."""

from __future__ import annotations

import logging

import pytest
from django.core.cache import cache

from core import cache as soft_cache
from memory.engines.openai_engine import CircuitBreaker
from tests.resilience.redis_server import DEAD_REDIS


@pytest.fixture
def late_order_conversation_id(api) -> str:
    """The id of a conversation with one message, made over the API."""
    conversation = api.post("/v1/conversations", {"userId": "u1"}, format="json").json()
    path = f"/v1/conversations/{conversation['id']}/messages"
    api.post(path, {"role": "user", "content": "My order 123 is late."}, format="json")
    return conversation["id"]


@pytest.mark.parametrize("fmt", ["json", "text", "messages"])
def test_context_reads_answer_while_the_cache_is_down(
    api, late_order_conversation_id, settings, caplog, monkeypatch, fmt
):
    path = f"/v1/conversations/{late_order_conversation_id}/context?format={fmt}"
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
    assert "ConnectionError" in warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING and warnings[0].exc_info is None
    assert "order 123" not in caplog.text
    assert "Traceback" not in caplog.text


def test_the_breaker_lets_calls_through_while_the_cache_is_down(settings):
    settings.CACHES = DEAD_REDIS
    breaker = CircuitBreaker(
        base_url="http://model.invalid/v1", failure_threshold=2, cooldown=30, trial_ttl=5
    )
    assert breaker.before_call() is False  # closed: the call goes ahead
    assert breaker.record_failure(trial=False) is False
    assert breaker.is_open() is False
    breaker.record_success()


def test_the_warning_names_the_operation_and_the_error_never_a_key(settings, caplog, monkeypatch):
    settings.CACHES = DEAD_REDIS
    monkeypatch.setattr(soft_cache, "_last_warning", 0.0)
    with caplog.at_level(logging.WARNING, logger="core.cache"):
        assert cache.get_many(["memdesk:user:dana@example.com"]) == {}
        cache.set("memdesk:user:dana@example.com", 1, 60)
        assert cache.get("memdesk:user:dana@example.com", "miss") == "miss"

    assert [r.getMessage() for r in caplog.records] == [
        "cache unavailable (get_many: ConnectionError); serving without it"
    ]
    assert "dana" not in caplog.text


def test_add_and_incr_answer_what_the_caller_asks_while_the_cache_is_down(settings):
    settings.CACHES = DEAD_REDIS
    assert soft_cache.cache_add("k", 1, 60, when_down=True) is True
    assert soft_cache.cache_add("k", 1, 60, when_down=False) is False
    assert soft_cache.cache_incr("k") is None
    cache.delete_many(["k"])
