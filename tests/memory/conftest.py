from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.memory.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A scriptable OpenAI-compatible server on 127.0.0.1, one per test."""
    server = FakeOpenAI()
    server.start()
    yield server
    server.stop()
