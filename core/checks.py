"""System checks of the core app (``manage.py check --deploy``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, register
from django.core.checks import Warning as CheckWarning


@register(deploy=True)
def secret_key_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """A key generated into var/ is fine for one host; hosts that serve one Memdesk
    together must share one key, or each signs sessions the others refuse."""
    if settings.MEMDESK_SECRET_KEY_SOURCE == "environment":
        return []
    return [
        CheckWarning(
            "SECRET_KEY is not set, so this host uses the key generated into "
            f"{settings.VAR_DIR / 'secret_key'}: another host serving the same Memdesk "
            "would generate a different one and refuse this one's sessions.",
            hint="Set SECRET_KEY to a long random string in every host's environment "
            "(the generated file holds one you can reuse).",
            id="memdesk.W003",
        )
    ]
