"""The NAMS clients' own conformance checks, run against pytest-django's live server.

Both live in ``../shared/conformance/`` beside the checkout (CI lays a copy there); they
are other people's code and run unchanged, each in a process of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.actors import SYSTEM_ACTOR
from tenancy.models import Workspace
from tenancy.services import api_key_create

CONFORMANCE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "conformance"


@pytest.fixture
def conformance_dir() -> Path:
    if not CONFORMANCE_DIR.is_dir():
        pytest.skip(f"the NAMS conformance checks are not at {CONFORMANCE_DIR}")
    return CONFORMANCE_DIR


@pytest.fixture
def live_key(live_server, workspace: Workspace) -> str:
    """An agent key of the acme workspace, for a client in another process."""
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="conformance")
    return raw_key


# A real Celery worker runs what the live server queues (its request threads leave runs
# to the workers, as a threaded production server does).
from tests.memory.conftest import workers  # noqa: E402, F401
