"""The audit trail. Every human or agent change to memory writes one event, in the same
transaction as the change, through ``governance.services.audit_record``."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    class ActorType(models.TextChoices):
        USER = "user", "user"
        API_KEY = "api_key", "API key"
        SYSTEM = "system", "system"

    workspace = models.ForeignKey(
        "memory.Workspace", on_delete=models.PROTECT, related_name="audit_events"
    )
    actor_type = models.CharField(max_length=10, choices=ActorType.choices)
    actor_id = models.CharField(max_length=200)
    actor_role = models.CharField(max_length=50, blank=True, default="")
    action = models.CharField(max_length=100)
    target_type = models.CharField(max_length=50)
    target_id = models.CharField(max_length=200)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=100, blank=True, default="")
    ip_address = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "-id"], name="audit_ws_id"),
            models.Index(fields=["target_type", "target_id"], name="audit_target"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.target_type}:{self.target_id}"
