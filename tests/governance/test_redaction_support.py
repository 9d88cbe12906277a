"""Helpers shared by the redaction tests (this module holds no test)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governance.models import RedactionPolicy
from governance.redaction import presidio
from governance.redaction.policy import redaction_policy_get_or_create
from memory.engines.base import DraftReflection, SourceObservation
from tenancy.models import Workspace

# The evaluation data lives beside the project, never in it (../shared/data/README.md).
DATA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def data_file(relative: str) -> Path:
    path = DATA_DIR / relative
    if not path.exists():
        pytest.skip(f"evaluation data not found at {path} (the shared data folder is absent)")
    return path


def set_policy(workspace: Workspace, **fields: Any) -> RedactionPolicy:
    """Set policy fields directly (the API tests go through the service instead)."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    for name, value in fields.items():
        setattr(policy, name, value)
    policy.version += 1
    policy.save()
    return policy


def detected_values(texts: list[str], policy: RedactionPolicy) -> set[str]:
    """Every value the policy's detectors find in ``texts``, applied or pending review."""
    spec = presidio.PolicySpec.of(policy)
    found = presidio.engine().detect(texts, spec=spec)
    return {text[d.start : d.end] for text, ds in zip(texts, found, strict=True) for d in ds}


@dataclass
class EchoEngine:
    """A Reflector that copies every observation it reads into its own reflection: what
    the gate lets through is exactly what gets stored."""

    name = "extractive"
    model = ""
    prompt_version = ""
    seen: list[str] | None = None

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        raise AssertionError("not used")

    def reflect(self, observations: list[SourceObservation], *, now):
        self.seen = [o.text for o in observations]
        return [
            DraftReflection(
                text=o.text,
                priority=o.priority,
                referenced_at=None,
                source_observation_ids=[o.id],
            )
            for o in observations
        ]
