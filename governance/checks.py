"""System checks of the governance app (``manage.py check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, register
from django.core.checks import Warning as CheckWarning


@register(deploy=True)
def pseudonym_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A production server without a pseudonym key of its own ties every stored
    pseudonym to SECRET_KEY: rotating that one would make them unreadable."""
    if settings.MEMDESK_PSEUDONYM_KEY:
        return []
    return [
        CheckWarning(
            "MEMDESK_PSEUDONYM_KEY is not set, so pseudonyms are encrypted with a key "
            "derived from SECRET_KEY: rotating SECRET_KEY would make every stored pseudonym "
            "impossible to reveal or re-identify.",
            hint="Set MEMDESK_PSEUDONYM_KEY to a long random string (at least 32 "
            "characters), kept apart from SECRET_KEY, before pseudonyms are written.",
            id="memdesk.W001",
        )
    ]


@register(deploy=True)
def audit_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A production server without an audit key of its own keys the audit chain with
    SECRET_KEY, which whoever runs the database often can read as well."""
    if settings.MEMDESK_AUDIT_KEY:
        return []
    return [
        CheckWarning(
            "MEMDESK_AUDIT_KEY is not set, so the audit chain and its checkpoints are keyed "
            "with a key derived from SECRET_KEY: whoever can read SECRET_KEY and write the "
            "database can rewrite the audit trail undetected, and rotating SECRET_KEY "
            "without listing the old one in MEMDESK_AUDIT_OLD_KEYS makes every event "
            "written before fail verification.",
            hint="Set MEMDESK_AUDIT_KEY to a long random string (at least 32 characters), "
            "kept apart from SECRET_KEY and out of the database host's reach.",
            id="memdesk.W002",
        )
    ]
