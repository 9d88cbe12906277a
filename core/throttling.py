"""Per-key rate limits, counted in the shared cache.

Each API key may make MEMDESK_RATE_LIMIT_PER_MINUTE requests per clock minute (0: no
limit); past it, 429 with ``Retry-After`` (the seconds left in the minute). One counter
per key and minute, incremented atomically in Redis (``INCR``), so every web process
counts against the same limit. While the cache is down nobody is limited: the limit
protects the service, and the cache must never become what stops it.
"""

from __future__ import annotations

import math
import time
from typing import Any

from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from core.cache import cache_add, cache_incr

WINDOW_SECONDS = 60


class ApiKeyRateThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.retry_after: float | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        limit: int = settings.MEMDESK_RATE_LIMIT_PER_MINUTE
        api_key = request.auth
        if not limit or api_key is None or getattr(api_key, "pk", None) is None:
            return True
        now = time.time()
        window = int(now // WINDOW_SECONDS)
        key = f"memdesk:rate:{api_key.pk}:{window}"
        count = cache_incr(key)
        if count is None:  # the minute's first request (or the cache is down)
            if cache_add(key, 1, WINDOW_SECONDS * 2, when_down=True):
                return True
            count = cache_incr(key) or 1  # another process added it first
        if count <= limit:
            return True
        self.retry_after = (window + 1) * WINDOW_SECONDS - now
        return False

    def wait(self) -> float | None:
        return math.ceil(self.retry_after) if self.retry_after is not None else None
