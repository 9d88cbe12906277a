"""Test settings: the same as base, with fast password hashing and eager-free Celery."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from .base import *  # noqa: F403
from .base import CACHE_URL as _BASE_CACHE_URL
from .base import cache_settings

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False

# In-process tests publish to an in-memory broker; the tests that need a real worker
# start one with its own broker URL (Redis in CI, the filesystem transport without it).
CELERY_BROKER_URL = "memory://"
CELERY_BROKER_TRANSPORT = None  # base's (core.broker) is for filesystem:// only
CELERY_BROKER_TRANSPORT_OPTIONS = {}

# Under pytest-xdist each test process keeps its cache in a Redis database of its own
# (gw0 the one CACHE_URL names, gw1 the one below it, ...), so that one process's
# cache.clear() never empties what another is reading. The Celery workers a test starts
# inherit the same URL through the environment.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw") and _BASE_CACHE_URL.startswith(("redis://", "rediss://")):
    _offset = int(_xdist_worker.removeprefix("gw"))
    CACHE_URL = re.sub(r"/(\d+)$", lambda m: f"/{int(m.group(1)) - _offset}", _BASE_CACHE_URL)
    os.environ["CACHE_URL"] = CACHE_URL
    CACHES = cache_settings(CACHE_URL)

# A file, not SQLite's default in-memory test database, so that the Celery worker
# processes started by tests/memory/test_pipeline_worker.py can open the same database.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # One file per test process, so that concurrent runs in one checkout do not collide.
    DATABASES["default"]["TEST"] = {  # noqa: F405
        "NAME": str(VAR_DIR / f"test-memdesk-{os.getpid()}.sqlite3")  # noqa: F405
    }

# Audit checkpoints never go under the checkout: a temporary file unless the environment
# names one (tests/conftest.py gives each test a file of its own, and the Celery workers
# that tests start inherit it through the environment).
if not os.environ.get("MEMDESK_AUDIT_CHECKPOINT_PATH"):
    MEMDESK_AUDIT_CHECKPOINT_PATH = (
        Path(tempfile.gettempdir()) / "memdesk-tests" / f"audit-checkpoints-{os.getpid()}.jsonl"
    )

# Static files straight from static/, never a copy collected earlier under var/ (which
# `make run` leaves behind and which would serve yesterday's CSS to the browser tests).
STATIC_ROOT = Path(tempfile.gettempdir()) / "memdesk-tests" / "no-collected-static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# Every context read reaches the shared counts at once, so a test reads what it did.
MEMDESK_CONTEXT_READS_FLUSH_SECONDS = 0

# Sign-in throttling (django-axes) is off but where a test is about it
# (tests/dashboard/test_sign_in_throttling.py turns it on): Django's test client and
# authenticate() sign in without a request, which axes refuses.
AXES_ENABLED = False
