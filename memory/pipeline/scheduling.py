"""When runs are due, and scheduling them.

Message writes never wait for a run: they call ``observer_schedule_after_append``, which
at most inserts a PENDING run and enqueues its task after the write commits (one open run
per conversation and kind), and which most writes answer from the conversation's row
alone (``UnobservedBound``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from core.queue import enqueue_on_commit
from memory.models import AnyRun, Conversation, ObserverRun, PipelineRun, ReflectorRun
from memory.selectors import active_observations, rederivable_reflections, unobserved_messages

RunT = TypeVar("RunT", ObserverRun, ReflectorRun)
# After a failed or cancelled run, automatic triggers wait this long before trying the
# same conversation again, so a provider that returns garbage is not called on every
# write, and a run a person stopped is not started again by the next message.
FAILURE_COOLDOWN = timedelta(minutes=5)
# The Celery task that executes each kind of run.
RUN_TASKS: dict[type[ObserverRun] | type[ReflectorRun], str] = {
    ObserverRun: "memory.tasks.observe_conversation",
    ReflectorRun: "memory.tasks.reflect_conversation",
}


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
    return _observer_due_check(conversation=conversation, trigger=trigger, now=now)[0]


def _observer_due_check(
    *, conversation: Conversation, trigger: str, now: datetime | None = None
) -> tuple[ObserverRun | None, int | None]:
    """``observer_schedule_if_due``, with the unobserved tokens it counted (None when a
    run was open and it did not count)."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None, None
    # Cheapest question first: with a run already open there is nothing to decide (an
    # EXISTS, not the run's row with its text columns).
    if _has_open_run(ObserverRun, conversation):
        return None, None
    idle = settings.MEMDESK_OBSERVER_IDLE_MINUTES
    quiet = bool(now and idle and conversation.updated_at <= now - timedelta(minutes=idle))
    threshold = 1 if quiet else conversation.effective_observer_threshold
    unobserved = unobserved_token_count(conversation=conversation)
    if unobserved < threshold or _recently_failed(ObserverRun, conversation):
        return None, unobserved
    return observer_schedule(conversation=conversation, trigger=trigger), unobserved


@dataclass(frozen=True)
class UnobservedBound:
    """What a message write's seq UPDATE returned of the conversation's
    ``unobserved_tokens_bound``, already counting the write's own tokens."""

    tokens: int | None
    version: int | None  # the memory_version the bound was counted at
    memory_version: int  # the conversation's, under the write's lock

    def below(self, threshold: int) -> bool:
        """Whether the unobserved tokens are certainly below ``threshold``: the bound was
        counted at the current memory_version (nothing has uncovered a message since) and
        is below it."""
        return (
            self.tokens is not None
            and self.version == self.memory_version
            and self.tokens < threshold
        )


def observer_schedule_after_append(
    *, conversation: Conversation, bound: UnobservedBound
) -> ObserverRun | None:
    """``observer_schedule_if_due`` for a message write, in its transaction. Below the
    threshold by ``bound``, nothing is queried (most writes); otherwise the check runs as
    it always did and leaves the exact count as the conversation's new bound.

    The bound is an upper bound while memory_version stands still: writes add their
    tokens to it, an Observer run that covers messages only lowers the truth, and every
    change that can uncover messages (an observation deleted or redacted, retention,
    erasure) moves memory_version, which sends the next write to count again. A write
    never schedules later than the exact check would."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    if bound.below(conversation.effective_observer_threshold):
        return None
    run, unobserved = _observer_due_check(
        conversation=conversation, trigger=PipelineRun.Trigger.THRESHOLD
    )
    if unobserved is not None:
        Conversation.objects.filter(pk=conversation.pk).update(
            unobserved_tokens_bound=unobserved, unobserved_bound_version=bound.memory_version
        )
    return run


def reflector_schedule_for_correction(*, conversation: Conversation) -> ReflectorRun | None:
    """Schedule the re-derivation of the conversation's stale reflections (or return the
    run already open, which re-derives them too). Called in the transaction that made
    them stale; the task is sent once it commits."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    return reflector_schedule(conversation=conversation, trigger=PipelineRun.Trigger.CORRECTION)


def _tokens_since_last_reflection(conversation: Conversation) -> int | None:
    """Tokens of the active observations written since the last successful Reflector run
    over active observations started; None when no run has read them yet. Older active
    observations are those that run left uncondensed: reading them again alone would
    find nothing new to condense."""
    last_started = (
        ReflectorRun.objects.filter(conversation=conversation, status=PipelineRun.Status.SUCCEEDED)
        .exclude(trigger=PipelineRun.Trigger.CORRECTION)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    if last_started is None:
        return None
    total = (
        active_observations(conversation=conversation)
        .filter(created_at__gt=last_started)
        .aggregate(total=Sum("token_count"))
    )
    return total["total"] or 0


def reflector_schedule_if_due(
    *, conversation: Conversation, trigger: str = PipelineRun.Trigger.THRESHOLD
) -> ReflectorRun | None:
    """Schedule a Reflector run if the active observations reached the threshold, or if
    stale reflections wait to be re-derived (their run failed, or was never sent).

    The observations a run leaves uncondensed stay active, so after a first run the
    threshold counts what was written since: active tokens must have grown by the
    threshold again, or a conversation whose notes do not condense would be reflected
    on every write and every sweep."""
    if not settings.MEMDESK_PIPELINE_ENABLED:
        return None
    if _has_open_run(ReflectorRun, conversation):
        return None
    threshold = conversation.effective_reflector_threshold
    due = active_observation_token_count(conversation=conversation) >= threshold
    if due:
        since = _tokens_since_last_reflection(conversation)
        due = since is None or since >= threshold
    if not due:
        if not rederivable_reflections(conversation=conversation).exists():
            return None
        trigger = PipelineRun.Trigger.CORRECTION
    if _recently_failed(ReflectorRun, conversation):
        return None
    return reflector_schedule(conversation=conversation, trigger=trigger)
