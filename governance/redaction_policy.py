"""Moved to ``governance.redaction.policy``.

Migration 0003_message_scan imports ``redaction_policy_snapshot`` from this path: it stays
here for good. The others are re-exported for the importers outside governance that
still use this path."""

from __future__ import annotations

from governance.redaction.policy import (
    POLICY_FIELDS,
    POLICY_LIST_LIMIT,
    POLICY_VALUE_MAX_CHARS,
    redaction_policy_draft,
    redaction_policy_get_or_create,
    redaction_policy_snapshot,
    redaction_policy_update,
)

__all__ = [
    "POLICY_FIELDS",
    "POLICY_LIST_LIMIT",
    "POLICY_VALUE_MAX_CHARS",
    "redaction_policy_draft",
    "redaction_policy_get_or_create",
    "redaction_policy_snapshot",
    "redaction_policy_update",
]
