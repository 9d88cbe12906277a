"""Grounding scores for the observations and reflections written before notes were scored."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import transaction
from django.db.models import QuerySet

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from memory.grounding import grounding_score
from memory.models import Message, Observation, Reflection
from tenancy.models import Workspace

NoteT = TypeVar("NoteT", Observation, Reflection)


def _grounding_backfill_tier(
    rows: QuerySet[NoteT],
    *,
    source_ids: Callable[[NoteT], list[str]],
    source_texts: Callable[[set[str]], dict[str, str]],
    batch_size: int,
) -> dict[str, int]:
    counts = {"scored": 0, "withoutSources": 0, "sourcesGone": 0}
    last_pk = None
    while True:
        with transaction.atomic():
            page = rows.filter(pk__gt=last_pk) if last_pk is not None else rows
            # Locked, so that an edit that rescored a note meanwhile is not overwritten.
            batch = list(page.select_for_update(of=("self",))[:batch_size])
            if not batch:
                return counts
            last_pk = batch[-1].pk
            texts = source_texts({str(i) for row in batch for i in source_ids(row)})
            scored = []
            for row in batch:
                ids = [str(i) for i in source_ids(row)]
                if not ids:
                    counts["withoutSources"] += 1
                elif any(i not in texts for i in ids):
                    counts["sourcesGone"] += 1
                else:
                    row.grounding = grounding_score(row.text, [texts[i] for i in ids])
                    scored.append(row)
            rows.model._default_manager.bulk_update(scored, ["grounding"])
            counts["scored"] += len(scored)


def grounding_backfill(
    *, workspace: Workspace, actor: Actor, batch_size: int = 500
) -> dict[str, dict[str, int]]:
    """Score the observations and reflections that have no grounding score (written
    before scores existed) as new ones are scored: an observation against its source
    messages, a reflection against its source observations, as they are stored.

    A note without sources keeps no score (nothing to check it against), and so does a
    note whose sources are not all still stored (retention deleted some): against part
    of its sources it would be flagged for claims the missing ones made. Batches of
    ``batch_size`` rows, each its own transaction; then one audit event with the counts
    per tier, if anything was scored. Running it again scores nothing more.
    """
    if batch_size < 1:
        raise MemdeskError("invalid_batch_size", "batch_size must be at least 1.")
    report: dict[str, dict[str, int]] = {}
    try:
        report["observations"] = _grounding_backfill_tier(
            Observation.objects.filter(
                conversation__workspace=workspace, grounding__isnull=True
            ).order_by("pk"),
            source_ids=lambda observation: observation.source_message_ids,
            source_texts=lambda ids: {
                str(pk): f"{content} {tool_name}"
                for pk, content, tool_name in Message.objects.filter(pk__in=ids).values_list(
                    "pk", "content", "tool_name"
                )
            },
            batch_size=batch_size,
        )
        report["reflections"] = _grounding_backfill_tier(
            Reflection.objects.filter(
                conversation__workspace=workspace, grounding__isnull=True
            ).order_by("pk"),
            source_ids=lambda reflection: reflection.source_observation_ids,
            source_texts=lambda ids: {
                str(pk): text
                for pk, text in Observation.objects.filter(pk__in=ids).values_list("pk", "text")
            },
            batch_size=batch_size,
        )
    finally:
        # Also when a batch failed: the batches before it are committed, and counted.
        if any(counts["scored"] for counts in report.values()):
            audit_record(
                workspace_id=workspace.pk,
                actor=actor,
                action="grounding.backfill",
                target_type="workspace",
                target_id=str(workspace.pk),
                after={**report, "finished": len(report) == 2},
                reason="grounding scores for notes written before they were scored",
            )
    return report
