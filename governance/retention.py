"""Retention, legal holds and erasure: the writes.

What "expired" means, per tier: a message by ``created_at``, an observation by
``observed_at`` (when the note was written), a reflection by ``created_at``. A
conversation's policy is the workspace's default policy (blank tag) unless one or more
tag policies match its tags; those then replace the default entirely. When several
policies govern one conversation, each tier is kept for the longest of their periods,
and a period left empty (keep forever) wins: deleting is the step that cannot be undone.

A legal hold, on a conversation or on an end user (every conversation with that
``user_id``, including ones created later), overrides every rule: a sweep skips what it
covers, and deleting or erasing it is refused.

Deletions run in short transactions over explicit id batches chosen by cutoff, never
"everything in the conversation", so a message written while a sweep runs is never
touched unless it had already expired. Each batch writes its receipt to the audit trail
in the same transaction; a sweep that deleted anything ends with one summary receipt.
The id hash of a receipt is SHA-256 over one line ``<kind>:<id>\\n`` per deleted row, the
lines sorted (``HASH_OF``); an erasure's summary hashes ``<conversation>:<kind>:<id>``
lines (``ERASURE_HASH_OF``), because it works conversation by conversation.

Left as they are, by decision: observations whose source messages expired keep naming
those ids (the receipts say they were deleted), and reflections likewise; coverage of
observed ranges comes from Observer runs, which retention keeps, so expired messages
never come back as "recent". Conversations left empty are kept, so an agent's handle
stays valid and seq numbers continue; erasure or a delete removes them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, OperationalError, connection, reset_queries, transaction
from django.db.models import BooleanField, Count, F, Model, Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from governance.audit import audit_record, require_reason
from governance.models import (
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RestrictedOriginal,
    RetentionPolicy,
    RetentionSweep,
)
from governance.selectors import (
    active_hold_for_conversation,
    active_hold_sets,
    holds_covering_end_user,
    legal_hold_refusal,
)
from memory.models import (
    Conversation,
    IdempotencyRecord,
    Message,
    Observation,
    ObservationVersion,
    Reflection,
    Workspace,
)

logger = logging.getLogger(__name__)

# 5,000 ids per batch measured best on PostgreSQL (bench/retention.py, docs/benchmarks.md):
# larger batches gain little and hold conversation locks longer; smaller ones pay the
# per-batch round trips and audit receipt more often.
DEFAULT_BATCH_SIZE = 5000
MAX_DAYS = 36_500
# A sweep still RUNNING after this long lost its worker; the scheduler marks it failed so
# the next one can start (a live worker notices at its next batch and stops).
STALE_RUNNING = timedelta(hours=6)
# A PENDING sweep or erasure whose task never arrived (broker down) is enqueued again.
STALE_PENDING = timedelta(minutes=10)
IDEMPOTENCY_SCAN_BATCH = 1000
BATCH_ATTEMPTS = 3
MAX_WINDOW_PAGES = 1 << 20

HASH_OF = "sha256 of sorted lines '<kind>:<id>\\n' (kind: message, observation, reflection)"
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
    Tier("messages", "message", Message, "created_at", "message_days", "messages"),
    Tier(
        "observations",
        "observation",
        Observation,
        "observed_at",
        "observation_days",
        "observations",
    ),
    Tier("reflections", "reflection", Reflection, "created_at", "reflection_days", "reflections"),
)


def _uuid_array(ids: Iterable[Any]) -> str:
    """An array literal: one parameter that psycopg passes through as it is, where a
    list would be adapted element by element (a third of a batch's Python time)."""
    return "{" + ",".join(map(str, ids)) + "}"


def _among(model: type[Model], field_name: str, ids: list[Any]) -> Any:
    """A filter for ``field IN ids`` on a UUID column. On PostgreSQL it is one array
    parameter (``= ANY``) instead of thousands of placeholders: psycopg splits the query
    text on the client and PostgreSQL parses every placeholder, which made a 5,000-row
    batch spend more time on its SQL text than on deleting (bench/retention.py)."""
    if connection.vendor != "postgresql":
        return Q(**{f"{field_name}__in": ids})
    field_obj = model._meta.pk if field_name == "pk" else model._meta.get_field(field_name)
    quote = connection.ops.quote_name
    column = f"{quote(model._meta.db_table)}.{quote(field_obj.column)}"  # type: ignore[union-attr]
    return RawSQL(f"{column} = ANY(%s::uuid[])", (_uuid_array(ids),), output_field=BooleanField())


def _zero_counts() -> dict[str, int]:
    return {tier.kind: 0 for tier in TIERS}


def _line_hash(lines: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
    return digest.hexdigest()


def _enqueue(task_name: str, object_id: int) -> None:
    """Send the task after the surrounding transaction commits. A broker that is down
    must not fail the request: the row stays PENDING and the scheduler sends it again."""

    def send() -> None:
        from governance import tasks

        try:
            getattr(tasks, task_name).apply_async(args=[object_id], retry=False)
        except Exception:  # noqa: BLE001 - any broker failure; the scheduler recovers
            logger.warning(
                "could not enqueue %s for %s; the scheduler will retry", task_name, object_id
            )

    transaction.on_commit(send)


# --- retention policies ---------------------------------------------------------------------


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def _policy_snapshot(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "name": policy.name,
        "conversationTag": policy.conversation_tag,
        "messageDays": policy.message_days,
        "observationDays": policy.observation_days,
        "reflectionDays": policy.reflection_days,
        "enabled": policy.enabled,
    }


def _validate_days(value: int | None, field_name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DAYS:
        raise MemdeskError(
            "invalid_days",
            f"{field_name} must be a whole number of days from 1 to {MAX_DAYS}, or null "
            f"to keep that tier forever; got {value!r}.",
            field=field_name,
        )


def _validate_policy(policy: RetentionPolicy) -> None:
    policy.name = (policy.name or "").strip()
    policy.conversation_tag = (policy.conversation_tag or "").strip()
    if not policy.name or len(policy.name) > 100:
        raise MemdeskError("invalid_name", "name must be 1 to 100 characters.", field="name")
    if len(policy.conversation_tag) > 100:
        raise MemdeskError(
            "invalid_tag",
            "conversationTag must be at most 100 characters.",
            field="conversationTag",
        )
    _validate_days(policy.message_days, "messageDays")
    _validate_days(policy.observation_days, "observationDays")
    _validate_days(policy.reflection_days, "reflectionDays")
    clash = RetentionPolicy.objects.filter(
        workspace_id=policy.workspace_id, conversation_tag=policy.conversation_tag
    ).exclude(pk=policy.pk)
    other = clash.first()
    if other is not None:
        scope = (
            f"conversations tagged {policy.conversation_tag!r}"
            if policy.conversation_tag
            else "every untagged conversation (the default policy)"
        )
        raise MemdeskError(
            "duplicate_policy_tag",
            f"Policy {other.pk} ({other.name!r}) already governs {scope}; change that one.",
            field="conversationTag",
            status_code=409,
        )


def _policy_save(policy: RetentionPolicy) -> None:
    try:
        with transaction.atomic():
            policy.save()
    except IntegrityError:
        raise MemdeskError(
            "duplicate_policy_name",
            f"A retention policy named {policy.name!r} already exists in this workspace.",
            field="name",
            status_code=409,
        ) from None


def retention_policy_create(
    *,
    workspace: Workspace,
    actor: Actor,
    name: str,
    conversation_tag: str = "",
    message_days: int | None = None,
    observation_days: int | None = None,
    reflection_days: int | None = None,
    enabled: bool = True,
    reason: str = "",
) -> RetentionPolicy:
    policy = RetentionPolicy(
        workspace=workspace,
        name=name,
        conversation_tag=conversation_tag,
        message_days=message_days,
        observation_days=observation_days,
        reflection_days=reflection_days,
        enabled=enabled,
    )
    with transaction.atomic():
        _validate_policy(policy)
        _policy_save(policy)
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="retention_policy.create",
            target_type="retention_policy",
            target_id=str(policy.pk),
            after=_policy_snapshot(policy),
            reason=reason,
        )
    return policy


def retention_policy_update(
    *,
    policy: RetentionPolicy,
    actor: Actor,
    name: str | _Unset = UNSET,
    conversation_tag: str | _Unset = UNSET,
    message_days: int | None | _Unset = UNSET,
    observation_days: int | None | _Unset = UNSET,
    reflection_days: int | None | _Unset = UNSET,
    enabled: bool | _Unset = UNSET,
    reason: str = "",
) -> RetentionPolicy:
    """Change the fields given (UNSET leaves one as it is; None keeps a tier forever)."""
    changes = {
        "name": name,
        "conversation_tag": conversation_tag,
        "message_days": message_days,
        "observation_days": observation_days,
        "reflection_days": reflection_days,
        "enabled": enabled,
    }
    changes = {key: value for key, value in changes.items() if value is not UNSET}
    if not changes:
        raise MemdeskError(
            "nothing_to_change",
            "Send at least one of name, conversationTag, messageDays, observationDays, "
            "reflectionDays, enabled.",
        )
    with transaction.atomic():
        locked = RetentionPolicy.objects.select_for_update().get(pk=policy.pk)
        before = _policy_snapshot(locked)
        for key, value in changes.items():
            setattr(locked, key, value)
        locked.updated_at = timezone.now()
        _validate_policy(locked)
        _policy_save(locked)
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="retention_policy.update",
            target_type="retention_policy",
            target_id=str(locked.pk),
            before=before,
            after=_policy_snapshot(locked),
            reason=reason,
        )
    return locked


def retention_policy_delete(*, policy: RetentionPolicy, actor: Actor, reason: str = "") -> None:
    with transaction.atomic():
        locked = RetentionPolicy.objects.select_for_update().get(pk=policy.pk)
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="retention_policy.delete",
            target_type="retention_policy",
            target_id=str(locked.pk),
            before=_policy_snapshot(locked),
            reason=reason,
        )
        locked.delete()


# --- which rows are due ---------------------------------------------------------------------


@dataclass(frozen=True)
class TierRule:
    policy_id: int
    days: int
    cutoff: datetime


class RetentionPlan:
    """The policies of one workspace resolved once, at one moment, into a rule per
    conversation and tier. Dry runs and sweeps share it, so a dry run counts exactly
    what a sweep started at the same moment would delete."""

    def __init__(
        self,
        *,
        workspace_id: Any,
        policies: list[RetentionPolicy],
        now: datetime,
        only_policy_id: int | None = None,
    ) -> None:
        self.workspace_id = workspace_id
        self.policies = policies
        self.now = now
        self.only_policy_id = only_policy_id
        self.defaults = [p for p in policies if not p.conversation_tag]
        self.tagged = [p for p in policies if p.conversation_tag]
        self.tag_names = frozenset(p.conversation_tag for p in self.tagged)
        self._rules: dict[frozenset[str], dict[str, TierRule | None]] = {}

    @classmethod
    def for_workspace(
        cls, *, workspace_id: Any, now: datetime, policy: RetentionPolicy | None = None
    ) -> RetentionPlan:
        """Every enabled policy; a policy named explicitly counts even when disabled, so
        a dry run previews a policy before it is switched on."""
        policies = list(
            RetentionPolicy.objects.filter(workspace_id=workspace_id, enabled=True).order_by("pk")
        )
        if policy is not None and all(p.pk != policy.pk for p in policies):
            policies.append(policy)
        return cls(
            workspace_id=workspace_id,
            policies=policies,
            now=now,
            only_policy_id=policy.pk if policy else None,
        )

    def cutoff(self, days: int) -> datetime:
        return self.now - timedelta(days=days)

    def possible_days(self, tier: Tier) -> list[int]:
        days = {
            getattr(p, tier.days_field)
            for p in self.policies
            if getattr(p, tier.days_field) is not None
            and (self.only_policy_id is None or p.pk == self.only_policy_id)
        }
        return sorted(days)

    def rules_for(self, tags: object) -> dict[str, TierRule | None]:
        matched = (
            frozenset(t for t in tags if isinstance(t, str)) & self.tag_names
            if isinstance(tags, list)
            else frozenset()
        )
        rules = self._rules.get(matched)
        if rules is None:
            governing = [p for p in self.tagged if p.conversation_tag in matched] or self.defaults
            rules = {tier.kind: self._rule(governing, tier) for tier in TIERS}
            self._rules[matched] = rules
        return rules

    def _rule(self, governing: list[RetentionPolicy], tier: Tier) -> TierRule | None:
        if not governing:
            return None
        periods = [(getattr(p, tier.days_field), p) for p in governing]
        if any(days is None for days, _ in periods):
            return None  # one governing policy keeps this tier forever
        days, policy = max(periods, key=lambda item: (item[0], -item[1].pk))
        if self.only_policy_id is not None and policy.pk != self.only_policy_id:
            return None
        return TierRule(policy_id=policy.pk, days=days, cutoff=self.cutoff(days))

    def snapshot(self) -> list[dict[str, Any]]:
        return [{"id": p.pk, **_policy_snapshot(p)} for p in self.policies]


def _is_held(conversation_id: Any, user_id: str, holds: tuple[set[str], set[str]]) -> bool:
    held_conversations, held_users = holds
    return str(conversation_id) in held_conversations or bool(user_id and user_id in held_users)


@dataclass
class DueCounts:
    counts: dict[str, int] = field(default_factory=_zero_counts)
    by_policy: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _count_due(plan: RetentionPlan, holds: tuple[set[str], set[str]]) -> DueCounts:
    """Rows due per tier, in one grouped scan per tier: each conversation's rows are
    counted below every cutoff a policy could give it, and its own rule picks one."""
    due = DueCounts()
    for tier in TIERS:
        days_list = plan.possible_days(tier)
        if not days_list:
            continue
        rel, stamp = tier.related_name, tier.expires_by
        annotations = {
            f"due_{days}": Count(rel, filter=Q(**{f"{rel}__{stamp}__lt": plan.cutoff(days)}))
            for days in days_list
        }
        loosest = plan.cutoff(days_list[0])  # the shortest period has the latest cutoff
        rows = (
            Conversation.objects.filter(
                workspace_id=plan.workspace_id, **{f"{rel}__{stamp}__lt": loosest}
            )
            .annotate(**annotations)
            .order_by()
            .values_list("pk", "user_id", "tags", *annotations)
        )
        for pk, user_id, tags, *counts in rows.iterator(chunk_size=2000):
            if _is_held(pk, user_id, holds):
                continue
            rule = plan.rules_for(tags)[tier.kind]
            if rule is None:
                continue
            n = counts[days_list.index(rule.days)]
            if n:
                due.counts[tier.kind] += n
                per_policy = due.by_policy.setdefault(str(rule.policy_id), _zero_counts())
                per_policy[tier.kind] += n
    return due


# --- dry run and sweep ------------------------------------------------------------------------


def _check_policy_workspace(workspace: Workspace, policy: RetentionPolicy | None) -> None:
    if policy is not None and policy.workspace_id != workspace.pk:
        raise MemdeskError(
            "not_found", "No retention policy with this id in this workspace.", status_code=404
        )


def retention_dry_run(
    *, workspace: Workspace, actor: Actor, policy: RetentionPolicy | None = None
) -> RetentionSweep:
    """Count what a sweep would delete now, per tier, without deleting anything. The
    preview is kept as a completed dry-run sweep, for the dashboard's history."""
    _check_policy_workspace(workspace, policy)
    started = timezone.now()
    plan = RetentionPlan.for_workspace(workspace_id=workspace.pk, now=started, policy=policy)
    due = _count_due(plan, active_hold_sets(workspace_id=workspace.pk))
    with transaction.atomic():
        return RetentionSweep.objects.create(
            workspace=workspace,
            policy=policy,
            dry_run=True,
            status=RetentionSweep.Status.COMPLETED,
            counts=due.counts,
            total=due.total,
            triggered_by=actor.label,
            created_at=started,
            started_at=started,
            finished_at=timezone.now(),
        )


def retention_sweep_request(
    *, workspace: Workspace, actor: Actor, policy: RetentionPolicy | None = None
) -> RetentionSweep:
    """Queue a sweep of the workspace (or of one policy's rows) for a worker."""
    _check_policy_workspace(workspace, policy)
    if policy is not None and not policy.enabled:
        raise MemdeskError(
            "policy_disabled",
            f"Policy {policy.pk} is disabled; enable it first (a dry run previews it).",
            field="policyId",
            status_code=409,
        )
    with transaction.atomic():
        # The workspace row lock serialises requests: one open sweep per workspace.
        Workspace.objects.select_for_update().filter(pk=workspace.pk).first()
        open_sweep = RetentionSweep.objects.filter(
            workspace=workspace,
            dry_run=False,
            status__in=[RetentionSweep.Status.PENDING, RetentionSweep.Status.RUNNING],
        ).first()
        if open_sweep is not None:
            raise MemdeskError(
                "sweep_in_progress",
                f"Retention sweep {open_sweep.pk} of this workspace is still "
                f"{open_sweep.status}; follow it at /v1/retention/sweeps/{open_sweep.pk}.",
                status_code=409,
            )
        sweep = RetentionSweep.objects.create(
            workspace=workspace, policy=policy, triggered_by=actor.label
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="retention_sweep.request",
            target_type="retention_sweep",
            target_id=str(sweep.pk),
            after={"policyId": policy.pk if policy else None},
        )
        _enqueue("retention_sweep_task", sweep.pk)
    return sweep


class _SweepStopped(Exception):
    """The sweep's row left RUNNING (marked failed as abandoned): stop deleting."""


@dataclass
class _SweepProgress:
    counts: dict[str, int] = field(default_factory=_zero_counts)
    related: Counter[str] = field(default_factory=Counter)
    by_policy: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0

    @property
    def deleted(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _Batch:
    tier: Tier
    lines: list[str]  # "<kind>:<id>" of every deleted row, sorted
    by_policy: Counter[str]
    related: dict[str, int]


# (id, conversation id, expiry stamp, physical row address), ids as text; the stamp is
# None when the query already applied the only cutoff, the address None off PostgreSQL.
Candidate = tuple[str, str, "datetime | None", "str | None"]


def _scan(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]]:
    """Batches of rows that may be due: older than the latest cutoff any policy gives
    this tier, outside held conversations. Each conversation's own rule is applied
    afterwards, under its lock. With a single possible cutoff the SQL has applied it
    already, and the timestamps are not even read (parsing them cost a tenth of a
    batch's time)."""
    if connection.vendor == "postgresql":
        return _scan_heap_order(plan, tier, holds, batch_size)
    return _scan_id_order(plan, tier, holds, batch_size)


def _scan_id_order(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]]:
    days_list = plan.possible_days(tier)
    rows = tier.model.objects.filter(  # type: ignore[attr-defined]
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


def _scan_heap_order(
    plan: RetentionPlan, tier: Tier, holds: tuple[set[str], set[str]], batch_size: int
) -> Iterator[list[Candidate]]:
    """PostgreSQL: read the table in physical order, a window of pages at a time (TID
    range scans), so each batch deletes rows that sit together on disk. Deleting in id
    order (random UUIDs) dirtied a different page for almost every row and ran at a
    twelfth of the speed of a plain batched DELETE (bench/retention.py). Pages appended
    after the sweep started hold rows written since, which cannot have expired unless
    backdated; the next sweep takes those."""
    quote = connection.ops.quote_name
    model = tier.model
    days_list = plan.possible_days(tier)
    stamp = quote(model._meta.get_field(tier.expires_by).column)
    where = ["c.workspace_id = %s", f"m.{stamp} < %s"]
    params: list[Any] = [plan.workspace_id, plan.cutoff(days_list[0])]
    held_conversations, held_users = holds
    if held_conversations:
        where.append("NOT (m.conversation_id = ANY(%s::uuid[]))")
        params.append(_uuid_array(held_conversations))
    if held_users:
        where.append("NOT (c.user_id = ANY(%s))")
        params.append(sorted(held_users))
    if not plan.defaults:
        # Only tagged conversations can have anything due: jsonb containment narrows it.
        where.append("(" + " OR ".join(["c.tags @> %s::jsonb"] * len(plan.tag_names)) + ")")
        params.extend(json.dumps([tag]) for tag in sorted(plan.tag_names))
    # Ids as text: hashed, compared and sent back as text, never parsed into UUIDs.
    columns = "m.ctid::text, m.id::text, m.conversation_id::text" + (
        "" if len(days_list) == 1 else f", m.{stamp}"
    )
    query = (
        f"SELECT {columns} FROM {quote(model._meta.db_table)} AS m "
        f"JOIN {quote(Conversation._meta.db_table)} AS c ON c.id = m.conversation_id "
        f"WHERE m.ctid > %s::tid AND m.ctid < %s::tid AND {' AND '.join(where)} "
        "ORDER BY m.ctid LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_relation_size(%s) / current_setting('block_size')::int",
            [model._meta.db_table],
        )
        pages = cursor.fetchone()[0]
    # Pages per window: grows while windows come back sparse, so a large table with
    # little due is crossed in few queries.
    window = max(8, batch_size // 20)
    position, after = 0, "(0,0)"
    while position <= pages:
        end = position + window
        with connection.cursor() as cursor:
            cursor.execute(query, [after, f"({end},0)", *params, batch_size])
            found = cursor.fetchall()
        if len(found) == batch_size:
            after = found[-1][0]  # the window has more: continue inside it
        else:
            position, after = end, f"({end},0)"
            if len(found) < batch_size // 2:
                window = min(window * 2, MAX_WINDOW_PAGES)
        if found:
            yield [(row[1], row[2], row[3] if len(row) > 3 else None, row[0]) for row in found]


class _DeletedLog:
    """Every row a sweep deleted, as its hash line, in a temporary table of the
    worker's own database session: memory stays bounded, and the summary can hash the
    lines sorted at the end whatever order the rows were deleted in. Writes to it are
    part of each batch's transaction, so a rolled-back batch leaves no line."""

    PAGE = 10_000

    def __init__(self, sweep_id: int) -> None:
        self.table = connection.ops.quote_name(f"retention_deleted_{sweep_id}")
        self.index = connection.ops.quote_name(f"retention_deleted_{sweep_id}_line")

    def __enter__(self) -> _DeletedLog:
        collate = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")
            cursor.execute(
                f"CREATE TEMPORARY TABLE {self.table} (line varchar(100){collate} NOT NULL)"
            )
        return self

    def __exit__(self, *exc: object) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TABLE IF EXISTS {self.table}")

    def add(self, lines: list[str]) -> None:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"INSERT INTO {self.table} (line) SELECT unnest(%s::text[])",
                    ["{" + ",".join(lines) + "}"],  # lines are [a-z0-9:-]: no quoting needed
                )
            else:
                cursor.executemany(
                    f"INSERT INTO {self.table} (line) VALUES (%s)", [(x,) for x in lines]
                )

    def sha256(self) -> str:
        # Indexed once, at the end: a bulk build costs a fraction of keeping an index
        # up to date through every batch.
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE INDEX {self.index} ON {self.table} (line)")
        digest = hashlib.sha256()
        after = ""
        while True:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT line FROM {self.table} WHERE line > %s ORDER BY line LIMIT %s",
                    [after, self.PAGE],
                )
                page = [row[0] for row in cursor.fetchall()]
            for line in page:
                digest.update(f"{line}\n".encode())
            if len(page) < self.PAGE:
                return digest.hexdigest()
            after = page[-1]


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
        # One round trip, rows locked in id order (the order every locker uses).
        table = connection.ops.quote_name(Conversation._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET memory_version = memory_version + 1 WHERE id IN "
                f"(SELECT id FROM {table} WHERE id = ANY(%s::uuid[]) ORDER BY id "
                "FOR NO KEY UPDATE) RETURNING id::text, user_id, tags",
                [_uuid_array(conversation_ids)],
            )
            return [
                (pk, user_id, json.loads(tags) if isinstance(tags, str) else tags)
                for pk, user_id, tags in cursor.fetchall()
            ]
    rows = Conversation.objects.filter(_among(Conversation, "pk", conversation_ids))
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
    model = tier.model
    if connection.vendor == "postgresql" and not model._meta.related_objects:
        # By physical address, checked against the id (an address is reused only after
        # its row is gone): a TID scan whatever the table's size. Matching thousands of
        # ids instead made the planner scan the whole table twice per batch. One
        # statement locks and deletes; nothing references these rows by foreign key,
        # so Django's collector would have had nothing to do.
        quote = connection.ops.quote_name
        table, pk = quote(model._meta.db_table), quote(model._meta.pk.column)  # type: ignore[union-attr]
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE ctid = ANY(ARRAY(SELECT ctid FROM {table} "
                f"WHERE ctid = ANY(%s::tid[]) AND {pk} = ANY(%s::uuid[]) "
                f"FOR UPDATE SKIP LOCKED)) RETURNING {pk}::text",
                [
                    "{" + ",".join(f'"{row[3]}"' for row in rows) + "}",
                    _uuid_array(row[0] for row in rows),
                ],
            )
            return sorted(found[0] for found in cursor.fetchall())
    ids = [row[0] for row in rows]
    locked = sorted(
        str(pk)
        for pk in model.objects.select_for_update(skip_locked=True)  # type: ignore[attr-defined]
        .filter(_among(model, "pk", ids))
        .values_list("pk", flat=True)
    )
    if locked:
        # Through the collector: deleting a reflection clears its observations' link.
        model.objects.filter(_among(model, "pk", locked)).delete()  # type: ignore[attr-defined]
    return locked


def _delete_related(tier: Tier, ids: list[Any], conversation_ids: list[Any]) -> dict[str, int]:
    """What hangs off the deleted rows by id rather than by foreign key: the redaction
    findings, the restricted originals (the unredacted text must not outlive its row),
    and the earlier versions of deleted observations. Each table is first asked about
    the batch's few conversations, which is cheap, and only searched by id if needed."""
    tables: list[tuple[str, type[Model], str, dict[str, str]]] = [
        ("redactionFindings", RedactionFinding, "target_id", {"target_type": tier.line_kind}),
        ("restrictedOriginals", RestrictedOriginal, "target_id", {"target_type": tier.line_kind}),
    ]
    if tier.model is Observation:
        tables.append(("observationVersions", ObservationVersion, "observation_id", {}))
    related = {}
    for key, model, id_field, where in tables:
        rows = model.objects.filter(  # type: ignore[attr-defined]
            _among(model, "conversation", conversation_ids), **where
        )
        related[key] = rows.filter(_among(model, id_field, ids)).delete()[0] if rows.exists() else 0
    return related


def _delete_batch(
    *,
    plan: RetentionPlan,
    tier: Tier,
    rows: list[Candidate],
    sweep: RetentionSweep,
    progress: _SweepProgress,
    actor: Actor,
    log: _DeletedLog,
) -> _Batch | None:
    conversation_of = {row[0]: row[1] for row in rows}
    with transaction.atomic():
        conversations = _lock_conversations(sorted(set(conversation_of.values())))
        holds = active_hold_sets(workspace_id=plan.workspace_id)
        rules: dict[str, TierRule] = {}
        for conversation_id, user_id, tags in conversations:
            rule = plan.rules_for(tags)[tier.kind]
            if rule is not None and not _is_held(conversation_id, user_id, holds):
                rules[conversation_id] = rule
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
        touched = {conversation_of[pk] for pk in ids}
        related = _delete_related(tier, ids, list(touched))
        by_policy = Counter(str(rules[conversation_of[pk]].policy_id) for pk in ids)
        counts = dict(progress.counts)
        counts[tier.kind] += len(ids)
        still_running = RetentionSweep.objects.filter(
            pk=sweep.pk, status=RetentionSweep.Status.RUNNING
        ).update(done=F("done") + len(ids), counts=counts)
        if not still_running:
            raise _SweepStopped
        lines = [f"{tier.line_kind}:{pk}" for pk in ids]
        log.add(lines)
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
                "counts": {tier.kind: len(ids), **related},
                "byPolicy": dict(by_policy),
                "conversations": len(touched),
                "idsSha256": _line_hash(f"{line}\n" for line in lines),
                "hashOf": HASH_OF,
            },
            reason=f"expired under retention policy {', '.join(sorted(by_policy))}",
        )
    return _Batch(tier, lines, by_policy, related)


def _delete_batch_retrying(**kwargs: Any) -> _Batch | None:
    """A batch that loses a deadlock is tried again. Deleting a reflection clears the
    link from its observations, and an observation edit locks that row before it takes
    the conversation's lock, the reverse of a batch's order; PostgreSQL breaks the
    cycle by failing one of the two."""
    for attempt in range(BATCH_ATTEMPTS):
        try:
            return _delete_batch(**kwargs)
        except OperationalError:
            if attempt == BATCH_ATTEMPTS - 1:
                raise
            time.sleep(0.05 * 2**attempt)
    return None


def _record_batch(progress: _SweepProgress, batch: _Batch) -> None:
    # Only after the batch committed: a rolled-back batch leaves no trace in the totals.
    progress.batches += 1
    progress.counts[batch.tier.kind] += len(batch.lines)
    progress.related.update(batch.related)
    for policy_id, n in batch.by_policy.items():
        progress.by_policy.setdefault(policy_id, _zero_counts())[batch.tier.kind] += n


def _sweep_finish(
    sweep: RetentionSweep,
    plan: RetentionPlan,
    progress: _SweepProgress,
    log: _DeletedLog,
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
        if progress.deleted:
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


def retention_sweep(*, sweep_id: int, batch_size: int = DEFAULT_BATCH_SIZE) -> RetentionSweep:
    """Run one queued sweep: delete every expired row of the workspace that no legal
    hold covers, tier by tier, ``batch_size`` rows per short transaction, each with its
    receipt; then write the summary receipt.

    Memory stays bounded by the batch: rows are read in windows, and the deleted ids
    wait for the summary's hash in a temporary table, not in the worker. Acts only if it
    claims the PENDING row, so a redelivered task does nothing.
    """
    if batch_size < 1:
        raise MemdeskError("invalid_batch_size", "batch_size must be at least 1.")
    started = timezone.now()
    claimed = RetentionSweep.objects.filter(
        pk=sweep_id, status=RetentionSweep.Status.PENDING, dry_run=False
    ).update(status=RetentionSweep.Status.RUNNING, started_at=started)
    sweep = RetentionSweep.objects.select_related("policy").get(pk=sweep_id)
    if not claimed:
        return sweep
    actor = Actor.from_label(sweep.triggered_by)
    plan = RetentionPlan.for_workspace(
        workspace_id=sweep.workspace_id, now=started, policy=sweep.policy
    )
    holds = active_hold_sets(workspace_id=sweep.workspace_id)
    progress = _SweepProgress()
    status, error = RetentionSweep.Status.COMPLETED, ""
    with _DeletedLog(sweep.pk) as log:
        try:
            total = _count_due(plan, holds).total
            RetentionSweep.objects.filter(pk=sweep.pk).update(total=total)
            for tier in TIERS:
                if not plan.possible_days(tier):
                    continue
                for rows in _scan(plan, tier, holds, batch_size):
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
        except _SweepStopped:
            status, error = RetentionSweep.Status.FAILED, "stopped: the sweep was marked abandoned"
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
            _enqueue("retention_sweep_task", sweep_id)
        counts["requeued"] += 1
    for request_id in ErasureRequest.objects.filter(
        status=ErasureRequest.Status.PENDING, created_at__lt=now - STALE_PENDING
    ).values_list("pk", flat=True):
        with transaction.atomic():
            _enqueue("erasure_task", request_id)
        counts["requeued"] += 1
    workspace_ids = (
        RetentionPolicy.objects.filter(enabled=True)
        .values_list("workspace_id", flat=True)
        .distinct()
    )
    for workspace_id in workspace_ids:
        with transaction.atomic():
            Workspace.objects.select_for_update().filter(pk=workspace_id).first()
            if RetentionSweep.objects.filter(
                workspace_id=workspace_id,
                dry_run=False,
                status__in=[RetentionSweep.Status.PENDING, RetentionSweep.Status.RUNNING],
            ).exists():
                continue
            sweep = RetentionSweep.objects.create(
                workspace_id=workspace_id, triggered_by=SYSTEM_ACTOR.label
            )
            _enqueue("retention_sweep_task", sweep.pk)
            counts["started"] += 1
    return counts


# --- legal holds --------------------------------------------------------------------------------


def _hold_snapshot(hold: LegalHold) -> dict[str, Any]:
    return {
        "conversationId": str(hold.conversation_id) if hold.conversation_id else None,
        "endUserId": hold.end_user_id or None,
        "placedBy": hold.placed_by,
        "placedAt": hold.placed_at.isoformat(),
        "releasedBy": hold.released_by or None,
        "releasedAt": hold.released_at.isoformat() if hold.released_at else None,
    }


def legal_hold_place(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    conversation: Conversation | None = None,
    end_user_id: str = "",
) -> LegalHold:
    """Hold one conversation, or every conversation of one end user (present and
    future), against retention, deletion and erasure until released."""
    reason = require_reason(reason)
    end_user_id = (end_user_id or "").strip()
    if (conversation is None) == (not end_user_id):
        raise MemdeskError(
            "invalid_hold_target",
            "A hold covers exactly one thing: send conversationId or userId, not both.",
        )
    if len(end_user_id) > 255:
        raise MemdeskError("invalid_user_id", "userId is at most 255 characters.", field="userId")
    if conversation is not None and conversation.workspace_id != workspace.pk:
        raise MemdeskError(
            "not_found", "No conversation with this id in this workspace.", status_code=404
        )
    with transaction.atomic():
        # The same row locks a sweep batch and a delete take first: the hold is placed
        # either wholly before or wholly after any deletion in flight.
        locked = Conversation.objects.select_for_update(no_key=True).filter(workspace=workspace)
        if conversation is not None:
            locked = locked.filter(pk=conversation.pk)
        else:
            locked = locked.filter(user_id=end_user_id)
        found = list(locked.order_by("pk").values_list("pk", flat=True))
        if conversation is not None and not found:
            raise MemdeskError(
                "not_found", "No conversation with this id in this workspace.", status_code=404
            )
        hold = LegalHold.objects.create(
            workspace=workspace,
            conversation=conversation,
            end_user_id=end_user_id,
            reason=reason,
            placed_by=actor.label,
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="legal_hold.place",
            target_type="legal_hold",
            target_id=str(hold.pk),
            after=_hold_snapshot(hold),
            reason=reason,
        )
    return hold


def legal_hold_release(*, hold: LegalHold, actor: Actor, reason: str) -> LegalHold:
    reason = require_reason(reason)
    with transaction.atomic():
        released = LegalHold.objects.filter(pk=hold.pk, released_at__isnull=True).update(
            released_at=timezone.now(), released_by=actor.label, release_reason=reason
        )
        if not released:
            raise MemdeskError(
                "hold_already_released",
                f"Legal hold {hold.pk} was already released.",
                status_code=409,
            )
        hold.refresh_from_db()
        audit_record(
            workspace_id=hold.workspace_id,
            actor=actor,
            action="legal_hold.release",
            target_type="legal_hold",
            target_id=str(hold.pk),
            before={"active": True},
            after=_hold_snapshot(hold),
            reason=reason,
        )
    return hold


def legal_holds_released_delete(*, conversation: Conversation) -> int:
    """Before a conversation is deleted: drop its released holds, which would otherwise
    block the delete (the foreign key protects the conversation while any hold row names
    it). Their history stays in the audit trail (legal_hold.place / .release)."""
    return LegalHold.objects.filter(
        conversation_id=conversation.pk, released_at__isnull=False
    ).delete()[0]


# --- erasure ------------------------------------------------------------------------------------


def _erasure_snapshot(request: ErasureRequest) -> dict[str, Any]:
    return {"endUserId": request.end_user_id, "status": request.status, "counts": request.counts}


def _refusal(holds: list[LegalHold]) -> str:
    message = legal_hold_refusal(holds[0])
    if len(holds) > 1:
        message += f" {len(holds) - 1} more active hold(s) also cover this end user."
    return message


def erasure_request_create(
    *, workspace: Workspace, actor: Actor, end_user_id: str, reason: str
) -> ErasureRequest:
    """Record a right-to-be-forgotten request and queue it. Under a legal hold the
    request is recorded as refused, with the reason, and nothing is queued."""
    reason = require_reason(reason)
    end_user_id = (end_user_id or "").strip()
    if not end_user_id or len(end_user_id) > 255:
        raise MemdeskError("invalid_user_id", "userId must be 1 to 255 characters.", field="userId")
    with transaction.atomic():
        request = ErasureRequest.objects.create(
            workspace=workspace, end_user_id=end_user_id, reason=reason, requested_by=actor.label
        )
        holds = holds_covering_end_user(workspace_id=workspace.pk, end_user_id=end_user_id)
        if holds:
            request.status = ErasureRequest.Status.REFUSED
            request.error = _refusal(holds)[:500]
            request.completed_at = timezone.now()
            request.save(update_fields=["status", "error", "completed_at"])
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="erasure.refuse" if holds else "erasure.request",
            target_type="erasure_request",
            target_id=str(request.pk),
            after={**_erasure_snapshot(request), "holdIds": [h.pk for h in holds]},
            reason=reason,
        )
        if not holds:
            _enqueue("erasure_task", request.pk)
    return request


class _ErasureRefused(Exception):
    def __init__(self, holds: list[LegalHold]) -> None:
        super().__init__("legal hold")
        self.holds = holds


def _deleted_key(label: str) -> str:
    # "memory.ObserverRun" -> "observerRuns"
    name = label.rpartition(".")[2]
    return name[0].lower() + name[1:] + "s"


def _erase_conversation(
    request: ErasureRequest, conversation_id: Any, digest: Any, actor: Actor
) -> dict[str, int] | None:
    """Delete one conversation of the end user with everything under it, in one
    transaction with its receipt."""
    with transaction.atomic():
        # FOR UPDATE (not NO KEY): it also waits out inserts that reference the row, so
        # an Observer run cannot add observations the receipt would not list.
        conversation = Conversation.objects.select_for_update().filter(pk=conversation_id).first()
        if conversation is None:
            return None  # deleted meanwhile, with its own receipt
        hold = active_hold_for_conversation(conversation=conversation)
        if hold is not None:
            raise _ErasureRefused([hold])
        target_id = str(conversation.pk)  # delete() below clears the pk
        conversation_digest = hashlib.sha256()
        # Streamed into both hashes, never held: one conversation may have millions of
        # rows. Kinds in order, ids ascending, so the lines arrive sorted; the prefix
        # keeps the summary's lines sorted across conversations taken in id order.
        for tier in TIERS:
            ids = (
                tier.model.objects.filter(conversation_id=conversation.pk)  # type: ignore[attr-defined]
                .order_by("pk")
                .values_list("pk", flat=True)
                .iterator(chunk_size=5000)
            )
            for pk in ids:
                line = f"{tier.line_kind}:{pk}\n"
                conversation_digest.update(line.encode())
                digest.update(f"{target_id}:{line}".encode())
        legal_holds = legal_holds_released_delete(conversation=conversation)
        _, deleted = conversation.delete()
        removed = {_deleted_key(label): n for label, n in deleted.items() if n}
        if legal_holds:
            removed["legalHolds"] = legal_holds
        audit_record(
            workspace_id=request.workspace_id,
            actor=actor,
            action="erasure.delete_conversation",
            target_type="conversation",
            target_id=target_id,
            after={
                "erasureRequestId": request.pk,
                "counts": removed,
                "idsSha256": conversation_digest.hexdigest(),
                "hashOf": HASH_OF,
            },
            reason=request.reason,
        )
    return removed


def _idempotency_records_purge(workspace_id: Any, conversation_ids: set[str]) -> int:
    """Stored replies to idempotent writes repeat the messages they created; those of the
    erased conversations go too. They are found by the conversation id in the body."""
    if not conversation_ids:
        return 0
    purged = 0
    last_pk = 0
    while True:
        page = list(
            IdempotencyRecord.objects.filter(workspace_id=workspace_id, pk__gt=last_pk)
            .order_by("pk")
            .values_list("pk", "response_body")[:IDEMPOTENCY_SCAN_BATCH]
        )
        if not page:
            return purged
        last_pk = page[-1][0]
        doomed = []
        for pk, body in page:
            text = json.dumps(body)
            if any(conversation_id in text for conversation_id in conversation_ids):
                doomed.append(pk)
        if doomed:
            purged += IdempotencyRecord.objects.filter(pk__in=doomed).delete()[0]


@dataclass(frozen=True)
class ErasureOutcome:
    request: ErasureRequest
    retry: bool = False


def erasure_execute(*, request_id: int, final_attempt: bool = True) -> ErasureOutcome:
    """Erase every tier of one end user's memory: each of their conversations, in id
    order and one transaction each, with all it holds (messages, observations,
    reflections, Observer and Reflector runs, redaction findings, restricted originals,
    observation versions, released holds), then stored idempotent replies that repeat
    them. A legal hold found at any point stops it as refused; what was erased before
    stays erased, with its receipts."""
    claimed = ErasureRequest.objects.filter(
        pk=request_id, status=ErasureRequest.Status.PENDING
    ).update(status=ErasureRequest.Status.RUNNING)
    request = ErasureRequest.objects.get(pk=request_id)
    if not claimed:
        return ErasureOutcome(request)
    actor = Actor.from_label(request.requested_by)
    totals: Counter[str] = Counter()
    digest = hashlib.sha256()
    erased: set[str] = set()
    status, error = ErasureRequest.Status.COMPLETED, ""
    try:
        holds = holds_covering_end_user(
            workspace_id=request.workspace_id, end_user_id=request.end_user_id
        )
        if holds:
            raise _ErasureRefused(holds)
        last_pk = None
        while True:
            page = Conversation.objects.filter(
                workspace_id=request.workspace_id, user_id=request.end_user_id
            )
            if last_pk is not None:
                page = page.filter(pk__gt=last_pk)
            ids = list(page.order_by("pk").values_list("pk", flat=True)[:100])
            if not ids:
                break
            last_pk = ids[-1]
            for conversation_id in ids:
                removed = _erase_conversation(request, conversation_id, digest, actor)
                if removed is not None:
                    totals.update(removed)
                    erased.add(str(conversation_id))
                reset_queries()
        totals["idempotencyRecords"] = _idempotency_records_purge(request.workspace_id, erased)
    except _ErasureRefused as refused:
        status, error = ErasureRequest.Status.REFUSED, _refusal(refused.holds)
    except Exception as exc:  # noqa: BLE001 - recorded on the request; never the content
        logger.exception("erasure %s failed after %s conversations", request.pk, len(erased))
        if not final_attempt:
            # Erasure is idempotent (what is gone stays gone): give it back for a retry.
            ErasureRequest.objects.filter(pk=request.pk).update(
                status=ErasureRequest.Status.PENDING, counts=dict(totals)
            )
            request.refresh_from_db()
            return ErasureOutcome(request, retry=True)
        status, error = ErasureRequest.Status.FAILED, f"{type(exc).__name__} (see worker log)"
    counts = {key: n for key, n in totals.items() if n}
    with transaction.atomic():
        ErasureRequest.objects.filter(pk=request.pk).update(
            status=status, error=error[:500], counts=counts, completed_at=timezone.now()
        )
        request.refresh_from_db()
        audit_record(
            workspace_id=request.workspace_id,
            actor=actor,
            action={
                ErasureRequest.Status.COMPLETED: "erasure.complete",
                ErasureRequest.Status.REFUSED: "erasure.refuse",
            }.get(status, "erasure.fail"),
            target_type="erasure_request",
            target_id=str(request.pk),
            after={
                **_erasure_snapshot(request),
                "error": error,
                "idsSha256": digest.hexdigest(),
                "hashOf": ERASURE_HASH_OF,
            },
            reason=request.reason,
        )
    logger.info("erasure %s: %s, deleted %s", request.pk, status, counts)
    return ErasureOutcome(request)
