from __future__ import annotations

from django.db import models


class WorkerHeartbeat(models.Model):
    """When each Celery worker last showed it was alive: at start, and each time it ran
    the heartbeat task that beat sends every minute to the default queue and to the
    scan's. ``/readyz`` reads the latest of each."""

    hostname = models.CharField(max_length=255, primary_key=True)
    seen_at = models.DateTimeField()
    # The queues the worker reads, comma-separated ("celery,governance", "scan"): /readyz
    # wants one alive for the default queue and one for the scan's. Empty: not known (a
    # heartbeat recorded outside a worker), taken as every queue.
    queues = models.CharField(max_length=500, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.hostname} at {self.seen_at:%Y-%m-%d %H:%M:%S}"
