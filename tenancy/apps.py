from __future__ import annotations

from django.apps import AppConfig


class TenancyConfig(AppConfig):
    name = "tenancy"
    verbose_name = "Workspaces and access"
    default_auto_field = "django.db.models.BigAutoField"
