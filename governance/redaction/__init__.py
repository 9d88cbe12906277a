"""Redaction: the gates memory passes its text through (``gates``), the Presidio engine
(``presidio``), its recognizers and context rules, the workspace policy (``policy``), the
scan of written messages (``scan``), the review queue (``review``) and pseudonyms
(``pseudonyms``).

The names below are re-exported for the importers outside governance that still use
``governance.redaction`` for what is now ``governance.redaction.presidio``."""

from __future__ import annotations

from governance.redaction.presidio import (
    APPLIED,
    DENY_LIST_ENTITY,
    LANGUAGE,
    NER_IGNORED,
    NER_MAPPING,
    OPERATORS,
    SUPPORTED_ENTITIES,
    PolicySpec,
    RedactionEngine,
    _merge,
    _offline_tldextract,
    engine,
    redact_text,
    spacy_model_name,
)

__all__ = [
    "APPLIED",
    "DENY_LIST_ENTITY",
    "LANGUAGE",
    "NER_IGNORED",
    "NER_MAPPING",
    "OPERATORS",
    "PolicySpec",
    "RedactionEngine",
    "SUPPORTED_ENTITIES",
    "_merge",
    "_offline_tldextract",
    "engine",
    "redact_text",
    "spacy_model_name",
]
