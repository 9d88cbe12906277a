"""A run a person or an agent asks for now, run in the request when it may wait."""

from __future__ import annotations

import time

from django.conf import settings

from memory.models import AnyRun, Conversation, ObserverRun, PipelineRun, ReflectorRun
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.runs import waits_for_provider
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.pipeline.waiting import can_interrupt_runs


def run_now(*, kind: str, conversation: Conversation, wait: bool) -> AnyRun:
    """Schedule a run on demand; with ``wait``, run it here (or wait for the worker that
    has it) until it finishes or MEMDESK_RUN_WAIT_SECONDS pass. That bound stays under
    the web server's timeout (settings check it), so the request is never killed
    mid-run: a run not finished by then goes back to the queue, still open, for a worker.
    A run left waiting for its provider (down) is returned at once: the sweeper sends it
    again when the provider answers."""
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
    while current.is_open and not waits_for_provider(current) and time.monotonic() < deadline:
        time.sleep(0.2)
        current = model.objects.get(pk=run.pk)
    return current
