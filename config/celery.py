"""The Celery application. Tasks live in each app's ``tasks.py``.

Under ``LOG_FORMAT=json`` every line a worker or beat writes is a JSON object, for a log
shipper that reads their output. Their log records are formatted by the settings'
``LOGGING``, as the web's are (``CELERY_WORKER_HIJACK_ROOT_LOGGER`` is off). What Celery
prints beside its logging is left out, as ``celery --quiet`` leaves it out: the startup
banner (the worker logs "<name> ready.", beat "beat: Starting...") and the worker's
"Warm shutdown" notice on SIGTERM, which is logged instead.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.apps import beat as celery_beat
from celery.apps import worker as celery_worker
from celery.signals import worker_shutting_down
from django.conf import settings
from kombu.utils.objects import cached_property

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")

logger = logging.getLogger(__name__)


def _json_logs() -> bool:
    return bool(settings.LOG_FORMAT == "json")


class Worker(celery_worker.Worker):  # type: ignore[misc]  # untyped base
    """``celery worker``: quiet under JSON logs."""

    def on_before_init(self, quiet: bool = False, **kwargs: Any) -> None:
        super().on_before_init(quiet=quiet or _json_logs(), **kwargs)

    def install_platform_tweaks(self, worker: Any) -> None:
        super().install_platform_tweaks(worker)
        if _json_logs():
            # SIGTERM's handler again, without the notice it writes straight to stdout;
            # _shutdown_logged logs it.
            celery_worker.install_worker_term_handler(worker, verbose=False)


class Beat(celery_beat.Beat):  # type: ignore[misc]  # untyped base
    """``celery beat``: quiet under JSON logs."""

    def __init__(self, quiet: bool = False, **kwargs: Any) -> None:
        super().__init__(quiet=quiet or _json_logs(), **kwargs)


class MemdeskCelery(Celery):  # type: ignore[misc]  # untyped base
    """Celery, whose ``celery worker`` and ``celery beat`` are the two above."""

    @cached_property
    def Worker(self) -> Any:  # noqa: N802  (Celery's name)
        return self.subclass_with_self(Worker)

    @cached_property
    def Beat(self) -> Any:  # noqa: N802
        return self.subclass_with_self(Beat)


def _shutdown_logged(sender: str, sig: str, how: str, **kwargs: Any) -> None:
    if _json_logs():
        logger.info("%s: %s shutdown on %s", sender, how.lower(), sig)


worker_shutting_down.connect(_shutdown_logged)


app = MemdeskCelery("memdesk")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
