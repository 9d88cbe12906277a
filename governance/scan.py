"""Moved to ``governance.redaction.scan``; re-exported for the importers outside
governance that still use this path."""

from __future__ import annotations

from governance.redaction.scan import (
    MASKED_STATUSES,
    content_digest,
    message_reveal,
    message_scan_requests,
)

__all__ = [
    "MASKED_STATUSES",
    "content_digest",
    "message_reveal",
    "message_scan_requests",
]
