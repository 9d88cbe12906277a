from __future__ import annotations

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.signals import rows_erased
        from memory.services.conversations import conversation_traces_purge

        rows_erased.connect(conversation_traces_purge, dispatch_uid="memory.traces.purge")
