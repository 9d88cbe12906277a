"""Writes to memory. Every change goes through one of these functions, which validates
it, writes it and its audit event in one transaction, and raises ``MemdeskError``.

One module per feature; this package re-exports their names for the code that still
imports them from ``memory.services``."""

from __future__ import annotations

from memory.services.conversations import (
    conversation_create,
    conversation_delete,
)
from memory.services.escalations import (
    ESCALATION_NOTE_MAX_CHARS,
    ESCALATION_REASON_MAX_CHARS,
    escalation_create,
    escalation_resolve,
)
from memory.services.grounding import grounding_backfill
from memory.services.idempotency import idempotent_write, request_fingerprint
from memory.services.messages import (
    MAX_BULK_MESSAGES,
    MessageInput,
    messages_append,
)
from memory.services.observations import (
    observation_create,
    observation_delete,
    observation_revert,
    observation_update,
)
from memory.services.pins import pin_create, pin_delete
from memory.services.reasoning import reasoning_step_record, tool_call_record
from memory.services.reflections import reflection_delete, reflection_revert, reflection_update
from memory.services.workspace_settings import (
    MAX_CONTEXT_MAX_TOKENS,
    UNCHANGED,
    workspace_settings_update,
)
from memory.services.workspaces import api_key_create, api_key_revoke, workspace_get_or_create

__all__ = [
    "ESCALATION_NOTE_MAX_CHARS",
    "ESCALATION_REASON_MAX_CHARS",
    "MAX_BULK_MESSAGES",
    "MAX_CONTEXT_MAX_TOKENS",
    "MessageInput",
    "UNCHANGED",
    "api_key_create",
    "api_key_revoke",
    "conversation_create",
    "conversation_delete",
    "escalation_create",
    "escalation_resolve",
    "grounding_backfill",
    "idempotent_write",
    "messages_append",
    "observation_create",
    "observation_delete",
    "observation_revert",
    "observation_update",
    "pin_create",
    "pin_delete",
    "reasoning_step_record",
    "reflection_delete",
    "reflection_revert",
    "reflection_update",
    "request_fingerprint",
    "tool_call_record",
    "workspace_get_or_create",
    "workspace_settings_update",
]
