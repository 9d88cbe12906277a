"""Management commands and settings that other tools and operators rely on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from memory.tokens import token_count
from tenancy.models import ApiKey, Workspace

ROOT = Path(__file__).resolve().parents[2]


def test_create_api_key_prints_only_a_working_raw_key(db):
    out = StringIO()
    call_command("create_api_key", "--workspace", "newco", stdout=out)
    raw_key = out.getvalue().strip()
    assert "\n" not in raw_key and raw_key.startswith("md_")
    assert Workspace.objects.filter(name="newco").exists()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    assert client.get("/v1/conversations").status_code == 200


def test_create_api_key_reuses_the_workspace(db):
    call_command("create_api_key", "--workspace", "newco", stdout=StringIO())
    call_command("create_api_key", "--workspace", "newco", "--admin", stdout=StringIO())
    assert Workspace.objects.filter(name="newco").count() == 1
    assert sorted(ApiKey.objects.values_list("scope", flat=True)) == ["admin", "agent"]


def test_create_api_key_refuses_a_bad_workspace_name(db):
    with pytest.raises(CommandError, match="letters, digits"):
        call_command("create_api_key", "--workspace", "no spaces please", stdout=StringIO())


def test_token_counts_match_cl100k_base():
    # Reference values of the cl100k_base encoding (as used by GPT-4 and GPT-3.5).
    assert token_count("hello world") == 2
    assert token_count("") == 0
    assert token_count("<|endoftext|>") > 1  # typed by a user: text, not a special token


def _django_check(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _settings(**env: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    clean.update(env, DJANGO_SETTINGS_MODULE="config.settings.base")
    script = (
        "import django, json; django.setup(); from django.conf import settings; "
        "print(json.dumps({'debug': settings.DEBUG, 'key': settings.SECRET_KEY}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=clean, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_it_runs_as_a_product_with_a_secret_generated_once(tmp_path):
    first = _settings(MEMDESK_VAR_DIR=str(tmp_path))
    assert first["debug"] is False
    key_file = tmp_path / "secret_key"
    assert key_file.read_text().strip() == first["key"]
    assert len(first["key"]) >= 50
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert _settings(MEMDESK_VAR_DIR=str(tmp_path))["key"] == first["key"]  # kept
    assert _settings(MEMDESK_VAR_DIR=str(tmp_path), SECRET_KEY="from-env" * 8)["key"] == (
        "from-env" * 8
    )
    assert _settings(MEMDESK_VAR_DIR=str(tmp_path), DJANGO_DEBUG="1")["debug"] is True


def test_deploy_check_warns_when_the_secret_key_is_the_generated_one(tmp_path):
    result = _django_check(
        "--deploy", MEMDESK_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings.base"
    )
    assert "memdesk.W003" in result.stderr + result.stdout
    assert "Set SECRET_KEY" in result.stderr + result.stdout
    with_key = _django_check(
        "--deploy",
        MEMDESK_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="config.settings.base",
        SECRET_KEY="k" * 60,
    )
    assert "memdesk.W003" not in with_key.stderr + with_key.stdout


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_DEBUG": "maybe"}, "DJANGO_DEBUG must be one of"),
        (
            {"MEMDESK_OBSERVER_THRESHOLD": "lots"},
            "MEMDESK_OBSERVER_THRESHOLD must be a whole number",
        ),
        (
            {"MEMDESK_OBSERVER_FIDELITY": "verbose"},
            "MEMDESK_OBSERVER_FIDELITY must be compact, balanced or detailed; got 'verbose'",
        ),
        ({"DATABASE_URL": "mongodb://x/y"}, "DATABASE_URL is not a database URL"),
        ({"CACHE_URL": "memcached://x"}, "CACHE_URL must be empty"),
        ({"CELERY_TASK_SOFT_TIME_LIMIT": "10m"}, "CELERY_TASK_SOFT_TIME_LIMIT must be a whole"),
        (
            {"CELERY_TASK_SOFT_TIME_LIMIT": "300", "CELERY_TASK_TIME_LIMIT": "300"},
            "CELERY_TASK_TIME_LIMIT (300 s) must be greater than",
        ),
        (
            {"MEMDESK_RUN_HEARTBEAT_SECONDS": "0"},
            "MEMDESK_RUN_HEARTBEAT_SECONDS must be at least 1",
        ),
        ({"MEMDESK_RUN_HEARTBEAT_SECONDS": "900"}, "MEMDESK_RUN_HEARTBEAT_SECONDS must be at most"),
        (
            {"MEMDESK_RETENTION_SWEEP_TIME_LIMIT": "21600"},
            "MEMDESK_RETENTION_SWEEP_TIME_LIMIT (21600 s) must be at most 18000",
        ),
        (
            {"MEMDESK_IDEMPOTENCY_TTL_HOURS": "0"},
            "MEMDESK_IDEMPOTENCY_TTL_HOURS must be at least 1",
        ),
        (
            {"MEMDESK_IDEMPOTENCY_TTL_HOURS": "a day"},
            "MEMDESK_IDEMPOTENCY_TTL_HOURS must be a whole number",
        ),
        (
            {"MEMDESK_IDEMPOTENCY_TTL_HOURS": "100000"},
            "MEMDESK_IDEMPOTENCY_TTL_HOURS must be at most 8760",
        ),
    ],
)
def test_a_bad_setting_stops_startup_with_a_sentence_saying_what_to_set(env, message):
    result = _django_check(DJANGO_SETTINGS_MODULE="config.settings.base", **env)
    assert result.returncode != 0
    assert message in result.stderr
