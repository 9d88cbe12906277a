"""The Observer and Reflector pipeline: when runs are due (``scheduling``), claiming them
and storing what an engine returns (``runs``), the engine itself (``engines``), the two
kinds of run (``observer``, ``reflector``), a run asked for now (``on_demand``, bounded
by ``waiting``) and the periodic ``sweep``.

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

# The names code outside the package imported from ``memory.pipeline`` before it was
# split; importers move to the modules themselves, and these re-exports go.
from memory.pipeline.observer import PREVIOUS_OBSERVATIONS_TAIL, observer_run_execute
from memory.pipeline.on_demand import run_now
from memory.pipeline.reflector import observations_for_reflection, reflector_run_execute
from memory.pipeline.runs import (
    RunOutcome,
    observer_run_fail_interrupted,
    reflector_run_fail_interrupted,
    run_cancel,
    run_get,
)
from memory.pipeline.scheduling import (
    observer_schedule,
    observer_schedule_if_due,
    reflector_schedule,
    reflector_schedule_for_correction,
    reflector_schedule_if_due,
    unobserved_token_count,
)
from memory.pipeline.sweep import pipeline_sweep
from memory.selectors import unobserved_messages

__all__ = [
    "PREVIOUS_OBSERVATIONS_TAIL",
    "RunOutcome",
    "observations_for_reflection",
    "observer_run_execute",
    "observer_run_fail_interrupted",
    "observer_schedule",
    "observer_schedule_if_due",
    "pipeline_sweep",
    "reflector_run_execute",
    "reflector_run_fail_interrupted",
    "reflector_schedule",
    "reflector_schedule_for_correction",
    "reflector_schedule_if_due",
    "run_cancel",
    "run_get",
    "run_now",
    "unobserved_messages",
    "unobserved_token_count",
]
