"""Test settings: the same as base, with fast password hashing and eager-free Celery."""

from __future__ import annotations

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
