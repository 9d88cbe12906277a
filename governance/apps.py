from __future__ import annotations

from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.health import readiness_check_register
        from governance import checks  # noqa: F401 - registers the system checks
        from governance.redaction.gates import redaction_engine_status

        def pii_model_check() -> dict[str, object]:
            model = redaction_engine_status()
            return {"status": "ok" if model != "missing" else "unavailable", "model": model}

        # /readyz (core, which imports no app) asks each app's checks.
        readiness_check_register("piiModel", pii_model_check)
