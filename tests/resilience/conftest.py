from __future__ import annotations

# The scriptable model provider and real Celery workers, as the pipeline's worker tests
# have them.
from tests.memory.conftest import (  # noqa: F401
    fake_openai,
    llm_workspace,
    workers,
)
