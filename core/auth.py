"""Bearer API-key authentication moved to ``tenancy.auth``: it reads API keys, which are
tenancy's. These names are re-exported while importers move; each is loaded when first
asked for, so importing core loads no app."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tenancy.auth import API_KEY_CACHE_SECONDS as API_KEY_CACHE_SECONDS
    from tenancy.auth import API_KEY_LOCAL_SECONDS as API_KEY_LOCAL_SECONDS
    from tenancy.auth import LAST_USED_PRECISION as LAST_USED_PRECISION
    from tenancy.auth import ApiKeyAuthentication as ApiKeyAuthentication
    from tenancy.auth import ApiKeyAuthenticationScheme as ApiKeyAuthenticationScheme
    from tenancy.auth import RequiresScope as RequiresScope
    from tenancy.auth import api_key_authenticate as api_key_authenticate
    from tenancy.auth import forget_api_key as forget_api_key

_MOVED = {
    "API_KEY_CACHE_SECONDS",
    "API_KEY_LOCAL_SECONDS",
    "LAST_USED_PRECISION",
    "ApiKeyAuthentication",
    "ApiKeyAuthenticationScheme",
    "RequiresScope",
    "api_key_authenticate",
    "forget_api_key",
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(import_module("tenancy.auth"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
