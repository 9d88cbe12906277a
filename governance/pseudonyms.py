"""Moved to ``governance.redaction.pseudonyms``; re-exported for the importers outside
governance that still use this path."""

from __future__ import annotations

from governance.redaction.pseudonyms import (
    LABEL,
    PseudonymReveal,
    pseudonym_reveal,
)

__all__ = [
    "LABEL",
    "PseudonymReveal",
    "pseudonym_reveal",
]
