from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from memory.models import Workspace
from memory.services import api_key_create, workspace_get_or_create


@pytest.fixture
def workspace(db) -> Workspace:
    return workspace_get_or_create(name="acme")


@pytest.fixture
def other_workspace(db) -> Workspace:
    return workspace_get_or_create(name="globex")


@pytest.fixture
def make_client(db) -> Callable[[Workspace], APIClient]:
    """An API client authenticated with a fresh key of the given workspace."""

    def make(workspace: Workspace, *, scope: str = "agent") -> APIClient:
        _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope=scope)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        client.raw_key = raw_key  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def api(make_client, workspace) -> APIClient:
    return make_client(workspace)


@pytest.fixture
def other_api(make_client, other_workspace) -> APIClient:
    return make_client(other_workspace)


@pytest.fixture
def requires_postgres(db) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")
