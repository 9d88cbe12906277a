"""The product's services and pipeline on a throwaway database: a history is appended
through ``messages_append`` and observed and reflected by the real runs, and what
``GET /context`` would serve is read back. Django is set up, and the database migrated,
before a ``Pipeline`` is made (bench/memory_quality.py does both).

The sweeper is played in message time: after each session the conversation's
``updated_at`` is set to the session's last turn (``messages_append`` records the wall
clock, and the bench writes a year of sessions in seconds), and before the next session,
and once more at the history's ``asked_at``, the bench calls what ``pipeline_sweep``
calls for a conversation, with ``now`` the next session's start, and executes what it
schedules, as the worker would."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bench.quality.datasets import History


@dataclass
class Note:
    text: str
    observed_at: datetime
    referenced_at: datetime | None
    window_start_at: datetime | None
    window_end_at: datetime | None
    kind: str  # observation | reflection


@dataclass
class Reflected:
    """What the Reflector made of one conversation: its active reflections."""

    reflections: int = 0
    single_source: int = 0  # reflections citing exactly one observation
    source_tokens: int = 0  # tokens of the observations the reflections cite
    reflection_tokens: int = 0


@dataclass
class Served:
    """What the context serves for one history under one variant."""

    memory_text: str  # the Reflections and Observations sections
    recent_text: str  # the Recent Messages section
    notes: list[Note]
    cpu_seconds: float  # in pipeline runs
    engine_seconds: float  # in the engine's observe and reflect alone
    reflected: Reflected = field(default_factory=Reflected)

    @property
    def text(self) -> str:
        return f"{self.memory_text}\n\n{self.recent_text}"


def split_context(text: str) -> tuple[str, str]:
    """(memory sections, recent-messages section) of a rendered text context."""
    memory: list[str] = []
    recent: list[str] = []
    for section in text.split("\n\n## "):
        section = section.removeprefix("## ")
        (recent if section.startswith("Recent Messages") else memory).append(section)
    return "\n\n".join(memory), "\n\n".join(recent)


class Pipeline:
    def __init__(self) -> None:
        self.engine_seconds = 0.0

    def clock_engine(self) -> None:
        """Count the engine's own share of a run's CPU (the rest is claiming, redaction
        gates and storing): its two methods are wrapped with a clock for this process."""
        from memory.engines.extractive import ExtractiveEngine

        for name in ("observe", "reflect"):
            setattr(ExtractiveEngine, name, self._clocked(getattr(ExtractiveEngine, name)))

    def _clocked(self, method: Any) -> Any:
        def clocked(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return method(*args, **kwargs)
            finally:
                self.engine_seconds += time.process_time() - started

        return clocked

    def workspace(
        self, name: str, *, redact_before_observation: bool = True, fidelity: str = ""
    ) -> Any:
        """A workspace with the default redaction policy, redacting messages before
        observation or (``redact_before_observation=False``) only observations before
        reflection, and ``fidelity`` (blank: MEMDESK_OBSERVER_FIDELITY)."""
        from governance.redaction.policy import redaction_policy_get_or_create
        from memory.engines.base import FIDELITIES
        from tenancy.services import workspace_get_or_create

        if fidelity and fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}; got {fidelity!r}")
        workspace = workspace_get_or_create(name=name)
        if fidelity:
            workspace.fidelity = fidelity
            workspace.save(update_fields=["fidelity"])
        policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
        if policy.redact_before_observation != redact_before_observation:
            policy.redact_before_observation = redact_before_observation
            policy.save(update_fields=["redact_before_observation"])
        return workspace

    def _run_due(self, conversation: Any) -> None:
        from memory.models import ObserverRun, PipelineRun, ReflectorRun
        from memory.pipeline.observer import observer_run_execute
        from memory.pipeline.reflector import reflector_run_execute

        for model, execute in (
            (ObserverRun, observer_run_execute),
            (ReflectorRun, reflector_run_execute),
        ):
            for run_id in model.objects.filter(
                conversation=conversation, status=PipelineRun.Status.PENDING
            ).values_list("pk", flat=True):
                execute(run_id=run_id)

    def _sweep(self, conversation: Any, now: datetime) -> None:
        """What the sweeper (``pipeline_sweep``) does for one conversation at ``now``:
        schedule the Observer if due (idle for MEMDESK_OBSERVER_IDLE_MINUTES, or over the
        threshold) and the Reflector if due; then run what was scheduled. ``pipeline_sweep``
        itself is not called: it takes the wall clock as now and sweeps every conversation
        of every variant."""
        from django.db import transaction

        from memory.models import PipelineRun
        from memory.pipeline.scheduling import observer_schedule_if_due, reflector_schedule_if_due

        with transaction.atomic():
            observer_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER, now=now
            )
            reflector_schedule_if_due(
                conversation=conversation, trigger=PipelineRun.Trigger.SWEEPER
            )
        self._run_due(conversation)

    def ingest(self, workspace: Any, history: History, *, sweep: bool) -> tuple[Any, float]:
        """Append the sessions and run what becomes due; with ``sweep``, also what the
        sweeper finds due before each next session and at ``asked_at``. Returns the
        conversation and the CPU seconds spent in pipeline runs."""
        from memory.models import Conversation
        from memory.services.conversations import conversation_create
        from memory.services.messages import MessageInput, messages_append

        conversation = conversation_create(
            workspace=workspace, title=history.history_id, created_at=history.sessions[0].began
        )
        cpu = 0.0
        for session in history.sessions:
            if sweep:
                started = time.process_time()
                self._sweep(conversation, now=session.began)
                cpu += time.process_time() - started
            items = [
                MessageInput(
                    role=turn.role,
                    content=turn.content,
                    name=turn.name,
                    tool_name=turn.tool_name,
                    created_at=session.began + i * history.turn_step,
                )
                for i, turn in enumerate(session.turns)
            ]
            for start in range(0, len(items), 100):
                messages_append(conversation=conversation, items=items[start : start + 100])
                started = time.process_time()
                self._run_due(conversation)
                cpu += time.process_time() - started
            if items:
                # Writes are simulated in message time: the conversation was last written
                # when the session's last turn was said, not when the bench appended it
                # (which is what messages_append records), so the idle rule sees the gaps
                # between sessions.
                said = session.began + (len(items) - 1) * history.turn_step
                Conversation.objects.filter(pk=conversation.pk).update(updated_at=said)
                conversation.updated_at = said
        if sweep:
            started = time.process_time()
            self._sweep(conversation, now=history.asked_at)
            cpu += time.process_time() - started
        return conversation, cpu

    def reflect(self, conversation: Any) -> float:
        """One on-demand Reflector run; its CPU seconds."""
        from memory.pipeline.on_demand import run_now

        started = time.process_time()
        run_now(kind="reflect", conversation=conversation, wait=True)
        return time.process_time() - started

    def served(self, conversation: Any, cpu_seconds: float, engine_seconds: float) -> Served:
        from memory.context.read import context_for_conversation
        from memory.models import Conversation, Observation
        from memory.selectors import active_observations, active_reflections

        conversation = Conversation.objects.get(pk=conversation.pk)
        text = context_for_conversation(
            conversation=conversation, fmt="text", max_tokens=None
        ).body.decode()
        memory, recent = split_context(text)
        reflections = list(active_reflections(conversation=conversation))
        notes = [
            Note(o.text, o.observed_at, o.referenced_at, o.window_start_at, o.window_end_at, kind)
            for kind, items in (
                ("reflection", reflections),
                ("observation", active_observations(conversation=conversation)),
            )
            for o in items
        ]
        cited = {str(i) for r in reflections for i in r.source_observation_ids}
        tokens = {
            str(pk): count
            for pk, count in Observation.objects.filter(conversation=conversation).values_list(
                "pk", "token_count"
            )
        }
        reflected = Reflected(
            reflections=len(reflections),
            single_source=sum(1 for r in reflections if len(r.source_observation_ids) == 1),
            source_tokens=sum(tokens.get(i, 0) for i in cited),
            reflection_tokens=sum(r.token_count for r in reflections),
        )
        return Served(memory, recent, notes, cpu_seconds, engine_seconds, reflected)

    def pseudonym_values(self, workspace: Any) -> dict[str, str]:
        """The workspace's mapping, label -> value, of the pseudonyms it still holds."""
        from governance.models import Pseudonym
        from governance.redaction.pseudonyms import decrypt

        values = {}
        for row in Pseudonym.objects.filter(
            workspace_id=workspace.pk, forgotten_at__isnull=True
        ).order_by("entity_type", "number"):
            value = decrypt(row.value_encrypted)
            if value is not None:
                values[row.label] = value
        return values
