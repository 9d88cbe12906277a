"""Moved to ``governance.redaction.review``; re-exported for the importers outside
governance that still use this path."""

from __future__ import annotations

from governance.redaction.review import (
    RESCAN_TIERS,
    redaction_finding_approve,
    redaction_finding_dismiss,
    redaction_rescan,
    rescan_run_request,
    restricted_original_read,
)

__all__ = [
    "RESCAN_TIERS",
    "redaction_finding_approve",
    "redaction_finding_dismiss",
    "redaction_rescan",
    "rescan_run_request",
    "restricted_original_read",
]
