"""Claiming runs and finishing them, and reading or cancelling one.

A worker claims a run with a conditional UPDATE that takes a lease (so two workers never
run the same window), renews it while the engine works, and stores the results in one
transaction that also checks it still holds the lease (so a run taken over after a
crash, or cancelled, is never stored). Engine failures leave memory exactly as it was;
the messages stay unobserved and recent. A retryable failure makes the run RETRYING
until its next attempt; the last attempt's failure makes it FAILED, unless the provider
is down (its circuit breaker has opened and no call succeeded since): then the run
stays RETRYING, without a next attempt of its own, waiting for the provider, and the
sweeper sends it again once the provider answers.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import (
    DatabaseError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.models import F, Q
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from governance.audit.writer import audit_record
from governance.redaction.gates import RedactionGateError
from memory.engines.base import EngineError
from memory.models import AnyRun, ObserverRun, PipelineRun, ReflectorRun
from memory.pipeline import engines
from memory.pipeline.scheduling import RUN_TASKS, RunT
from memory.pipeline.waiting import RunWaitExceeded, interrupted_at
from tenancy.models import Workspace

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another worker took the run over (our lease expired); our results are discarded."""


def _claim(model: type[RunT], run_id: uuid.UUID | str) -> tuple[RunT, uuid.UUID] | None:
    """Take the run if it is PENDING or RETRYING, or RUNNING with an expired lease (its
    worker died)."""
    now = timezone.now()
    token = uuid.uuid4()
    claimable = Q(status__in=(PipelineRun.Status.PENDING, PipelineRun.Status.RETRYING)) | Q(
        status=PipelineRun.Status.RUNNING, lease_expires_at__lt=now
    )
    claimed = model.objects.filter(claimable, pk=run_id).update(
        status=PipelineRun.Status.RUNNING,
        lease_token=token,
        lease_expires_at=_lease_expiry(),
        started_at=now,
        next_attempt_at=None,
        attempts=F("attempts") + 1,
    )
    if not claimed:
        return None
    run = model.objects.select_related("conversation__workspace").get(pk=run_id)
    return run, token


def _lease_expiry() -> datetime:
    return timezone.now() + timedelta(seconds=settings.MEMDESK_RUN_LEASE_SECONDS)


class _Heartbeat(threading.Thread):
    """Renews the run's lease every MEMDESK_RUN_HEARTBEAT_SECONDS while the engine works,
    so a live run of any length keeps its claim and a dead worker's run is free after
    three missed beats. It stops renewing once the lease is gone (taken over or
    cancelled); the token check in ``run_finish`` then discards the results."""

    def __init__(self, model: type[AnyRun], run_id: uuid.UUID, token: uuid.UUID) -> None:
        super().__init__(name=f"lease-heartbeat-{run_id}", daemon=True)
        self.model, self.run_id, self.token = model, run_id, token
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(settings.MEMDESK_RUN_HEARTBEAT_SECONDS):
                try:
                    renewed = self.model.objects.filter(
                        pk=self.run_id, lease_token=self.token, status=PipelineRun.Status.RUNNING
                    ).update(lease_expires_at=_lease_expiry())
                except DatabaseError:
                    # The next beat tries again; three beats fit in one lease.
                    logger.warning("%s %s: lease renewal failed", self.model.__name__, self.run_id)
                    connection.close()
                    continue
                if not renewed:
                    return
        finally:
            connection.close()  # this thread's own connection

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def run_finish(
    model: type[RunT], run: RunT, token: uuid.UUID, *, started: float, **fields: Any
) -> None:
    """Mark the run succeeded if we still hold its lease; raise LeaseLost otherwise (the
    run was taken over or cancelled). Call inside the transaction that stores the
    results, before storing them."""
    done = model.objects.filter(
        pk=run.pk, lease_token=token, status=PipelineRun.Status.RUNNING
    ).update(
        status=PipelineRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        duration_ms=int((time.monotonic() - started) * 1000),
        lease_token=None,
        lease_expires_at=None,
        error="",
        **fields,
    )
    if not done:
        raise LeaseLost(str(run.pk))


# Runs whose last attempt failed while their provider was down: RETRYING with no next
# attempt of their own (``pipeline_sweep`` sends them again when it answers).
WAITING_FOR_PROVIDER = Q(status=PipelineRun.Status.RETRYING, next_attempt_at=None)
_WAITING_FOR_PROVIDER_SAYS = "waiting for the provider to answer again"


def waits_for_provider(run: AnyRun) -> bool:
    return run.status == PipelineRun.Status.RETRYING and run.next_attempt_at is None


def _provider_down(run: AnyRun) -> bool:
    breaker = engines.provider_breaker(run.conversation.workspace)
    return breaker is not None and not breaker.is_closed()


def _release_after_error(
    model: type[RunT],
    run: RunT,
    token: uuid.UUID,
    error: EngineError,
    *,
    final: bool,
    retry_in: float,
) -> None:
    """Give the run back (RETRYING, tried again in ``retry_in`` seconds), leave it
    waiting for its provider (a last attempt that failed while the provider is down),
    or fail it, keeping memory as it was. A run cancelled meanwhile stays cancelled."""
    now = timezone.now()
    # The engine's message names the failure (status code, timeout, rule broken),
    # never the content it was given or returned.
    message = str(error)[:500]
    if error.retryable and not final:
        fields: dict[str, Any] = {
            "status": PipelineRun.Status.RETRYING,
            "next_attempt_at": now + timedelta(seconds=retry_in),
        }
        outcome = "will retry"
    elif error.retryable and _provider_down(run):
        # An outage longer than the run's retries is no reason to give its work up.
        fields = {"status": PipelineRun.Status.RETRYING, "next_attempt_at": None}
        message = f"{message[:450]}; {_WAITING_FOR_PROVIDER_SAYS}"
        outcome = "waits for its provider"
    else:
        fields = {"status": PipelineRun.Status.FAILED, "finished_at": now, "next_attempt_at": None}
        outcome = "failed"
    model.objects.filter(pk=run.pk, lease_token=token, status=PipelineRun.Status.RUNNING).update(
        lease_token=None, lease_expires_at=None, error=message, **fields
    )
    logger.warning("%s %s %s: %s", model.__name__, run.pk, outcome, type(error).__name__)


def _requeue_after_wait(model: type[RunT], run: RunT, token: uuid.UUID) -> None:
    """Give a run whose on-demand wait ran out back to the queue, as if it had never
    been claimed (the attempt does not count), for a worker to run from the start."""
    requeued = model.objects.filter(
        pk=run.pk, lease_token=token, status=PipelineRun.Status.RUNNING
    ).update(
        status=PipelineRun.Status.PENDING,
        lease_token=None,
        lease_expires_at=None,
        started_at=None,
        attempts=F("attempts") - 1,
    )
    if requeued:
        task = RUN_TASKS[model]
        enqueue_on_commit(task, str(run.pk))
        logger.info("%s %s: the wait ran out, left to the workers", model.__name__, run.pk)


def _fail_unexpected(model: type[RunT], run: RunT, token: uuid.UUID, error: Exception) -> None:
    """Fail the run for good on an error nobody anticipated: retrying a bug (an overflow
    on one message, say) would crash on every attempt. The run's error names the type;
    the log adds where it happened, never the exception's message, which may quote
    content."""
    model.objects.filter(pk=run.pk, lease_token=token, status=PipelineRun.Status.RUNNING).update(
        status=PipelineRun.Status.FAILED,
        finished_at=timezone.now(),
        next_attempt_at=None,
        lease_token=None,
        lease_expires_at=None,
        error=f"unexpected error ({type(error).__name__}); see the worker's log for run {run.pk}",
    )
    where = "".join(traceback.format_tb(error.__traceback__))
    logger.error(
        "%s %s failed: unexpected %s\n%s", model.__name__, run.pk, type(error).__name__, where
    )


def engine_error(error: RedactionGateError) -> EngineError:
    """A gate that holds a run back fails or retries it like an engine would, with the
    gate's message as the run's error."""
    return EngineError(str(error), retryable=error.retryable)


@dataclass(frozen=True)
class RunOutcome:
    run: AnyRun | None
    retry: bool  # the run is RETRYING after a retryable error, and its task retries it


def _released(run: RunT) -> RunOutcome:
    run.refresh_from_db()
    return RunOutcome(
        run, retry=run.status == PipelineRun.Status.RETRYING and not waits_for_provider(run)
    )


def run_execute(
    model: type[RunT],
    run_id: uuid.UUID | str,
    work: Callable[[RunT, uuid.UUID, float], None],
    *,
    final_attempt: bool,
    retry_in: float,
    deadline: float | None = None,
) -> RunOutcome:
    claimed = _claim(model, run_id)
    if claimed is None:
        return RunOutcome(model.objects.filter(pk=run_id).first(), retry=False)
    run, token = claimed
    started = time.monotonic()
    # The run's own count decides too: a run the sweeper re-sent starts a new task whose
    # retries count from zero.
    final = final_attempt or run.attempts >= PipelineRun.MAX_ATTEMPTS
    heartbeat = _Heartbeat(model, run.pk, token)
    heartbeat.start()
    try:
        with interrupted_at(deadline):
            work(run, token, started)
    except EngineError as error:
        heartbeat.stop()
        _release_after_error(model, run, token, error, final=final, retry_in=retry_in)
        return _released(run)
    except LeaseLost:
        logger.warning(
            "%s %s: lease lost or run cancelled, results discarded", model.__name__, run.pk
        )
    except RunWaitExceeded:
        heartbeat.stop()
        _requeue_after_wait(model, run, token)
    except SoftTimeLimitExceeded:
        raise  # the task fails the run with its time limit in words
    except (OperationalError, InterfaceError) as error:
        heartbeat.stop()
        # The database went away mid-run (a restart, a dropped connection): a retry may
        # well succeed, on a new connection. (Inside a transaction the connection is the
        # transaction's owner's to close.)
        if not connection.in_atomic_block:
            connection.close_if_unusable_or_obsolete()
        transient = EngineError(
            f"the database connection failed ({type(error).__name__}); the run will retry",
            retryable=True,
        )
        _release_after_error(model, run, token, transient, final=final, retry_in=retry_in)
        return _released(run)
    except Exception as error:
        heartbeat.stop()
        _fail_unexpected(model, run, token, error)
    finally:
        heartbeat.stop()
    run.refresh_from_db()
    return RunOutcome(run, retry=False)


def _fail_interrupted(model: type[RunT], run_id: uuid.UUID | str, reason: str) -> RunT | None:
    # The interruption rolled back the run's transaction, so memory is as it was. The
    # heartbeat kept the lease until the interruption, so the RUNNING run is still ours.
    failed = model.objects.filter(pk=run_id, status=PipelineRun.Status.RUNNING).update(
        status=PipelineRun.Status.FAILED,
        finished_at=timezone.now(),
        lease_token=None,
        lease_expires_at=None,
        error=reason[:500],
    )
    if failed:
        logger.warning("%s %s failed: %s", model.__name__, run_id, reason)
    return model.objects.filter(pk=run_id).first()


def observer_run_fail_interrupted(*, run_id: uuid.UUID | str, reason: str) -> ObserverRun | None:
    """Fail a RUNNING Observer run whose worker was interrupted (its time limit)."""
    return _fail_interrupted(ObserverRun, run_id, reason)


def reflector_run_fail_interrupted(*, run_id: uuid.UUID | str, reason: str) -> ReflectorRun | None:
    """Fail a RUNNING Reflector run whose worker was interrupted (its time limit)."""
    return _fail_interrupted(ReflectorRun, run_id, reason)


def run_get(*, workspace: Workspace, run_id: str) -> AnyRun:
    for model in (ObserverRun, ReflectorRun):
        run = (
            model.objects.filter(pk=run_id, conversation__workspace=workspace)
            .select_related("conversation")
            .first()
        )
        if run:
            return run
    raise MemdeskError("not_found", "Run not found in this workspace.", status_code=404)


def run_cancel(*, run: AnyRun, actor: Actor, reason: str = "") -> AnyRun:
    """Cancel an open run (queued, retrying or running), audited. A running run's worker
    finds its lease gone when it comes to store its results, and stores nothing. The
    conversation's slot is free at once: a new run can be scheduled. Raises a 409 if the
    run has finished."""
    model = type(run)
    with transaction.atomic():
        # Locked, so a worker storing its results now either commits first (and the run
        # is finished here) or finds the run cancelled.
        current = model.objects.select_for_update().get(pk=run.pk)
        if not current.is_open:
            raise MemdeskError(
                "run_finished",
                f"The run has already {current.state}; only a queued, running or retrying "
                "run can be cancelled.",
                status_code=409,
            )
        now = timezone.now()
        model.objects.filter(pk=run.pk).update(
            status=PipelineRun.Status.CANCELLED,
            finished_at=now,
            next_attempt_at=None,
            lease_token=None,
            lease_expires_at=None,
        )
        audit_record(
            workspace_id=run.conversation.workspace_id,
            actor=actor,
            action="run.cancel",
            target_type="observer_run" if isinstance(run, ObserverRun) else "reflector_run",
            target_id=str(run.pk),
            before={"status": current.state, "attempts": current.attempts},
            after={"status": PipelineRun.Status.CANCELLED},
            reason=reason,
        )
    logger.info("%s %s cancelled", model.__name__, run.pk)
    run.refresh_from_db()
    return run
