"""Which rows are due under a workspace's policies, the dry run that counts them, and
the request that queues a sweep."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from governance.audit.writer import audit_record
from governance.models import (
    RetentionPolicy,
    RetentionSweep,
)
from governance.retention.common import TIERS, Tier, zero_counts
from governance.retention.policies import policy_snapshot
from governance.selectors import (
    active_hold_sets,
)
from memory.models import Conversation
from tenancy.models import Workspace


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
        return [{"id": p.pk, **policy_snapshot(p)} for p in self.policies]


def is_held(conversation_id: Any, user_id: str, holds: tuple[set[str], set[str]]) -> bool:
    held_conversations, held_users = holds
    return str(conversation_id) in held_conversations or bool(user_id and user_id in held_users)


@dataclass
class DueCounts:
    counts: dict[str, int] = field(default_factory=zero_counts)
    by_policy: dict[str, dict[str, int]] = field(default_factory=dict)
    # Filled only when asked for (a dry run's list): rows due per conversation, and the
    # conversations that would lose rows but a legal hold keeps.
    by_conversation: dict[str, dict[str, int]] = field(default_factory=dict)
    held_conversations: set[str] = field(default_factory=set)

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def count_due(
    plan: RetentionPlan, holds: tuple[set[str], set[str]], *, per_conversation: bool = False
) -> DueCounts:
    """Rows due per tier, in one grouped scan per tier: each conversation's rows are
    counted below every cutoff a policy could give it, and its own rule picks one. With
    ``per_conversation``, also which conversations those rows are in, and which ones a
    hold keeps."""
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
            held = is_held(pk, user_id, holds)
            if held and not per_conversation:
                continue
            rule = plan.rules_for(tags)[tier.kind]
            if rule is None:
                continue
            n = counts[days_list.index(rule.days)]
            if not n:
                continue
            if held:
                due.held_conversations.add(str(pk))
                continue
            due.counts[tier.kind] += n
            per_policy = due.by_policy.setdefault(str(rule.policy_id), zero_counts())
            per_policy[tier.kind] += n
            if per_conversation:
                due.by_conversation.setdefault(str(pk), zero_counts())[tier.kind] += n
    return due


def retention_due_preview(
    *, workspace: Workspace, now: datetime, policy: RetentionPolicy | None = None
) -> DueCounts:
    """What a sweep started at ``now`` would delete, conversation by conversation, and
    which conversations a legal hold keeps out of it. A read: nothing is recorded."""
    check_policy_workspace(workspace, policy)
    plan = RetentionPlan.for_workspace(workspace_id=workspace.pk, now=now, policy=policy)
    return count_due(plan, active_hold_sets(workspace_id=workspace.pk), per_conversation=True)


# --- the dry run and the sweep request ---------------------------------------------------------


def check_policy_workspace(workspace: Workspace, policy: RetentionPolicy | None) -> None:
    if policy is not None and policy.workspace_id != workspace.pk:
        raise MemdeskError(
            "not_found", "No retention policy with this id in this workspace.", status_code=404
        )


def retention_dry_run(
    *, workspace: Workspace, actor: Actor, policy: RetentionPolicy | None = None
) -> RetentionSweep:
    """Count what a sweep would delete now, per tier, without deleting anything. The
    preview is kept as a completed dry-run sweep, for the dashboard's history."""
    check_policy_workspace(workspace, policy)
    started = timezone.now()
    plan = RetentionPlan.for_workspace(workspace_id=workspace.pk, now=started, policy=policy)
    due = count_due(plan, active_hold_sets(workspace_id=workspace.pk))
    with transaction.atomic():
        return RetentionSweep.objects.create(
            workspace=workspace,
            policy=policy,
            dry_run=True,
            status=RetentionSweep.Status.COMPLETED,
            counts=due.counts,
            total=due.total,
            triggered_by=actor.label,
            triggered_by_role=actor.role,
            created_at=started,
            started_at=started,
            finished_at=timezone.now(),
        )


def retention_sweep_request(
    *, workspace: Workspace, actor: Actor, policy: RetentionPolicy | None = None
) -> RetentionSweep:
    """Queue a sweep of the workspace (or of one policy's rows) for a worker."""
    check_policy_workspace(workspace, policy)
    if policy is not None and not policy.enabled:
        raise MemdeskError(
            "policy_disabled",
            f"Policy {policy.pk} is disabled; enable it first (a dry run previews it).",
            field="policy_id",
            status_code=409,
        )
    with transaction.atomic():
        # The workspace row lock serialises requests: one open sweep per workspace. NO KEY
        # UPDATE, so that it does not wait on (nor block) the KEY SHARE lock every insert
        # referencing the workspace takes: an audit event written under the chain head's
        # lock would otherwise deadlock with this request's own audit event.
        Workspace.objects.select_for_update(no_key=True).filter(pk=workspace.pk).first()
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
            workspace=workspace,
            policy=policy,
            triggered_by=actor.label,
            triggered_by_role=actor.role,
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="retention_sweep.request",
            target_type="retention_sweep",
            target_id=str(sweep.pk),
            after={"policyId": policy.pk if policy else None},
        )
        enqueue_on_commit("governance.tasks.retention_sweep_task", sweep.pk)
    return sweep
