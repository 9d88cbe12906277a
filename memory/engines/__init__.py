"""Observer and Reflector engines. Each engine turns plain data into plain data; the
pipeline (``memory/pipeline/``: ``observer``, ``reflector``) loads rows, calls an engine,
and stores results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from memory.engines.openai_engine import OpenAIEngine


def openai_engine_from_settings(
    *, base_url: str | None = None, api_key: str | None = None, model: str | None = None
) -> OpenAIEngine:
    """The ``openai`` engine configured from settings; arguments (per-workspace values)
    override them, and ``model`` names the model for both the Observer and Reflector."""
    # Imported here so that loading the engines package does not import the openai SDK
    # for deployments that only use the extractive engine.
    from memory.engines.openai_engine import DEFAULT_BASE_URL, OpenAIEngine

    return OpenAIEngine(
        base_url=base_url or settings.MEMDESK_OPENAI_BASE_URL or DEFAULT_BASE_URL,
        api_key=api_key or settings.MEMDESK_OPENAI_API_KEY,
        observer_model=model or settings.MEMDESK_OPENAI_OBSERVER_MODEL,
        reflector_model=model or settings.MEMDESK_OPENAI_REFLECTOR_MODEL,
        timeout=float(settings.MEMDESK_OPENAI_TIMEOUT),
        max_retries=settings.MEMDESK_OPENAI_MAX_RETRIES,
        breaker_failures=settings.MEMDESK_OPENAI_BREAKER_FAILURES,
        breaker_cooldown=float(settings.MEMDESK_OPENAI_BREAKER_COOLDOWN),
    )
