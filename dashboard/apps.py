from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"
    verbose_name = "Dashboard"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from axes.signals import user_locked_out  # type: ignore[import-untyped]

        from dashboard.login_throttle import lockout_audit

        user_locked_out.connect(lockout_audit, dispatch_uid="dashboard.login_throttle.audit")
