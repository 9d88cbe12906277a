"""Where the redaction evaluation data lives, for the tests that score against it."""

from __future__ import annotations

from pathlib import Path

import pytest

# The evaluation data lives beside the project, never in it (../shared/data/README.md).
DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def data_file(relative: str) -> Path:
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"evaluation data not found at {path} (the shared data folder is absent)")
    return path
