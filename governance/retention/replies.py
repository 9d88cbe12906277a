"""The stored idempotent replies a retention batch deletes: those repeating a row the
batch swept (message contents, a step's reasoning, a tool's output), in the batch's own
transaction and counted in its receipt, so that replaying their key can never answer
with what retention deleted."""

from __future__ import annotations

from governance.retention.common import Tier
from governance.retention.sql import among
from memory.models import IdempotencyRecord


def replies_delete(tier: Tier, conversation_ids: list[str]) -> dict[str, int]:
    """Delete the replies in the batch's conversations that repeat a row of ``tier`` no
    longer stored, and count them as ``idempotencyRecords``. Run after the batch's
    delete, under its conversations' locks. A tier no reply repeats (observations,
    reflections) has nothing to count."""
    if tier.line_kind not in IdempotencyRecord.Repeats.values:
        return {}
    replies = IdempotencyRecord.objects.filter(
        among(IdempotencyRecord, "conversation", conversation_ids), repeats=tier.line_kind
    ).with_rows_gone()
    return {"idempotencyRecords": replies.delete()[0]}
