"""The shared cache as an optimisation, never a dependency.

The Redis backend is django-redis with ``DJANGO_REDIS_IGNORE_EXCEPTIONS``
(config/settings/base.py): while Redis is down, a read misses, a write is dropped, and
the caller does the work the cache would have saved. django-redis logs each ignored
error with its traceback; ``CacheOutageFilter`` (on this module's logger, which
django-redis logs to) turns that into one warning a minute that names the operation and
the error's type, never a key (keys can hold ids) or a value.

The helpers below only translate the backend's answers into what the callers ask:
``cache_add`` says what to answer when the cache cannot say, ``cache_incr`` answers
None for a key that is not there.
"""

from __future__ import annotations

import logging
import time
from types import TracebackType
from typing import Any

from django.core.cache import cache

WARN_EVERY_SECONDS = 60.0
_last_warning = 0.0


class CacheOutageFilter(logging.Filter):
    """Of django-redis's "Exception ignored" records, one a minute, as a WARNING without
    the traceback; the rest are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        global _last_warning
        if not record.exc_info or record.exc_info[1] is None:
            return True
        now = time.monotonic()
        if now - _last_warning < WARN_EVERY_SECONDS:
            return False
        _last_warning = now
        error = record.exc_info[1]
        cause = error.__cause__ or error  # django-redis wraps redis-py's error
        record.msg = "cache unavailable (%s: %s); serving without it"
        record.args = (_operation(record.exc_info[2]), type(cause).__name__)
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info = record.exc_text = None
        return True


def _operation(trace: TracebackType | None) -> str:
    """The cache method that failed: the first frame in django-redis's RedisCache below
    its error-ignoring decorator."""
    while trace is not None:
        code = trace.tb_frame.f_code
        if "django_redis" in code.co_filename and code.co_name != "_decorator":
            return code.co_name.lstrip("_")
        trace = trace.tb_next
    return "cache"


def cache_add(key: str, value: Any, timeout: float | None, *, when_down: bool) -> bool:
    """``cache.add``; ``when_down`` is what to answer when the cache cannot say (the
    backend then answers None rather than True or False)."""
    added = cache.add(key, value, timeout)
    return when_down if added is None else bool(added)


def cache_incr(key: str) -> int | None:
    """The incremented value; None when the key is missing or the cache is down."""
    try:
        value = cache.incr(key)
    except ValueError:  # the key is not there (expired)
        return None
    return None if value is None else int(value)
