"""Production switches read from the environment: HSTS, a TLS-ending proxy, CORS for the
agent API, per-key rate limits; and a bad value stops startup with a sentence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import cache
from django.test import override_settings

from config.settings.base import cache_settings

ROOT = Path(__file__).resolve().parent.parent.parent


def _settings(tmp_path: Path, *names: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMDESK_", "LOG_"))}
    clean.update(env, DJANGO_SETTINGS_MODULE="config.settings.base", MEMDESK_VAR_DIR=str(tmp_path))
    script = (
        "import django, json; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n, None) for n in {list(names)!r}}}))"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True
    )


def _read(tmp_path: Path, *names: str, **env: str) -> dict:
    result = _settings(tmp_path, *names, **env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_defaults_send_no_hsts_trust_no_proxy_and_allow_no_origin(tmp_path):
    values = _read(
        tmp_path,
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        "CORS_ALLOWED_ORIGINS",
        "MEMDESK_RATE_LIMIT_PER_MINUTE",
        "MEMDESK_RUN_WAIT_SECONDS",
    )
    assert values == {
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_PROXY_SSL_HEADER": None,
        "CORS_ALLOWED_ORIGINS": [],
        "MEMDESK_RATE_LIMIT_PER_MINUTE": 0,
        "MEMDESK_RUN_WAIT_SECONDS": 20,
    }


def test_the_environment_switches_them_on(tmp_path):
    values = _read(
        tmp_path,
        "SECURE_HSTS_SECONDS",
        "SECURE_PROXY_SSL_HEADER",
        "CORS_ALLOWED_ORIGINS",
        MEMDESK_HSTS_SECONDS="31536000",
        MEMDESK_BEHIND_TLS_PROXY="1",
        MEMDESK_CORS_ORIGINS="https://app.example.com, https://b.example.com/",
    )
    assert values == {
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "CORS_ALLOWED_ORIGINS": ["https://app.example.com", "https://b.example.com"],
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMDESK_HSTS_SECONDS": "a year"}, "MEMDESK_HSTS_SECONDS must be a whole number"),
        ({"MEMDESK_BEHIND_TLS_PROXY": "maybe"}, "MEMDESK_BEHIND_TLS_PROXY must be one of"),
        ({"MEMDESK_CORS_ORIGINS": "app.example.com"}, "MEMDESK_CORS_ORIGINS must be"),
        ({"MEMDESK_CORS_ORIGINS": "https://a.example.com/app"}, "no path"),
        ({"MEMDESK_RATE_LIMIT_PER_MINUTE": "-1"}, "MEMDESK_RATE_LIMIT_PER_MINUTE must be at least"),
        ({"LOG_FORMAT": "xml"}, "LOG_FORMAT must be plain or json"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL must be DEBUG"),
        ({"MEMDESK_RUN_WAIT_SECONDS": "30"}, "must be at least 5 s less than MEMDESK_WEB_TIMEOUT"),
        (
            {"MEMDESK_RUN_WAIT_SECONDS": "40", "MEMDESK_WEB_TIMEOUT": "60"},
            None,  # raised together, they are fine
        ),
    ],
)
def test_a_bad_production_setting_stops_startup_with_a_sentence(tmp_path, env, message):
    result = _settings(tmp_path, "DEBUG", **env)
    if message is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0
        assert message in result.stderr


# --- CORS --------------------------------------------------------------------------------------


@override_settings(CORS_ALLOWED_ORIGINS=["https://app.example.com"])
def test_cors_headers_only_for_a_configured_origin_and_only_on_the_api(api, client):
    allowed = api.get("/v1/conversations", HTTP_ORIGIN="https://app.example.com")
    assert allowed["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "X-Request-Id" in allowed["Access-Control-Expose-Headers"]
    other = api.get("/v1/conversations", HTTP_ORIGIN="https://evil.example.com")
    assert "Access-Control-Allow-Origin" not in other
    page = client.get("/accounts/login/", HTTP_ORIGIN="https://app.example.com")
    assert "Access-Control-Allow-Origin" not in page
    preflight = api.options(
        "/v1/conversations",
        HTTP_ORIGIN="https://app.example.com",
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type",
    )
    assert preflight.status_code == 200
    assert "authorization" in preflight["Access-Control-Allow-Headers"]


def test_no_cors_headers_when_no_origin_is_configured(api):
    response = api.get("/v1/conversations", HTTP_ORIGIN="https://app.example.com")
    assert "Access-Control-Allow-Origin" not in response


# --- rate limits -------------------------------------------------------------------------------


@pytest.fixture
def empty_cache():
    cache.clear()
    yield
    cache.clear()


@override_settings(MEMDESK_RATE_LIMIT_PER_MINUTE=3)
def test_a_key_past_its_limit_gets_429_with_retry_after(api, other_api, empty_cache):
    statuses = [api.get("/v1/conversations").status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    refused = api.get("/v1/conversations")
    assert refused.status_code == 429
    assert refused.json()["code"] == "rate_limited"
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert other_api.get("/v1/conversations").status_code == 200  # counted per key


def test_without_a_limit_nobody_is_refused(api, empty_cache):
    assert all(api.get("/v1/conversations").status_code == 200 for _ in range(5))


@override_settings(MEMDESK_RATE_LIMIT_PER_MINUTE=1)
def test_a_cache_outage_limits_nobody(api, settings, empty_cache):
    settings.CACHES = cache_settings("redis://127.0.0.1:1/0")  # nothing listens on port 1
    assert [api.get("/v1/conversations").status_code for _ in range(3)] == [200, 200, 200]


# --- Celery worker memory --------------------------------------------------------------------


def _celery_child_limit(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MEMDESK_", "CELERY_W"))}
    clean.update(env, DJANGO_SETTINGS_MODULE="config.settings.base", MEMDESK_VAR_DIR=str(tmp_path))
    script = (
        "import django; django.setup(); from config.celery import app; "
        "print(app.conf.worker_max_memory_per_child)"
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True
    )


@pytest.mark.parametrize(
    ("value", "limit_kib"), [(None, "1048576"), ("512", "524288"), ("0", "None")]
)
def test_a_worker_child_is_replaced_past_its_memory_limit(tmp_path, value, limit_kib):
    # What the worker reads (kibibytes), from megabytes in the environment; 0: no limit.
    env = {} if value is None else {"CELERY_WORKER_MAX_MEMORY_PER_CHILD_MB": value}
    result = _celery_child_limit(tmp_path, **env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == limit_kib


def test_a_worker_memory_limit_that_is_no_number_stops_startup(tmp_path):
    result = _celery_child_limit(tmp_path, CELERY_WORKER_MAX_MEMORY_PER_CHILD_MB="1 GB")
    assert result.returncode != 0
    assert "CELERY_WORKER_MAX_MEMORY_PER_CHILD_MB must be a whole number" in result.stderr
