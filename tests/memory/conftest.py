from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.memory.celery_workers import Worker
from tests.memory.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A scriptable OpenAI-compatible server on 127.0.0.1, one per test."""
    server = FakeOpenAI()
    server.start()
    yield server
    server.stop()


# --- real Celery workers (tests/memory/test_pipeline_worker.py, tests/resilience/) ----------


@pytest.fixture
def workers(broker) -> Iterator[list[Worker]]:
    """Workers a test starts; stopped when it ends."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture
def llm_workspace(workspace, fake_openai):
    """The workspace on the fake provider, observing after 20 tokens."""
    workspace.engine = "openai"
    workspace.llm_base_url = fake_openai.base_url
    workspace.observer_threshold = 20
    workspace.save()
    return workspace
