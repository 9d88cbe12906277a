"""What the retention, sweep and erasure modules share: the tiers, the limits and the
hashing of receipts."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Model

from governance.models import ContextRead
from memory.models import (
    Message,
    Observation,
    ReasoningStep,
    Reflection,
    ToolCall,
)

# Rows per batch (bench/retention.py; docs/benchmarks/2026-11-30.md, "Retention sweep
# against one bare DELETE"): each batch pays a commit (a WAL flush, about 40 ms on the
# benchmark machine), the conversations' lock and version, a hold re-check and its
# receipt. At 5,000 those made the sweep 4.5x one bare DELETE of the same rows, at
# 20,000 2.9x (before the set-based batches). A batch holds its conversations' row locks
# (an agent's append to them waits) for its transaction, about half a second at 20,000.
DEFAULT_BATCH_SIZE = 20_000
# The set-based batches (PostgreSQL, messages and observations) take about a third of
# the time per row, so 50,000 hold the conversations' locks about as long as 20,000 did,
# and halve the per-batch costs (commit, probe, receipt) again: 1.8x the bare DELETE
# against 2.0x at 20,000 (docs/benchmarks/2026-11-30.md, "Set-based batches"). No id of
# theirs is held in the worker, whatever the size. (SQLite also caps a statement's
# parameters below 50,000.)
SET_BASED_BATCH_SIZE = 50_000
MAX_DAYS = 36_500
# A sweep still RUNNING after this long lost its worker; the scheduler marks it failed so
# the next one can start (a live worker notices at its next batch and stops).
STALE_RUNNING = timedelta(hours=6)
# A PENDING sweep or erasure whose task never arrived (broker down) is enqueued again.
STALE_PENDING = timedelta(minutes=10)
BATCH_ATTEMPTS = 3
MAX_WINDOW_PAGES = 1 << 20

HASH_OF = (
    "sha256 of sorted lines '<kind>:<id>\\n' (kind: context_read, message, observation, "
    "reflection, tool_call, reasoning_step)"
)
ERASURE_HASH_OF = "sha256 of sorted lines '<conversation id>:<kind>:<id>\\n'"


@dataclass(frozen=True)
class Tier:
    kind: str  # the key in counts: "messages"
    line_kind: str  # in hashed lines and redaction target types: "message"
    model: type[Model]
    expires_by: str  # the timestamp compared with the cutoff
    days_field: str  # on RetentionPolicy
    related_name: str  # on Conversation


TIERS = (
    # In the order of their line kinds: an erasure streams each conversation's lines
    # into its hash tier by tier, ids ascending, and they must arrive sorted.
    # The read ledger: what agents were served, kept as long as its own period says.
    Tier(
        "contextReads",
        "context_read",
        ContextRead,
        "served_at",
        "context_read_days",
        "context_reads",
    ),
    Tier("messages", "message", Message, "created_at", "message_days", "messages"),
    Tier(
        "observations",
        "observation",
        Observation,
        "observed_at",
        "observation_days",
        "observations",
    ),
    # An agent's reasoning steps and tool calls are the raw record of the conversation as
    # its messages are, and are kept as long. Deleting a step only clears the link of
    # its tool calls, which go by their own age.
    Tier(
        "reasoningSteps",
        "reasoning_step",
        ReasoningStep,
        "created_at",
        "message_days",
        "reasoning_steps",
    ),
    Tier("reflections", "reflection", Reflection, "created_at", "reflection_days", "reflections"),
    Tier("toolCalls", "tool_call", ToolCall, "created_at", "message_days", "tool_calls"),
)


def zero_counts() -> dict[str, int]:
    return {tier.kind: 0 for tier in TIERS}


def line_hash(lines: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
    return digest.hexdigest()
