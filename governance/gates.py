"""Moved to ``governance.redaction.gates`` (``requote_pins`` to
``governance.redaction.targets``); re-exported for the importers outside governance that
still use this path."""

from __future__ import annotations

from governance.redaction.gates import (
    RedactionGateError,
    agents_see_reidentified_sql,
    conversation_pseudonyms,
    conversations_with_pii,
    message_scan_request,
    policy_flags_of,
    pseudonyms_release,
    reasoning_masked_for_display,
    reasoning_redaction_at_ingest,
    redaction_at_ingest,
    redaction_at_ingest_record,
    redaction_engine_status,
    redaction_for_observer,
    redaction_for_observer_tool_output,
    redaction_for_run_summary,
    redaction_gate_for_reflection,
    redacts_before_observation,
    reidentifier_for_api,
    reidentifier_for_measurement,
)
from governance.redaction.targets import requote_pins

__all__ = [
    "RedactionGateError",
    "agents_see_reidentified_sql",
    "conversation_pseudonyms",
    "conversations_with_pii",
    "message_scan_request",
    "policy_flags_of",
    "pseudonyms_release",
    "reasoning_masked_for_display",
    "reasoning_redaction_at_ingest",
    "redaction_at_ingest",
    "redaction_at_ingest_record",
    "redaction_engine_status",
    "redaction_for_observer",
    "redaction_for_observer_tool_output",
    "redaction_for_run_summary",
    "redaction_gate_for_reflection",
    "redacts_before_observation",
    "reidentifier_for_api",
    "reidentifier_for_measurement",
    "requote_pins",
]
