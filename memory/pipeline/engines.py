"""Which engine a workspace's pipeline runs use: its OpenAI-compatible provider when it
is set to ``openai``, the extractive engine (no provider at all) otherwise."""

from __future__ import annotations

from memory.engines.base import Engine
from tenancy.models import Workspace


def engine_for_workspace(workspace: Workspace) -> Engine:
    name = workspace.effective_engine
    if name == "openai":
        from memory.engines import openai_engine_from_settings

        return openai_engine_from_settings(
            base_url=workspace.llm_base_url or None,
            api_key=workspace.llm_api_key or None,
            model=workspace.llm_model or None,
        )
    from memory.engines.extractive import ExtractiveEngine

    return ExtractiveEngine()
