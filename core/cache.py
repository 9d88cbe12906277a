"""The shared cache as an optimisation, never a dependency.

Every read and write of Django's cache that Memdesk makes on a request's or a run's path
goes through here: while the cache (Redis) is down, a read misses, a write is dropped,
and the caller does the work the cache would have saved. One warning a minute says so;
it names the operation and the error's type, never a key (keys can hold ids) or a value.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

logger = logging.getLogger(__name__)

WARN_EVERY_SECONDS = 60.0
_last_warning = 0.0


def _unavailable(operation: str, error: Exception) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= WARN_EVERY_SECONDS:
        _last_warning = now
        logger.warning(
            "cache unavailable (%s: %s); serving without it", operation, type(error).__name__
        )


# A cache backend may fail with its client's own errors (redis-py's), with OSError or
# with a timeout: any of them means "no cache", so these catch Exception.


def cache_get(key: str, default: Any = None) -> Any:
    try:
        return cache.get(key, default)
    except Exception as error:
        _unavailable("get", error)
        return default


def cache_get_many(keys: Iterable[str]) -> dict[str, Any]:
    """The keys found (one round trip); nothing when the cache is down."""
    try:
        return dict(cache.get_many(list(keys)))
    except Exception as error:
        _unavailable("get_many", error)
        return {}


def cache_set(key: str, value: Any, timeout: float | None) -> None:
    try:
        cache.set(key, value, timeout)
    except Exception as error:
        _unavailable("set", error)


def cache_add(key: str, value: Any, timeout: float | None, *, when_down: bool) -> bool:
    """``cache.add``; ``when_down`` is what to answer when the cache cannot say."""
    try:
        return bool(cache.add(key, value, timeout))
    except Exception as error:
        _unavailable("add", error)
        return when_down


def cache_incr(key: str) -> int | None:
    """The incremented value; None when the key is missing or the cache is down."""
    try:
        return int(cache.incr(key))
    except ValueError:  # the key is not there (expired)
        return None
    except Exception as error:
        _unavailable("incr", error)
        return None


def cache_delete(keys: Iterable[str]) -> None:
    try:
        cache.delete_many(list(keys))
    except Exception as error:
        _unavailable("delete", error)
