from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """When each Celery worker last showed it was alive: at start, and each time it ran
    the heartbeat task that beat sends every minute. ``/readyz`` reads the latest."""

    hostname = models.CharField(max_length=255, primary_key=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%Y-%m-%d %H:%M:%S}"
