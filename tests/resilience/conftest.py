from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.memory.celery_workers import Broker, Worker, publishing_to
from tests.memory.conftest import fake_openai  # noqa: F401  (the scriptable model provider)


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    broker = Broker(tmp_path)
    with publishing_to(broker.url, broker.transport_options, broker.queue):
        yield broker


@pytest.fixture
def workers(broker) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.fixture
def llm_workspace(workspace, fake_openai):  # noqa: F811
    workspace.engine = "openai"
    workspace.llm_base_url = fake_openai.base_url
    workspace.observer_threshold = 20
    workspace.save()
    return workspace
