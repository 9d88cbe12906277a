"""``manage.py mcp_server``: the real ``mcp`` client starts it as a subprocess on the test
database and talks to it over stdin/stdout, as an MCP client configuration does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from tenancy.services import api_key_create, api_key_revoke
from tests.memory.mcp_clients import (
    ROOT,
    agent_session,
    assert_agent_session_recorded,
    over_stdio,
    server_environment,
)

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_agent_keeps_its_memory_over_stdio(workspace, tmp_path):
    api_key, raw_key = api_key_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="desktop-agent"
    )
    answers = over_stdio(server_environment(tmp_path, raw_key), agent_session)
    assert_agent_session_recorded(answers, api_key)
    # Each call is a request of its own in the audit trail.
    event = AuditEvent.objects.get(action="pin.create")
    assert event.request_id.startswith("mcp-")


def _start(tmp_path, raw_key: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "mcp_server"],
        cwd=ROOT,
        env=server_environment(tmp_path, raw_key),
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_it_will_not_start_without_a_usable_key(workspace, tmp_path):
    api_key, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR)
    api_key_revoke(api_key=api_key, actor=SYSTEM_ACTOR)

    missing = _start(tmp_path, None)
    unknown = _start(tmp_path, "md_not-a-key")
    revoked = _start(tmp_path, raw_key)

    assert missing.returncode != 0
    assert "Set MEMDESK_API_KEY to a Memdesk API key" in missing.stderr
    assert unknown.returncode != 0
    assert "MEMDESK_API_KEY: Unknown API key." in unknown.stderr
    assert revoked.returncode != 0
    assert "MEMDESK_API_KEY: This API key was revoked." in revoked.stderr
    # Standard output is the protocol's: nothing was written to it.
    assert missing.stdout == unknown.stdout == revoked.stdout == ""
