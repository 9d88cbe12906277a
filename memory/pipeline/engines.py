"""Which engine a workspace's pipeline runs use: its OpenAI-compatible provider when it
is set to ``openai``, the extractive engine (no provider at all) otherwise; and the
circuit breaker that says whether that provider is down."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.engines.base import Engine
from tenancy.models import Workspace

if TYPE_CHECKING:
    from memory.engines.openai_engine import CircuitBreaker, OpenAIEngine


def _openai_engine(workspace: Workspace) -> OpenAIEngine:
    from memory.engines import openai_engine_from_settings

    return openai_engine_from_settings(
        base_url=workspace.llm_base_url or None,
        api_key=workspace.llm_api_key or None,
        model=workspace.llm_model or None,
    )


def engine_for_workspace(workspace: Workspace) -> Engine:
    if workspace.effective_engine == "openai":
        return _openai_engine(workspace)
    from memory.engines.extractive import ExtractiveEngine

    return ExtractiveEngine()


def provider_breaker(workspace: Workspace) -> CircuitBreaker | None:
    """The circuit breaker of the workspace's provider (shared by every workspace on
    the same base URL); None for the extractive engine, which calls no provider."""
    if workspace.effective_engine != "openai":
        return None
    return _openai_engine(workspace).breaker
