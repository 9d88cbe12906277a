"""The audit trail: the writer (``writer``), the signed checkpoints (``checkpoints``), the
chain's verification (``verify``) and the audited admin (``admin``).

Migration 0003_message_scan imports ``GENESIS_HASH``, ``_json_safe``, ``audit_event_hash``
and ``audit_record`` from ``governance.audit``: those four stay here for good. The others
are re-exported for the importers outside governance that still use this path."""

from __future__ import annotations

from governance.audit.writer import (
    GENESIS_HASH,
    _json_safe,
    audit_checkpoint_write,
    audit_current_key,
    audit_event_hash,
    audit_record,
    require_reason,
)

__all__ = [
    "GENESIS_HASH",
    "_json_safe",
    "audit_checkpoint_write",
    "audit_current_key",
    "audit_event_hash",
    "audit_record",
    "require_reason",
]
