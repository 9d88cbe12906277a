"""The contract every Observer/Reflector engine implements.

Engines are pure with respect to the database: they receive the messages or
observations as plain dataclasses and return drafts. Storing, provenance checks,
redaction and run bookkeeping are the pipeline's job, not the engine's; so is dating a
note by when its sources were said, which the pipeline reads off the sources a draft
names. An engine dates only the events a note talks about (``referenced_at``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

PRIORITIES = ("high", "medium", "low", "completed")
# The system message that carries memory into a prompt. The Observer recognises it by
# this first line and never observes it, so memory cannot feed on itself.
MEMORY_BLOCK_HEADER = "Relevant memory for this conversation"
# How much of a window the Observer keeps: a workspace trades compression for detail.
# The levels and what each measured are in docs/benchmarks.md ("Fidelity").
FIDELITIES = ("compact", "balanced", "detailed")
DEFAULT_FIDELITY = "balanced"


@dataclass(frozen=True)
class SourceMessage:
    id: str
    seq: int
    role: str  # user | assistant | system | tool
    content: str
    created_at: datetime
    tool_name: str = ""
    speaker: str = ""  # the participant's name when the message carries one


@dataclass(frozen=True)
class DraftObservation:
    text: str
    priority: str  # one of PRIORITIES
    referenced_at: datetime | None  # when the event it talks about happens/happened
    source_message_ids: list[str]  # ids of the messages this note came from, in seq order
    tags: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ObserverOutput:
    observations: list[DraftObservation]
    current_task: str | None = None
    suggested_response: str | None = None


@dataclass(frozen=True)
class SourceObservation:
    id: str
    text: str
    priority: str
    observed_at: datetime
    referenced_at: datetime | None
    token_count: int


@dataclass(frozen=True)
class DraftReflection:
    """One condensed fact; ``source_observation_ids`` are the observations it stands for
    (see ``Engine.reflect``)."""

    text: str
    priority: str
    referenced_at: datetime | None
    source_observation_ids: list[str]
    tags: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


class EngineError(Exception):
    """The engine could not produce acceptable output; stored memory must stay as it was.

    ``retryable`` says whether trying the same input again later may succeed (timeouts,
    rate limits, provider errors) or not (degenerate or non-compressing output).
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class Engine(Protocol):
    name: str  # "extractive", "openai"
    model: str  # model name, "" for extractive
    prompt_version: str  # "" when the engine uses no prompt

    def observe(
        self,
        messages: Sequence[SourceMessage],
        *,
        previous_observations: Sequence[str],
        now: datetime,
        fidelity: str = DEFAULT_FIDELITY,
    ) -> ObserverOutput: ...

    def reflect(
        self, observations: Sequence[SourceObservation], *, now: datetime
    ) -> list[DraftReflection]:
        """Condense the observations into fewer, shorter reflections.

        A reflection cites every observation it condenses (merges, supersedes, sums
        up); what it cites leaves the context, what no reflection cites stays served as
        an observation. So a reflection never repeats one observation: an observation
        nothing condenses is simply left out, and no reflection at all is a legitimate
        answer (nothing to condense)."""
        ...
