"""The Observer and Reflector pipeline: when runs are due, claiming them, running an
engine, and storing what it returns.

Message writes never wait for any of this: they call ``observer_schedule_if_due``, which
at most inserts a PENDING run and enqueues its task after the write commits. A worker
claims the run with a conditional UPDATE that takes a lease (so two workers never run
the same window), and stores the results in one transaction that also checks it still
holds the lease (so a run taken over after a crash, or cancelled, is never stored).
Engine failures leave memory exactly as it was; the messages stay unobserved and
recent. A retryable failure makes the run RETRYING until its next attempt; the last
attempt's failure makes it FAILED.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)
from django.db.models import F, Max, Q, Sum
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from governance.audit import audit_record
from governance.gates import (
    RedactionGateError,
    redaction_for_observer,
    redaction_for_observer_tool_output,
    redaction_for_run_summary,
    redaction_gate_for_reflection,
    redacts_before_observation,
)
from memory.engines.base import (
    MEMORY_BLOCK_HEADER,
    PRIORITIES,
    Engine,
    EngineError,
    SourceMessage,
    SourceObservation,
)
from memory.grounding import grounding_score
from memory.models import (
    AnyRun,
    Conversation,
    MemorySource,
    Message,
    Observation,
    ObserverRun,
    PipelineRun,
    Reflection,
    ReflectorRun,
    ToolCall,
    Workspace,
)
from memory.references import references_in
from memory.selectors import active_observations, stale_reflections, unobserved_messages
from memory.tokens import token_count

logger = logging.getLogger(__name__)

RunT = TypeVar("RunT", ObserverRun, ReflectorRun)
# Earlier observations given to the Observer so that it does not repeat itself.
PREVIOUS_OBSERVATIONS_TAIL = 20
# After a failed or cancelled run, automatic triggers wait this long before trying the
# same conversation again, so a provider that returns garbage is not called on every
# write, and a run a person stopped is not started again by the next message.
FAILURE_COOLDOWN = timedelta(minutes=5)
# The sweeper re-enqueues PENDING runs older than this, and RETRYING runs this long past
# their next attempt (their task message may be lost).
STALE_PENDING = timedelta(seconds=60)
# The sweeper looks at conversations written in this window, at most this many a sweep.
SWEEP_LOOKBACK = timedelta(days=7)
SWEEP_BATCH = 500
# The Celery task that executes each kind of run.
RUN_TASKS: dict[type[ObserverRun] | type[ReflectorRun], str] = {
    ObserverRun: "memory.tasks.observe_conversation",
    ReflectorRun: "memory.tasks.reflect_conversation",
}


class RunWaitExceeded(BaseException):
    """``?wait=true`` has waited as long as it may: the run goes back to the queue.

    A BaseException, so that no ``except Exception`` on the way (the cache helpers, an
    engine's error handling) swallows it."""


class _WaitDeadline:
    """Interrupts a run executed inside a request when the wait is over (SIGALRM, as
    Celery's soft time limit does in a worker). Never in the middle of a database call:
    an interrupted query would leave the connection unusable, so an alarm that comes
    during one takes effect as soon as it returns."""

    def __init__(self) -> None:
        self.in_query = False
        self.expired = False

    def on_alarm(self, signum: int, frame: object) -> None:
        self.expired = True
        if not self.in_query:
            raise RunWaitExceeded

    def around_query(
        self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any
    ) -> Any:
        self.in_query = True
        try:
            result = execute(sql, params, many, context)
        finally:
            self.in_query = False
        if self.expired:
            raise RunWaitExceeded
        return result


def can_interrupt_runs() -> bool:
    """Signals reach only the main thread: a threaded server (runserver, gunicorn's
    gthread workers) cannot bound a run it executes, so it leaves runs to the workers."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def _interrupted_at(deadline: float | None) -> Iterator[None]:
    if deadline is None:
        yield
        return
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise RunWaitExceeded
    watch = _WaitDeadline()
    previous = signal.signal(signal.SIGALRM, watch.on_alarm)
    signal.setitimer(signal.ITIMER_REAL, remaining)
    try:
        with connection.execute_wrapper(watch.around_query):
            yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class LeaseLost(Exception):
    """Another worker took the run over (our lease expired); our results are discarded."""


# --- what is due -------------------------------------------------------------------------


def unobserved_token_count(*, conversation: Conversation) -> int:
    total = unobserved_messages(conversation=conversation).aggregate(total=Sum("token_count"))
    return total["total"] or 0


def active_observation_token_count(*, conversation: Conversation) -> int:
    total = active_observations(conversation=conversation).aggregate(total=Sum("token_count"))
    return total["total"] or 0


def _recently_failed(model: type[AnyRun], conversation: Conversation) -> bool:
    latest = (
        model.objects.filter(conversation=conversation)
        .order_by("-created_at")
        .values_list("status", "finished_at")
        .first()
    )
    return bool(
        latest
        and latest[0] in (PipelineRun.Status.FAILED, PipelineRun.Status.CANCELLED)
        and latest[1]
        and timezone.now() - latest[1] < FAILURE_COOLDOWN
    )


def _open_run(model: type[RunT], conversation: Conversation) -> RunT | None:
    return model.objects.filter(
        conversation=conversation, status__in=PipelineRun.OPEN_STATUSES
    ).first()


def _has_open_run(model: type[RunT], conversation: Conversation) -> bool:
    return model.objects.filter(
        conversation=conversation, status__in=PipelineRun.OPEN_STATUSES
    ).exists()


def _schedule(
    model: type[RunT], task_name: str, *, conversation: Conversation, trigger: str
) -> RunT:
    """Return the conversation's open run of this kind, creating (and enqueueing) one."""
    existing = _open_run(model, conversation)
    if existing:
        return existing
    try:
        with transaction.atomic():
            run = model.objects.create(conversation=conversation, trigger=trigger)
    except IntegrityError:
        # Another request scheduled one at the same moment (one open run per conversation).
        return model.objects.get(conversation=conversation, status__in=PipelineRun.OPEN_STATUSES)
    enqueue_on_commit(task_name, str(run.pk))
    return run


def observer_schedule(*, conversation: Conversation, trigger: str) -> ObserverRun:
    return _schedule(
        ObserverRun, "memory.tasks.observe_conversation", conversation=conversation, trigger=trigger
    )


def reflector_schedule(*, conversation: Conversation, trigger: str) -> ReflectorRun:
    run = _schedule(
        ReflectorRun,
        "memory.tasks.reflect_conversation",
        conversation=conversation,
        trigger=trigger,
    )
    correction = PipelineRun.Trigger.CORRECTION
    if run.trigger == correction and trigger != correction:
        # The open run would only re-derive stale reflections; this request also wants
        # the active observations reflected. A run not yet claimed (or waiting to be
        # tried again: each attempt reads its inputs afresh) can still do both.
        upgraded = ReflectorRun.objects.filter(
            pk=run.pk,
            status__in=(PipelineRun.Status.PENDING, PipelineRun.Status.RETRYING),
            trigger=correction,
        ).update(trigger=trigger)
        if upgraded:
            run.trigger = trigger
    return run


def observer_schedule_if_due(
    *,
    conversation: Conversation,
    trigger: str = PipelineRun.Trigger.THRESHOLD,
    now: datetime | None = None,
) -> ObserverRun | None:
    """Schedule an Observer run if the unobserved tokens reached the threshold and none is
    open; return the new run, or None when nothing new was scheduled.

    Given ``now`` (the sweeper does), a conversation nobody wrote to for
    MEMDESK_OBSERVER_IDLE_MINUTES is due with any unobserved message: otherwise its last
    stretch would stay raw until it grows again, which may be never."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    # Cheapest question first, asked on every message write: with a run already open
    # there is nothing to decide (an EXISTS, not the run's row with its text columns).
    if _has_open_run(ObserverRun, conversation):
        return None
    idle = settings.MEMDESK_OBSERVER_IDLE_MINUTES
    quiet = bool(now and idle and conversation.updated_at <= now - timedelta(minutes=idle))
    threshold = 1 if quiet else conversation.effective_observer_threshold
    if unobserved_token_count(conversation=conversation) < threshold:
        return None
    if _recently_failed(ObserverRun, conversation):
        return None
    return observer_schedule(conversation=conversation, trigger=trigger)


def reflector_schedule_for_correction(*, conversation: Conversation) -> ReflectorRun | None:
    """Schedule the re-derivation of the conversation's stale reflections (or return the
    run already open, which re-derives them too). Called in the transaction that made
    them stale; the task is sent once it commits."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    return reflector_schedule(conversation=conversation, trigger=PipelineRun.Trigger.CORRECTION)


def reflector_schedule_if_due(
    *, conversation: Conversation, trigger: str = PipelineRun.Trigger.THRESHOLD
) -> ReflectorRun | None:
    """Schedule a Reflector run if the active observations reached the threshold, or if
    stale reflections wait to be re-derived (their run failed, or was never sent)."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    if _has_open_run(ReflectorRun, conversation):
        return None
    tokens = active_observation_token_count(conversation=conversation)
    if tokens < conversation.effective_reflector_threshold:
        if not stale_reflections(conversation=conversation).exists():
            return None
        trigger = PipelineRun.Trigger.CORRECTION
    if _recently_failed(ReflectorRun, conversation):
        return None
    return reflector_schedule(conversation=conversation, trigger=trigger)


# --- engines ----------------------------------------------------------------------------------


def engine_for_workspace(workspace: Workspace) -> Engine:
    name = workspace.effective_engine
    if name == "openai":
        from memory.engines import openai_engine_from_settings

        return openai_engine_from_settings(
            base_url=workspace.llm_base_url or None,
            api_key=workspace.llm_api_key or None,
            model=workspace.llm_model or None,
        )
    from memory.engines.extractive import ExtractiveEngine

    return ExtractiveEngine()


# --- claiming and finishing runs --------------------------------------------------------------


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
    cancelled); the token check in ``_finish`` then discards the results."""

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


def _finish(
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


def _release_after_error(
    model: type[RunT],
    run: RunT,
    token: uuid.UUID,
    error: EngineError,
    *,
    final: bool,
    retry_in: float,
) -> None:
    """Give the run back (RETRYING, tried again in ``retry_in`` seconds) or fail it,
    keeping memory as it was. A run cancelled meanwhile stays cancelled."""
    retry = error.retryable and not final
    now = timezone.now()
    model.objects.filter(pk=run.pk, lease_token=token, status=PipelineRun.Status.RUNNING).update(
        status=PipelineRun.Status.RETRYING if retry else PipelineRun.Status.FAILED,
        finished_at=None if retry else now,
        next_attempt_at=now + timedelta(seconds=retry_in) if retry else None,
        lease_token=None,
        lease_expires_at=None,
        # The engine's message names the failure (status code, timeout, rule broken),
        # never the content it was given or returned.
        error=str(error)[:500],
    )
    logger.warning(
        "%s %s %s: %s",
        model.__name__,
        run.pk,
        "will retry" if retry else "failed",
        type(error).__name__,
    )


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


def _engine_error(error: RedactionGateError) -> EngineError:
    """A gate that holds a run back fails or retries it like an engine would, with the
    gate's message as the run's error."""
    return EngineError(str(error), retryable=error.retryable)


@dataclass(frozen=True)
class RunOutcome:
    run: AnyRun | None
    retry: bool  # the run is RETRYING after a retryable error


def _execute(
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
        with _interrupted_at(deadline):
            work(run, token, started)
    except EngineError as error:
        heartbeat.stop()
        _release_after_error(model, run, token, error, final=final, retry_in=retry_in)
        run.refresh_from_db()
        return RunOutcome(run, retry=run.status == PipelineRun.Status.RETRYING)
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
        run.refresh_from_db()
        return RunOutcome(run, retry=run.status == PipelineRun.Status.RETRYING)
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


# --- the Observer ----------------------------------------------------------------------------


def _is_injected_memory(message: Message) -> bool:
    return message.role == Message.Role.SYSTEM and message.content.startswith(MEMORY_BLOCK_HEADER)


MAX_SPEAKER_NAME_CHARS = 64


def speaker_name(message: Message) -> str:
    """The participant's name a message carries in ``metadata.name`` (as OpenAI's chat
    messages do), or "" when it carries none that reads as a name."""
    name = message.metadata.get("name") if isinstance(message.metadata, dict) else None
    if not isinstance(name, str):
        return ""
    name = " ".join(name.split())
    return name if 0 < len(name) <= MAX_SPEAKER_NAME_CHARS else ""


def _window_tool_calls(conversation: Conversation, window: list[Message]) -> list[ToolCall]:
    """The tool calls the Observer reads with ``window``: those recorded after the
    message before it and before its last message, each read with the message that
    follows it. One recorded after the window's last message waits for the next window,
    with the message (usually the assistant's answer) that will follow it."""
    if not window:
        return []
    return list(
        ToolCall.objects.filter(
            conversation=conversation,
            after_seq__gte=window[0].seq - 1,
            after_seq__lt=window[-1].seq,
        ).order_by("after_seq", "created_at", "id")
    )


def _with_tool_calls(
    messages: list[SourceMessage], calls: list[ToolCall], outputs: list[str]
) -> list[SourceMessage]:
    """The engine's input: the messages with each tool call as a ``tool`` message (its
    output, its tool's name, its own time) right after the message it followed, renumbered
    in that order (the engines order their input by seq). Messages keep their ids, which
    is all the run maps back."""
    if not calls:
        return messages
    entries: list[tuple[tuple[int, int, int], SourceMessage]] = [
        ((m.seq, 0, 0), m) for m in messages
    ]
    entries += [
        (
            (call.after_seq, 1, index),
            SourceMessage(
                id=str(call.pk),
                seq=0,
                role=Message.Role.TOOL,
                content=output,
                created_at=call.created_at,
                tool_name=call.tool_name,
            ),
        )
        for index, (call, output) in enumerate(zip(calls, outputs, strict=True))
    ]
    entries.sort(key=lambda entry: entry[0])
    return [
        SourceMessage(
            id=m.id,
            seq=number,
            role=m.role,
            content=m.content,
            created_at=m.created_at,
            tool_name=m.tool_name,
            speaker=m.speaker,
        )
        for number, (_, m) in enumerate(entries, start=1)
    ]


def _observe(run: ObserverRun, token: uuid.UUID, started: float) -> None:
    conversation = run.conversation
    # The window is fixed now: messages that arrive while the engine works have higher
    # seq numbers, stay unobserved and recent, and wait for the next run.
    window = list(
        unobserved_messages(conversation=conversation).filter(seq__lte=conversation.last_seq)
    )
    by_id = {str(m.pk): m for m in window}
    observable = [m for m in window if not _is_injected_memory(m)]
    previous = list(
        active_observations(conversation=conversation)
        .order_by("-observed_at", "-window_end_seq")
        .values_list("text", flat=True)[:PREVIOUS_OBSERVATIONS_TAIL]
    )[::-1]
    engine = engine_for_workspace(conversation.workspace)
    now = timezone.now()
    output = None
    said: dict[uuid.UUID, str] = {}  # what the engine read, which grounds its notes
    calls: list[ToolCall] = []
    tool_tokens = 0
    if observable:
        # Redacted when the policy says so (redaction_for_observer); as stored otherwise.
        try:
            contents = redaction_for_observer(conversation=conversation, messages=observable)
        except RedactionGateError as error:
            raise _engine_error(error) from None
        said = {
            m.pk: f"{content} {m.tool_name}"
            for m, content in zip(observable, contents, strict=True)
        }
        # Tool calls recorded over the reasoning API are tool output to the Observer,
        # through the same gate as the messages.
        calls = _window_tool_calls(conversation, window)
        outputs = redaction_for_observer_tool_output(
            conversation=conversation, texts=[c.observed_output for c in calls]
        )
        for call, text in zip(calls, outputs, strict=True):
            # A note made from a call is sourced to the message that follows it, and
            # grounded in what the call said too.
            follower = next(m for m in window if m.seq > call.after_seq)
            by_id[str(call.pk)] = follower
            said[follower.pk] = f"{said.get(follower.pk, '')} {text} {call.tool_name}"
            tool_tokens += token_count(text)
        # A participant's name is personal data the redaction of contents does not see.
        named = not redacts_before_observation(conversation=conversation)
        output = engine.observe(
            _with_tool_calls(
                [
                    SourceMessage(
                        id=str(m.pk),
                        seq=m.seq,
                        role=m.role,
                        content=content,
                        created_at=m.created_at,
                        tool_name=m.tool_name,
                        speaker=speaker_name(m) if named else "",
                    )
                    for m, content in zip(observable, contents, strict=True)
                ],
                calls,
                outputs,
            ),
            previous_observations=previous,
            now=now,
            fidelity=conversation.workspace.effective_fidelity,
        )
    # What the engine said beside its notes is kept on the run: it goes through the
    # redaction gate like the notes do.
    current_task, suggested_response = redaction_for_run_summary(
        conversation=conversation,
        texts=[
            (output.current_task or "") if output else "",
            (output.suggested_response or "") if output else "",
        ],
    )
    drafts = output.observations if output else []
    observations = []
    for draft in drafts:
        sources = sorted(
            {by_id[i].pk: by_id[i] for i in draft.source_message_ids if i in by_id}.values(),
            key=lambda m: m.seq,
        )
        if not sources or draft.priority not in PRIORITIES or not draft.text.strip():
            raise EngineError("the engine returned an observation without valid sources")
        references = references_in(draft.text)
        observations.append(
            Observation(
                conversation=conversation,
                text=draft.text.strip(),
                priority=draft.priority,
                # Dated by when its sources were said, not by when this run happened
                # (written_at): an imported history keeps its own dates.
                observed_at=sources[-1].created_at,
                referenced_at=draft.referenced_at,
                written_at=now,
                grounding=grounding_score(draft.text, [said.get(m.pk, "") for m in sources]),
                window_start_seq=sources[0].seq,
                window_end_seq=sources[-1].seq,
                window_start_at=sources[0].created_at,
                window_end_at=sources[-1].created_at,
                source_message_ids=[str(m.pk) for m in sources],
                source=MemorySource.OBSERVER,
                engine=engine.name,
                model_name=engine.model,
                tags=[*draft.tags, *(t for t in references.tags if t not in draft.tags)],
                topics=draft.topics,
                ticket_id=references.ticket_id,
                token_count=token_count(draft.text.strip()),
            )
        )
    with transaction.atomic():
        _finish(
            ObserverRun,
            run,
            token,
            started=started,
            engine=engine.name,
            model_name=engine.model,
            prompt_version=engine.prompt_version,
            window_start_seq=window[0].seq if window else None,
            window_end_seq=window[-1].seq if window else None,
            items_in=len(observable) + len(calls),
            items_out=len(observations),
            tokens_in=sum(m.token_count for m in observable) + tool_tokens,
            tokens_out=sum(o.token_count for o in observations),
            current_task=current_task,
            suggested_response=suggested_response,
        )
        Observation.objects.bulk_create(observations)
        if observations:
            # One event per run, naming what it wrote (ids, never text): memory a
            # worker writes is in the audit trail like memory a person writes.
            audit_record(
                workspace_id=conversation.workspace_id,
                actor=SYSTEM_ACTOR,
                action="memory.observe",
                target_type="observer_run",
                target_id=str(run.pk),
                after={
                    "conversationId": str(conversation.pk),
                    "observations": [str(o.pk) for o in observations],
                    "window": [window[0].seq, window[-1].seq] if window else None,
                    "trigger": run.trigger,
                },
            )
        Conversation.objects.filter(pk=conversation.pk).update(
            memory_version=F("memory_version") + 1
        )
        reflector_schedule_if_due(conversation=conversation)


def observer_run_execute(
    *,
    run_id: uuid.UUID | str,
    final_attempt: bool = True,
    retry_in: float = 0,
    deadline: float | None = None,
) -> RunOutcome:
    """Claim and run the observer run; after a retryable error that is not the final
    attempt, the run is RETRYING, to be tried again in ``retry_in`` seconds. Past
    ``deadline`` (``time.monotonic()``; main thread only) the run goes back to the queue."""
    return _execute(
        ObserverRun,
        run_id,
        _observe,
        final_attempt=final_attempt,
        retry_in=retry_in,
        deadline=deadline,
    )


# --- the Reflector ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ReflectionInputs:
    observations: list[SourceObservation]
    # Each input's version as it was read, and the stale reflections being re-derived:
    # a correction made while the engine works changes one or the other.
    versions: dict[str, int]
    stale: list[Reflection]


def _reflection_inputs(*, conversation: Conversation, include_active: bool) -> ReflectionInputs:
    """What a Reflector run reads: the active observations (unless the run only
    re-derives) and every source of a stale reflection still stored, though reflected
    already, so that the reflection is made again from its sources as they now stand."""
    stale = list(stale_reflections(conversation=conversation))
    wanted = Q(pk__in={str(i) for r in stale for i in r.source_observation_ids})
    if include_active:
        wanted |= Q(status=Observation.Status.ACTIVE)
    observations = list(
        Observation.objects.filter(wanted, conversation=conversation).order_by(
            "observed_at", "window_start_seq", "created_at"
        )
    )
    # The gate stores each observation redacted and gives the Reflector that text, with
    # findings pending review masked as well; it raises a retryable gate error while
    # the policy makes reflection wait for reviews.
    try:
        texts = redaction_gate_for_reflection(conversation=conversation, observations=observations)
    except RedactionGateError as error:
        raise _engine_error(error) from None
    return ReflectionInputs(
        observations=[
            SourceObservation(
                id=str(o.pk),
                text=texts[str(o.pk)],  # never o.text: the gate fails closed
                priority=o.priority,
                observed_at=o.observed_at,
                referenced_at=o.referenced_at,
                token_count=o.token_count,
            )
            for o in observations
        ],
        versions={str(o.pk): o.version for o in observations},
        stale=stale,
    )


def observations_for_reflection(*, conversation: Conversation) -> list[SourceObservation]:
    """The only way the Reflector reads observations (the redaction gate sits here)."""
    return _reflection_inputs(conversation=conversation, include_active=True).observations


def _check_inputs_unchanged(conversation: Conversation, inputs: ReflectionInputs) -> None:
    """Raise a retryable error if memory was corrected since the run read its inputs (an
    input edited or deleted, a reflection made stale or edited back to active): what
    the engine wrote may repeat what the correction took out. Locks what it reads, so a
    correction that comes later waits for this run and then sees its reflections."""
    stale_now = set(
        Reflection.objects.select_for_update()
        .filter(conversation=conversation, status=Reflection.Status.STALE)
        .values_list("pk", flat=True)
    )
    versions_now = {
        str(pk): version
        for pk, version in Observation.objects.select_for_update()
        .filter(pk__in=list(inputs.versions))
        .values_list("pk", "version")
    }
    if stale_now != {r.pk for r in inputs.stale} or versions_now != inputs.versions:
        raise EngineError(
            "memory was corrected while the Reflector worked; the run will retry",
            retryable=True,
        )


def _reflector_model(engine: Engine) -> str:
    # An LLM engine may use a different (often larger) model to reflect than to observe.
    return getattr(engine, "reflector_model", "") or engine.model


def _supersede_stale(
    conversation: Conversation, inputs: ReflectionInputs, reflections: list[Reflection]
) -> None:
    """The stale reflections give way to what the Reflector made of their sources: each
    is superseded (kept, with its history) and points to the first new reflection that
    cites one of its sources, none when nothing did (its sources were all deleted)."""
    now = timezone.now()
    for stale in inputs.stale:
        sources = {str(i) for i in stale.source_observation_ids}
        replacements = [
            str(r.pk) for r in reflections if sources & {str(i) for i in r.source_observation_ids}
        ]
        Reflection.objects.filter(pk=stale.pk, status=Reflection.Status.STALE).update(
            status=Reflection.Status.SUPERSEDED,
            superseded_by_id=replacements[0] if replacements else None,
            updated_at=now,
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=SYSTEM_ACTOR,
            action="reflection.rederive",
            target_type="reflection",
            target_id=str(stale.pk),
            before={"status": Reflection.Status.STALE, "version": stale.version},
            after={"status": Reflection.Status.SUPERSEDED, "replacedBy": replacements},
            reason="re-derived by the Reflector from its sources as they now stand",
        )


def _reflect(run: ReflectorRun, token: uuid.UUID, started: float) -> None:
    conversation = run.conversation
    inputs = _reflection_inputs(
        conversation=conversation,
        # A run scheduled by a correction re-derives only: active observations wait for
        # their threshold as they would have without it.
        include_active=run.trigger != PipelineRun.Trigger.CORRECTION,
    )
    engine = engine_for_workspace(conversation.workspace)
    sources_in = inputs.observations
    drafts = engine.reflect(sources_in, now=timezone.now()) if sources_in else []
    if sources_in and not drafts:
        # Storing nothing would silently drop the observations from the context.
        raise EngineError("the engine returned an empty reflection")
    input_ids = {o.id for o in sources_in}
    observed = {o.id: o.observed_at for o in sources_in}
    texts = {o.id: o.text for o in sources_in}
    written_at = timezone.now()
    windows = {
        str(pk): (start, end, start_at, end_at)
        for pk, start, end, start_at, end_at in Observation.objects.filter(
            pk__in=input_ids
        ).values_list(
            "pk", "window_start_seq", "window_end_seq", "window_start_at", "window_end_at"
        )
    }
    # A re-derived reflection takes the generation of the stale one it replaces, so it
    # is served where that one was.
    replaced_generation: dict[str, int] = {}
    for stale in inputs.stale:
        for i in stale.source_observation_ids:
            replaced_generation[str(i)] = min(
                replaced_generation.get(str(i), stale.generation), stale.generation
            )
    stale_sources = set(replaced_generation)
    with transaction.atomic():
        _check_inputs_unchanged(conversation, inputs)
        generation = (
            Reflection.objects.filter(conversation=conversation).aggregate(g=Max("generation"))["g"]
            or 0
        ) + 1
        reflections = []
        for draft in drafts:
            sources = [i for i in dict.fromkeys(draft.source_observation_ids) if i in input_ids]
            if not sources or draft.priority not in PRIORITIES or not draft.text.strip():
                raise EngineError("the engine returned a reflection without valid sources")
            spans = [windows[i] for i in sources if windows.get(i) and windows[i][0] is not None]
            replaced = [replaced_generation[i] for i in sources if i in replaced_generation]
            reflections.append(
                Reflection(
                    conversation=conversation,
                    text=draft.text.strip(),
                    priority=draft.priority,
                    generation=min(replaced) if replaced else generation,
                    # The newest of its sources: what the reflection knows is as of then.
                    observed_at=max(observed[i] for i in sources),
                    referenced_at=draft.referenced_at,
                    written_at=written_at,
                    grounding=grounding_score(draft.text, [texts[i] for i in sources]),
                    window_start_seq=min((s[0] for s in spans if s[0] is not None), default=None),
                    window_end_seq=max((s[1] for s in spans if s[1] is not None), default=None),
                    window_start_at=min((s[2] for s in spans if s[2]), default=None),
                    window_end_at=max((s[3] for s in spans if s[3]), default=None),
                    source_observation_ids=sources,
                    engine=engine.name,
                    model_name=_reflector_model(engine),
                    tags=draft.tags,
                    topics=draft.topics,
                    token_count=token_count(draft.text.strip()),
                )
            )
        _finish(
            ReflectorRun,
            run,
            token,
            started=started,
            engine=engine.name,
            model_name=_reflector_model(engine),
            prompt_version=engine.prompt_version,
            generation=max((r.generation for r in reflections), default=None),
            items_in=len(sources_in),
            items_out=len(reflections),
            tokens_in=sum(o.token_count for o in sources_in),
            tokens_out=sum(r.token_count for r in reflections),
        )
        Reflection.objects.bulk_create(reflections)
        linked: set[str] = set()
        for reflection in reflections:
            # Each observation links to the first reflection that cites it: an active
            # one becomes reflected, a stale reflection's source moves to its successor.
            ids = [i for i in reflection.source_observation_ids if i not in linked]
            Observation.objects.filter(
                Q(status=Observation.Status.ACTIVE) | Q(pk__in=stale_sources & set(ids)),
                pk__in=ids,
            ).update(status=Observation.Status.REFLECTED, reflection=reflection)
            linked.update(ids)
        # Inputs no reflection cites (merged away or superseded) leave the context too;
        # they stay stored and inspectable.
        Observation.objects.filter(pk__in=input_ids, status=Observation.Status.ACTIVE).update(
            status=Observation.Status.REFLECTED
        )
        Observation.objects.filter(
            pk__in=stale_sources - linked, reflection__in=[r.pk for r in inputs.stale]
        ).update(reflection=None)
        _supersede_stale(conversation, inputs, reflections)
        if reflections:
            audit_record(
                workspace_id=conversation.workspace_id,
                actor=SYSTEM_ACTOR,
                action="memory.reflect",
                target_type="reflector_run",
                target_id=str(run.pk),
                after={
                    "conversationId": str(conversation.pk),
                    "reflections": [str(r.pk) for r in reflections],
                    "observationsReflected": len(input_ids),
                    "trigger": run.trigger,
                },
            )
        Conversation.objects.filter(pk=conversation.pk).update(
            memory_version=F("memory_version") + 1
        )


def reflector_run_execute(
    *,
    run_id: uuid.UUID | str,
    final_attempt: bool = True,
    retry_in: float = 0,
    deadline: float | None = None,
) -> RunOutcome:
    """Claim and run the reflector run; after a retryable error that is not the final
    attempt, the run is RETRYING, to be tried again in ``retry_in`` seconds. Past
    ``deadline`` (``time.monotonic()``; main thread only) the run goes back to the queue."""
    return _execute(
        ReflectorRun,
        run_id,
        _reflect,
        final_attempt=final_attempt,
        retry_in=retry_in,
        deadline=deadline,
    )


# --- on demand and the sweeper -----------------------------------------------------------------


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


def run_now(*, kind: str, conversation: Conversation, wait: bool) -> AnyRun:
    """Schedule a run on demand; with ``wait``, run it here (or wait for the worker that
    has it) until it finishes or MEMDESK_RUN_WAIT_SECONDS pass. That bound stays under
    the web server's timeout (settings check it), so the request is never killed
    mid-run: a run not finished by then goes back to the queue, still open, for a worker."""
    model: type[AnyRun]
    run: AnyRun
    if kind == "observe":
        model, execute = ObserverRun, observer_run_execute
        run = observer_schedule(conversation=conversation, trigger=PipelineRun.Trigger.MANUAL)
    else:
        model, execute = ReflectorRun, reflector_run_execute
        run = reflector_schedule(conversation=conversation, trigger=PipelineRun.Trigger.MANUAL)
    if not wait:
        return run
    deadline = time.monotonic() + settings.MEMDESK_RUN_WAIT_SECONDS
    current = run
    if can_interrupt_runs():
        current = execute(run_id=run.pk, deadline=deadline).run or run
    while current.is_open and time.monotonic() < deadline:
        time.sleep(0.2)
        current = model.objects.get(pk=run.pk)
    return current


def pipeline_sweep() -> dict[str, int]:
    """Re-enqueue lost runs, schedule runs that are due but were never scheduled (for
    example because the broker was down when the messages arrived), and observe what
    conversations that went quiet left unobserved."""
    now = timezone.now()
    counts = {"requeued": 0, "observer_scheduled": 0, "reflector_scheduled": 0}
    for model, task_name in RUN_TASKS.items():
        lost = model.objects.filter(
            Q(status=PipelineRun.Status.PENDING, created_at__lt=now - STALE_PENDING)
            | Q(status=PipelineRun.Status.RETRYING, next_attempt_at__lt=now - STALE_PENDING)
            | Q(status=PipelineRun.Status.RUNNING, lease_expires_at__lt=now)
        ).values_list("pk", flat=True)
        for run_id in lost:
            enqueue_on_commit(task_name, str(run_id))
            counts["requeued"] += 1
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return counts
    candidates = (
        Conversation.objects.filter(updated_at__gte=now - SWEEP_LOOKBACK)
        .select_related("workspace")
        .order_by("-updated_at")[:SWEEP_BATCH]
    )
    for conversation in candidates:
        with transaction.atomic():
            if observer_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER, now=now
            ):
                counts["observer_scheduled"] += 1
            if reflector_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER
            ):
                counts["reflector_scheduled"] += 1
    return counts
