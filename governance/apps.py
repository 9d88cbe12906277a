from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance import checks  # noqa: F401 - registers the system checks
