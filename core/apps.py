from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Memdesk core"

    def ready(self) -> None:
        from core import checks  # noqa: F401 - registers the system checks
