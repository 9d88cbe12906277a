"""The sweep: deletes what has expired in short batches, each with its receipt."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, reset_queries, transaction
from django.db.models import DO_NOTHING, Exists, F, Model, OuterRef
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from core.transactions import retried_on_conflict
from governance.audit.writer import audit_record
from governance.models import (
    ContextManifest,
    ContextRead,
    ErasureRequest,
    MessageScan,
    PseudonymSighting,
    RedactionFinding,
    RestrictedOriginal,
    RetentionPolicy,
    RetentionSweep,
)
from governance.redaction.pseudonyms import pseudonyms_forget_unheld
from governance.retention import sql
from governance.retention.common import (
    BATCH_ATTEMPTS,
    DEFAULT_BATCH_SIZE,
    HASH_OF,
    SET_BASED_BATCH_SIZE,
    STALE_PENDING,
    STALE_RUNNING,
    TIERS,
    Tier,
    line_hash,
    zero_counts,
)
from governance.retention.plan import RetentionPlan, TierRule, count_due, is_held
from governance.retention.replies import replies_delete
from governance.retention.sql import Candidate, among
from governance.selectors import (
    active_hold_sets,
)
from memory.models import (
    Conversation,
    Message,
    Observation,
    ObservationVersion,
    Pin,
    Reflection,
    ReflectionVersion,
)
from tenancy.models import Workspace

logger = logging.getLogger(__name__)


class _SweepStopped(Exception):
    """The sweep's row left RUNNING (marked failed as abandoned): stop deleting."""


@dataclass
class _SweepProgress:
    counts: dict[str, int] = field(default_factory=zero_counts)
    related: Counter[str] = field(default_factory=Counter)
    by_policy: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0

    @property
    def deleted(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _Batch:
    tier: Tier
    deleted: int
    by_policy: Counter[str]
    related: dict[str, int]


def _cascades(tier: Tier) -> bool:
    """Whether deleting the tier's rows makes Django's collector change other rows
    (deleting a reflection clears its observations' link)."""
    return any(rel.on_delete is not DO_NOTHING for rel in tier.model._meta.related_objects)


def _set_based(tier: Tier) -> bool:
    """PostgreSQL, and nothing Django would cascade to (pins of a message are left to
    _delete_related): each batch is two statements, ``sql.lock_window`` and
    ``sql.delete_window``, and no row id travels through Python."""
    return connection.vendor == "postgresql" and not _cascades(tier)


def _scan(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]] | Iterator[sql.Window]:
    """Batches of rows that may be due: older than the latest cutoff any policy gives
    this tier, outside held conversations. Each conversation's own rule is applied
    afterwards, under its lock. With a single possible cutoff the SQL has applied it
    already, and the timestamps are not even read (parsing them cost a tenth of a
    batch's time). Set-based (``_set_based``), windows of the table instead, which the
    batch itself searches."""
    if _set_based(tier):
        return sql.heap_windows(tier.model, batch_size)
    if connection.vendor == "postgresql":
        return sql.scan_heap_order(plan, tier, holds, batch_size)
    return _scan_id_order(plan, tier, holds, batch_size)


def _scan_id_order(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]]:
    days_list = plan.possible_days(tier)
    rows = tier.model.objects.filter(  # type: ignore[attr-defined]  # Tier.model is type[Model]
        conversation__workspace_id=plan.workspace_id,
        **{f"{tier.expires_by}__lt": plan.cutoff(days_list[0])},
    )
    held_conversations, held_users = holds
    if held_conversations:
        rows = rows.exclude(conversation_id__in=sorted(held_conversations))
    if held_users:
        rows = rows.exclude(conversation__user_id__in=sorted(held_users))
    stamp = [] if len(days_list) == 1 else [tier.expires_by]
    after_pk = None
    while True:
        page = rows if after_pk is None else rows.filter(pk__gt=after_pk)
        found = list(page.order_by("pk").values_list("pk", "conversation_id", *stamp)[:batch_size])
        if not found:
            return
        after_pk = found[-1][0]
        yield [(str(row[0]), str(row[1]), row[2] if stamp else None, None) for row in found]
        if len(found) < batch_size:
            return


def _lock_conversations(conversation_ids: list[str]) -> list[tuple[str, str, Any]]:
    """Lock the batch's conversations before anything else and move their
    memory_version; return (id, user_id, tags) of each.

    The lock orders the batch against a legal hold being placed (placing one locks the
    same rows), so a hold is either committed before the batch reads the holds, and
    honoured, or waits for the batch. The version moves because the rendered context is
    cached by (last_seq, memory_version) and deleting rows changes neither seq; it moves
    even where nothing turns out to be due, which costs only a cache miss. updated_at
    stays: a sweep is not activity, and conversation lists are ordered by it."""
    if connection.vendor == "postgresql":
        return sql.lock_conversations(conversation_ids)
    rows = Conversation.objects.filter(among(Conversation, "pk", conversation_ids))
    rows.update(memory_version=F("memory_version") + 1)  # SQLite: takes the write lock
    return [
        (str(pk), user_id, tags)
        for pk, user_id, tags in rows.order_by("pk").values_list("pk", "user_id", "tags")
    ]


def _lock_and_delete(tier: Tier, rows: list[Candidate]) -> list[str]:
    """Delete those of ``rows`` that no other transaction holds, and return their ids
    sorted (the text order of UUIDs is the database's order of them).

    SKIP LOCKED: a row another transaction is changing right now (an edit, a delete) is
    left to the next sweep instead of waited for, so a sweep cannot deadlock with it,
    and the rows locked here are exactly the rows deleted and hashed."""
    model = tier.model  # on PostgreSQL only a tier that cascades comes here (_set_based)
    ids = [row[0] for row in rows]
    locked = sorted(
        str(pk)
        for pk in model.objects.select_for_update(skip_locked=True)  # type: ignore[attr-defined]  # type[Model]
        .filter(among(model, "pk", ids))
        .values_list("pk", flat=True)
    )
    if locked:
        # Through the collector: deleting a reflection clears its observations' link.
        model.objects.filter(among(model, "pk", locked)).delete()  # type: ignore[attr-defined]  # type[Model]
    return locked


def _related_tables(tier: Tier) -> list[tuple[str, type[Model], str, dict[str, str]]]:
    """What hangs off a tier's rows by id rather than by a cascading foreign key: the
    redaction findings, the restricted originals (the unredacted text must not outlive
    its row), the scans of deleted messages, the pseudonym sightings (what holds a
    pseudonym's value), the earlier versions of deleted observations and reflections,
    and the pins that quote deleted messages (their foreign key is checked at commit, so
    they must go in this transaction)."""
    tables: list[tuple[str, type[Model], str, dict[str, str]]] = [
        ("redactionFindings", RedactionFinding, "target_id", {"target_type": tier.line_kind}),
        ("restrictedOriginals", RestrictedOriginal, "target_id", {"target_type": tier.line_kind}),
        ("pseudonymSightings", PseudonymSighting, "target_id", {"target_type": tier.line_kind}),
    ]
    if tier.model is Observation:
        tables.append(("observationVersions", ObservationVersion, "observation_id", {}))
    if tier.model is Reflection:
        tables.append(("reflectionVersions", ReflectionVersion, "reflection_id", {}))
    if tier.model is Message:
        tables.append(("pins", Pin, "message", {}))
        tables.append(("messageScans", MessageScan, "message_id", {}))
    return tables


_Related = dict[str, tuple[Any, bool]]  # key -> (rows in the batch's conversations, any?)


def _related_probe(tier: Tier, conversation_ids: list[Any]) -> _Related:
    """One query asks every table of ``_related_tables`` whether it has rows in the
    batch's few conversations, which is cheap; only the tables that answer yes are
    searched by id."""
    tables = _related_tables(tier)
    in_batch = {
        key: model.objects.filter(  # type: ignore[attr-defined]  # type[Model]
            among(model, "conversation", conversation_ids), **where
        )
        for key, model, _, where in tables
    }
    # Each query compiled on its own and asked as one EXISTS apiece, in one round trip.
    # (An ORM Exists annotation would alias the tables, which ``among`` cannot follow.)
    compiled = [rows.values("pk").query.sql_with_params() for rows in in_batch.values()]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT " + ", ".join(f"EXISTS({query})" for query, _ in compiled),
            [param for _, params in compiled for param in params],
        )
        answers = cursor.fetchone()
    return {
        key: (rows, bool(answer))
        for (key, rows), answer in zip(in_batch.items(), answers, strict=True)
    }


def _delete_related(tier: Tier, ids: list[Any], probe: _Related) -> tuple[dict[str, int], set[int]]:
    """Delete what hangs off the deleted rows (``_related_tables``) where ``probe``
    found rows, and return the counts with the pseudonyms whose values the deleted rows
    held (to forget if nothing else does)."""
    pseudonyms: set[int] = set()
    sightings, any_sightings = probe["pseudonymSightings"]
    if any_sightings:
        seen = sightings.filter(among(PseudonymSighting, "target_id", ids))
        pseudonyms = set(seen.values_list("pseudonym_id", flat=True).distinct())
    related = {}
    for key, model, id_field, _ in _related_tables(tier):
        rows, found = probe[key]
        related[key] = rows.filter(among(model, id_field, ids)).delete()[0] if found else 0
    return related, pseudonyms


def _delete_batch(
    *,
    plan: RetentionPlan,
    tier: Tier,
    rows: list[Candidate] | sql.Window,
    sweep: RetentionSweep,
    progress: _SweepProgress,
    actor: Actor,
    log: sql.DeletedLog,
) -> _Batch | None:
    """One batch in one transaction: lock the conversations, re-check the holds under
    that lock, delete what is due and what hangs off it (the idempotent replies that
    repeat it too), and write the receipt."""
    with transaction.atomic():
        if isinstance(rows, sql.Window):
            deleted = _delete_window(plan, tier, rows, progress, log)
        else:
            deleted = _delete_rows(plan, tier, rows, progress, log)
        if deleted is None:
            return None
        ids_sha256, by_conversation, rules, related, pseudonyms = deleted
        related.update(replies_delete(tier, sorted(by_conversation)))
        # Values no remaining message holds: their pseudonyms in memory become anonymous.
        related["pseudonymsForgotten"] = pseudonyms_forget_unheld(
            workspace_id=plan.workspace_id,
            pseudonym_ids=pseudonyms,
            actor=actor,
            target_type="retention_sweep",
            target_id=str(sweep.pk),
            reason="expired under retention",
        )
        by_policy: Counter[str] = Counter()
        for conversation_id, n in by_conversation.items():
            by_policy[str(rules[conversation_id].policy_id)] += n
        total = sum(by_conversation.values())
        counts = dict(progress.counts)
        counts[tier.kind] += total
        still_running = RetentionSweep.objects.filter(
            pk=sweep.pk, status=RetentionSweep.Status.RUNNING
        ).update(done=F("done") + total, counts=counts)
        if not still_running:
            raise _SweepStopped
        audit_record(
            workspace_id=plan.workspace_id,
            actor=actor,
            action="retention.delete",
            target_type="retention_sweep",
            target_id=str(sweep.pk),
            after={
                "sweepId": sweep.pk,
                "batch": progress.batches + 1,
                "kind": tier.kind,
                "counts": {tier.kind: total, **related},
                "byPolicy": dict(by_policy),
                "conversations": len(by_conversation),
                "idsSha256": ids_sha256,
                "hashOf": HASH_OF,
            },
            reason=f"expired under retention policy {', '.join(sorted(by_policy))}",
        )
    return _Batch(tier, total, by_policy, related)


# (ids hash, rows deleted per conversation, the rule of each, related counts, pseudonyms)
_Deleted = tuple[str, dict[str, int], dict[str, TierRule], dict[str, int], set[int]]


def _rules_of(
    plan: RetentionPlan, tier: Tier, conversations: list[tuple[str, str, Any]]
) -> dict[str, TierRule]:
    rules: dict[str, TierRule] = {}
    for conversation_id, _, tags in conversations:
        rule = plan.rules_for(tags)[tier.kind]
        if rule is not None:
            rules[conversation_id] = rule
    return rules


def _delete_rows(
    plan: RetentionPlan,
    tier: Tier,
    rows: list[Candidate],
    progress: _SweepProgress,
    log: sql.DeletedLog,
) -> _Deleted | None:
    """The batch of rows read by ``_scan``: the holds are read again after the lock,
    each row checked against its conversation's rule, the due ones deleted by id."""
    conversation_of = {row[0]: row[1] for row in rows}
    conversations = _lock_conversations(sorted(set(conversation_of.values())))
    holds = active_hold_sets(workspace_id=plan.workspace_id)
    rules = _rules_of(plan, tier, [c for c in conversations if not is_held(c[0], c[1], holds)])
    due = []
    for row in rows:
        rule = rules.get(row[1])
        if rule is not None and (row[2] is None or row[2] < rule.cutoff):
            due.append(row)
    if not due:
        return None
    ids = _lock_and_delete(tier, due)
    if not ids:
        return None
    by_conversation = Counter(conversation_of[pk] for pk in ids)
    related, pseudonyms = _delete_related(tier, ids, _related_probe(tier, sorted(by_conversation)))
    lines = [f"{tier.line_kind}:{pk}" for pk in ids]
    log.add(progress.batches + 1, lines)
    return (
        line_hash(f"{line}\n" for line in lines),
        dict(by_conversation),
        rules,
        related,
        pseudonyms,
    )


def _delete_window(
    plan: RetentionPlan,
    tier: Tier,
    window: sql.Window,
    progress: _SweepProgress,
    log: sql.DeletedLog,
) -> _Deleted | None:
    """The set-based batch: one statement finds the window's candidates and locks their
    conversations; a second, under those locks, re-checks the holds, deletes the due
    rows, logs them and hashes them. Ids reach Python only when rows hang off them."""
    rules = _rules_of(plan, tier, sql.lock_window(plan, tier, window))
    if not rules:
        return None
    probe = _related_probe(tier, sorted(rules))
    deleted = sql.delete_window(
        tier,
        window,
        {conversation_id: rule.cutoff for conversation_id, rule in rules.items()},
        log,
        progress.batches + 1,
        with_ids=any(found for _, found in probe.values()),
    )
    if not deleted.by_conversation:
        return None
    if deleted.ids:
        related, pseudonyms = _delete_related(tier, deleted.ids, probe)
    else:
        related, pseudonyms = {key: 0 for key in probe}, set()
    return deleted.ids_sha256, deleted.by_conversation, rules, related, pseudonyms


def _delete_batch_retrying(**kwargs: Any) -> _Batch | None:
    """A batch that loses a deadlock is tried again. Deleting a reflection clears the
    link from its observations, and an observation edit locks that row before it takes
    the conversation's lock, the reverse of a batch's order; PostgreSQL breaks the
    cycle by failing one of the two."""
    return retried_on_conflict(
        lambda: _delete_batch(**kwargs), attempts=BATCH_ATTEMPTS, name="retention batch"
    )


def _record_batch(progress: _SweepProgress, batch: _Batch) -> None:
    # Only after the batch committed: a rolled-back batch leaves no trace in the totals.
    progress.batches += 1
    progress.counts[batch.tier.kind] += batch.deleted
    progress.related.update(batch.related)
    for policy_id, n in batch.by_policy.items():
        progress.by_policy.setdefault(policy_id, zero_counts())[batch.tier.kind] += n


def _sweep_finish(
    sweep: RetentionSweep,
    plan: RetentionPlan,
    progress: _SweepProgress,
    log: sql.DeletedLog,
    status: str,
    error: str,
    actor: Actor,
    started: datetime,
    finished: datetime,
) -> None:
    with transaction.atomic():
        RetentionSweep.objects.filter(pk=sweep.pk, status=RetentionSweep.Status.RUNNING).update(
            status=status, error=error, counts=progress.counts, finished_at=finished
        )
        if progress.deleted or progress.related:
            audit_record(
                workspace_id=sweep.workspace_id,
                actor=actor,
                action="retention.sweep",
                target_type="retention_sweep",
                target_id=str(sweep.pk),
                after={
                    "sweepId": sweep.pk,
                    "status": status,
                    "policies": plan.snapshot(),
                    "cutoffs": {
                        tier.kind: {
                            str(days): plan.cutoff(days).isoformat()
                            for days in plan.possible_days(tier)
                        }
                        for tier in TIERS
                    },
                    "counts": progress.counts,
                    "related": dict(progress.related),
                    "byPolicy": progress.by_policy,
                    "batches": progress.batches,
                    "idsSha256": log.sha256(),
                    "hashOf": HASH_OF,
                    "requestedBy": sweep.triggered_by,
                    "startedAt": started.isoformat(),
                    "finishedAt": finished.isoformat(),
                },
                reason="retention sweep",
            )


def _manifests_unread_delete(
    plan: RetentionPlan, workspace_id: Any, holds: tuple[set[str], set[str]]
) -> int:
    """Delete the manifests of memory versions no ledger row names any more, noted
    before the ledger's oldest cutoff, but a conversation's current one (agents may
    still be served it, from a cache, without it being noted again) and a held
    conversation's; returns how many."""
    days = plan.possible_days(next(t for t in TIERS if t.model is ContextRead))
    if not days:
        return 0
    read = ContextRead.objects.filter(
        conversation_id=OuterRef("conversation_id"), memory_version=OuterRef("memory_version")
    )
    _, deleted = (
        ContextManifest.objects.filter(
            conversation__workspace_id=workspace_id, noted_at__lt=plan.cutoff(max(days))
        )
        .exclude(memory_version=F("conversation__memory_version"))
        .exclude(Exists(read))
        .exclude(conversation_id__in=list(holds[0]))
        .exclude(conversation__user_id__in=list(holds[1]))
        .delete()
    )
    return deleted.get(ContextManifest._meta.label, 0)


def retention_sweep(*, sweep_id: int, batch_size: int | None = None) -> RetentionSweep:
    """Run one queued sweep: delete every expired row of the workspace that no legal
    hold covers, tier by tier, ``batch_size`` rows per short transaction, each with its
    receipt; then write the summary receipt. Without ``batch_size``, a set-based tier
    takes ``SET_BASED_BATCH_SIZE`` rows per batch and the others ``DEFAULT_BATCH_SIZE``.

    Memory stays bounded by the batch: rows are read in windows, and the deleted ids
    wait for the summary's hash in a temporary table, not in the worker. Acts only if it
    claims the PENDING row, so a redelivered task does nothing.
    """
    if batch_size is not None and batch_size < 1:
        raise MemdeskError("invalid_batch_size", "batch_size must be at least 1.")
    started = timezone.now()
    claimed = RetentionSweep.objects.filter(
        pk=sweep_id, status=RetentionSweep.Status.PENDING, dry_run=False
    ).update(status=RetentionSweep.Status.RUNNING, started_at=started)
    sweep = RetentionSweep.objects.select_related("policy").get(pk=sweep_id)
    if not claimed:
        return sweep
    actor = Actor.from_label(sweep.triggered_by, role=sweep.triggered_by_role)
    plan = RetentionPlan.for_workspace(
        workspace_id=sweep.workspace_id, now=started, policy=sweep.policy
    )
    holds = active_hold_sets(workspace_id=sweep.workspace_id)
    progress = _SweepProgress()
    status, error = RetentionSweep.Status.COMPLETED, ""
    with sql.DeletedLog(sweep.pk) as log:
        try:
            if connection.vendor == "postgresql":
                total = sql.count_due_total(plan, holds)
            else:
                total = count_due(plan, holds).total
            RetentionSweep.objects.filter(pk=sweep.pk).update(total=total)
            for tier in TIERS:
                if not plan.possible_days(tier):
                    continue
                size = batch_size or (
                    SET_BASED_BATCH_SIZE if _set_based(tier) else DEFAULT_BATCH_SIZE
                )
                for rows in _scan(plan, tier, holds, size):
                    batch = _delete_batch_retrying(
                        plan=plan,
                        tier=tier,
                        rows=rows,
                        sweep=sweep,
                        progress=progress,
                        actor=actor,
                        log=log,
                    )
                    if batch is not None:
                        _record_batch(progress, batch)
                    reset_queries()  # with DEBUG on, every query and its id list is kept
            manifests = _manifests_unread_delete(plan, sweep.workspace_id, holds)
            if manifests:
                progress.related["contextManifests"] += manifests
        except _SweepStopped:
            status, error = RetentionSweep.Status.FAILED, "stopped: the sweep was marked abandoned"
        except SoftTimeLimitExceeded:
            # Every finished batch is deleted and receipted; the rest is still due.
            status, error = (
                RetentionSweep.Status.FAILED,
                "stopped: the sweep reached its time limit of "
                f"{settings.MEMDESK_RETENTION_SWEEP_TIME_LIMIT} s; "
                "the next sweep deletes what is still due",
            )
        except Exception as exc:  # noqa: BLE001 - recorded on the sweep; never the row content
            logger.exception("retention sweep %s failed after %s rows", sweep.pk, progress.deleted)
            status, error = RetentionSweep.Status.FAILED, f"{type(exc).__name__} (see worker log)"
        finished = timezone.now()
        _sweep_finish(sweep, plan, progress, log, status, error, actor, started, finished)
    logger.info(
        "retention sweep %s of workspace %s: %s, deleted %s in %s batches",
        sweep.pk,
        sweep.workspace_id,
        status,
        progress.counts,
        progress.batches,
    )
    sweep.refresh_from_db()
    return sweep


def retention_schedule(*, now: datetime | None = None) -> dict[str, int]:
    """The periodic entry point (Celery beat): start a sweep in every workspace that has
    an enabled policy and no open sweep, fail sweeps whose worker vanished, and send
    again the sweeps and erasures whose task was lost."""
    now = now or timezone.now()
    counts = {"started": 0, "abandoned": 0, "requeued": 0}
    counts["abandoned"] = RetentionSweep.objects.filter(
        status=RetentionSweep.Status.RUNNING, started_at__lt=now - STALE_RUNNING
    ).update(
        status=RetentionSweep.Status.FAILED,
        error="abandoned: no worker finished it",
        finished_at=now,
    )
    for sweep_id in RetentionSweep.objects.filter(
        status=RetentionSweep.Status.PENDING, dry_run=False, created_at__lt=now - STALE_PENDING
    ).values_list("pk", flat=True):
        with transaction.atomic():
            enqueue_on_commit("governance.tasks.retention_sweep_task", sweep_id)
        counts["requeued"] += 1
    for request_id in ErasureRequest.objects.filter(
        status=ErasureRequest.Status.PENDING, created_at__lt=now - STALE_PENDING
    ).values_list("pk", flat=True):
        with transaction.atomic():
            enqueue_on_commit("governance.tasks.erasure_task", request_id)
        counts["requeued"] += 1
    workspace_ids = (
        RetentionPolicy.objects.filter(enabled=True)
        .values_list("workspace_id", flat=True)
        .distinct()
    )
    for workspace_id in workspace_ids:
        with transaction.atomic():
            # NO KEY UPDATE: see retention_sweep_request.
            Workspace.objects.select_for_update(no_key=True).filter(pk=workspace_id).first()
            if RetentionSweep.objects.filter(
                workspace_id=workspace_id,
                dry_run=False,
                status__in=[RetentionSweep.Status.PENDING, RetentionSweep.Status.RUNNING],
            ).exists():
                continue
            sweep = RetentionSweep.objects.create(
                workspace_id=workspace_id,
                triggered_by=SYSTEM_ACTOR.label,
                triggered_by_role=SYSTEM_ACTOR.role,
            )
            enqueue_on_commit("governance.tasks.retention_sweep_task", sweep.pk)
            counts["started"] += 1
    return counts
