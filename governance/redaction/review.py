"""People's decisions on redaction: approving or dismissing a finding pending review,
reading a kept original (audited), and re-scanning stored memory under the policy (a
RescanRun queued from the dashboard, or the ``rescan_redaction`` command)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core.actors import SYSTEM_ACTOR, Actor
from core.errors import MemdeskError
from core.queue import enqueue_on_commit
from governance.audit.writer import audit_record, require_reason
from governance.models import (
    REDACTION_TARGETS,
    RedactionFinding,
    RedactionPolicy,
    RescanRun,
    RestrictedOriginal,
)
from governance.redaction import presidio, scan
from governance.redaction.policy import (
    POLICY_LIST_LIMIT,
    invalid_policy,
    redaction_policy_get_or_create,
    redaction_policy_snapshot,
)
from governance.redaction.pseudonyms import WorkspacePseudonyms, pseudonym_sightings_record
from governance.redaction.targets import (
    RedactionConflict,
    keep_original,
    redact_targets,
    shift_findings,
    store_target_text,
)
from memory.models import Conversation, Message, Observation, Reflection
from tenancy.models import Workspace

logger = logging.getLogger(__name__)


def _finding_target(
    finding: RedactionFinding, *, lock: bool
) -> Message | Observation | Reflection | None:
    model, _ = REDACTION_TARGETS[finding.target_type]
    rows = model.objects.select_for_update() if lock else model.objects
    return rows.filter(pk=finding.target_id).first()


def _finding_value(finding: RedactionFinding, text: str, policy: RedactionPolicy) -> str:
    """The value a pending finding points at in the current text. Its offsets are only
    trusted while a detector still finds that entity type there: a person may have
    edited the text since (an observation edit keeps no record of findings)."""
    value = text[finding.start : finding.end]
    spec = presidio.PolicySpec.of(policy)
    if not value.strip() or not presidio.engine().locates(
        text, spec=spec, entity_type=finding.entity_type, start=finding.start, end=finding.end
    ):
        raise MemdeskError(
            "finding_stale",
            "The text of this finding's object changed since it was recorded, so its "
            "offsets no longer point at the value. Dismiss it, or run "
            "rescan_redaction to record the current findings.",
            status_code=409,
        )
    return value


def _pending(finding_id: int) -> RedactionFinding:
    finding = RedactionFinding.objects.select_for_update().get(pk=finding_id)
    if finding.status != RedactionFinding.Status.PENDING_REVIEW:
        raise MemdeskError(
            "finding_not_pending",
            f"This finding was already decided ({finding.status}).",
            status_code=409,
        )
    return finding


def _finding_snapshot(finding: RedactionFinding) -> dict[str, Any]:
    return {
        "status": finding.status,
        "entityType": finding.entity_type,
        "targetType": finding.target_type,
        "targetId": str(finding.target_id),
        "start": finding.start,
        "end": finding.end,
        "operator": finding.operator,
        "pseudonym": finding.pseudonym.label if finding.pseudonym else None,
    }


def redaction_finding_approve(
    *, finding: RedactionFinding, actor: Actor, reason: str = ""
) -> RedactionFinding:
    """A reviewer confirms a finding: its value is replaced in the stored text with the
    operator recorded on the finding (the original kept per policy; a pseudonym numbered
    in this transaction if the value has none yet), the target's other findings are
    moved to the new offsets, and the context's version is bumped."""
    with transaction.atomic():
        locked = _pending(finding.pk)
        before = _finding_snapshot(locked)
        policy = redaction_policy_get_or_create(workspace_id=locked.workspace_id)
        target = _finding_target(locked, lock=True)
        text_changed = False
        if target is not None:
            _, field = REDACTION_TARGETS[locked.target_type]
            text = getattr(target, field)
            value = _finding_value(locked, text, policy)
            pseudonyms = WorkspacePseudonyms(locked.workspace_id)
            replacement = presidio.operate(
                value,
                entity_type=locked.entity_type,
                operator=locked.operator,
                spec=presidio.PolicySpec.of(policy),
                pseudonyms=pseudonyms,
            )
            used = pseudonyms.take_used()
            if used:
                locked.pseudonym = used[0][0]
                pseudonym_sightings_record(target_type=locked.target_type, uses=[(target, used)])
            if replacement != value:
                edits = [(locked.start, locked.end, len(replacement))]
                new_text = text[: locked.start] + replacement + text[locked.end :]
                store_target_text(target, field, text, new_text)
                others = RedactionFinding.objects.filter(
                    target_type=locked.target_type, target_id=locked.target_id
                ).exclude(pk=locked.pk)
                shift_findings(list(others), edits)
                keep_original(
                    policy=policy,
                    target_type=locked.target_type,
                    target_id=locked.target_id,
                    conversation_id=locked.conversation_id,
                    text=text,
                )
                locked.end = locked.start + len(replacement)
                text_changed = True
                Conversation.objects.filter(pk=locked.conversation_id).update(
                    memory_version=F("memory_version") + 1
                )
        locked.status = RedactionFinding.Status.APPROVED
        locked.reviewed_by = actor.label[:200]
        locked.reviewed_at = timezone.now()
        locked.save(update_fields=["status", "end", "reviewed_by", "reviewed_at", "pseudonym"])
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="redaction_finding.approve",
            target_type="redaction_finding",
            target_id=str(locked.pk),
            before=before,
            after={
                **_finding_snapshot(locked),
                "textChanged": text_changed,
                "targetMissing": target is None,
            },
            reason=reason,
        )
    return locked


def redaction_finding_dismiss(
    *,
    finding: RedactionFinding,
    actor: Actor,
    add_to_allow_list: bool = False,
    reason: str = "",
) -> RedactionFinding:
    """A reviewer decides a finding is not personal data: the value stays in the text.
    With ``add_to_allow_list`` the value (read from the current text at the finding's
    offsets, checked to still be there) joins the policy's allow list, so it is never
    reported again; that is a policy change, audited and versioned as such."""
    with transaction.atomic():
        locked = _pending(finding.pk)
        before = _finding_snapshot(locked)
        added = False
        if add_to_allow_list:
            target = _finding_target(locked, lock=False)
            if target is None:
                raise MemdeskError(
                    "target_missing",
                    "The object of this finding no longer exists, so there is no value to "
                    "add to the allow list.",
                    status_code=409,
                )
            _, field = REDACTION_TARGETS[locked.target_type]
            policy = redaction_policy_get_or_create(workspace_id=locked.workspace_id)
            value = _finding_value(locked, getattr(target, field), policy)
            policy = RedactionPolicy.objects.select_for_update().get(pk=policy.pk)
            if value not in policy.allow_list:
                if len(policy.allow_list) >= POLICY_LIST_LIMIT:
                    raise invalid_policy("allowList", f"is full ({POLICY_LIST_LIMIT} entries).")
                policy_before = redaction_policy_snapshot(policy)
                policy.allow_list = [*policy.allow_list, value]
                policy.version += 1
                policy.updated_at = timezone.now()
                policy.save(update_fields=["allow_list", "version", "updated_at"])
                audit_record(
                    workspace_id=locked.workspace_id,
                    actor=actor,
                    action="redaction_policy.update",
                    target_type="redaction_policy",
                    target_id=str(policy.pk),
                    before=policy_before,
                    after=redaction_policy_snapshot(policy),
                    reason=f"finding {locked.pk} dismissed",
                )
                added = True
        locked.status = RedactionFinding.Status.DISMISSED
        locked.reviewed_by = actor.label[:200]
        locked.reviewed_at = timezone.now()
        locked.save(update_fields=["status", "reviewed_by", "reviewed_at"])
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="redaction_finding.dismiss",
            target_type="redaction_finding",
            target_id=str(locked.pk),
            before=before,
            after={**_finding_snapshot(locked), "addedToAllowList": added},
            reason=reason,
        )
    return locked


def restricted_original_read(
    *, workspace: Workspace, target_type: str, target_id: object, actor: Actor, reason: str
) -> RestrictedOriginal:
    """The text of a message, observation or reflection as it was before redaction, for
    the compliance role and a reason, as every reveal needs one. Every read is audited
    (``restricted_original.read``, with the reason), in the same transaction, before the
    text is returned. The caller checks the role."""
    if target_type not in REDACTION_TARGETS:
        raise MemdeskError(
            "invalid_target_type",
            f"targetType must be one of {', '.join(REDACTION_TARGETS)}; got {target_type!r}.",
            field="target_type",
        )
    try:
        target_uuid = uuid.UUID(str(target_id))
    except ValueError:
        raise MemdeskError(
            "invalid_id", f"targetId must be a UUID; got {target_id!r}.", field="target_id"
        ) from None
    with transaction.atomic():
        original = RestrictedOriginal.objects.filter(
            workspace_id=workspace.pk, target_type=target_type, target_id=target_uuid
        ).first()
        if original is None:
            raise MemdeskError(
                "not_found",
                "No original is kept for this object (nothing was redacted, or the policy "
                "destroys originals).",
                status_code=404,
            )
        # Looked up first: another workspace's id answers as one that exists nowhere.
        reason = require_reason(
            reason, message="A reason is required to read a text as it was before redaction."
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="restricted_original.read",
            target_type=target_type,
            target_id=str(target_uuid),
            after={"originalId": original.pk, "characters": len(original.text)},
            reason=reason,
        )
    return original


RESCAN_TIERS = ("messages", "observations", "reflections")
_TIER_TARGETS = {
    "messages": RedactionFinding.TargetType.MESSAGE,
    "observations": RedactionFinding.TargetType.OBSERVATION,
    "reflections": RedactionFinding.TargetType.REFLECTION,
}
RESCAN_TASK = "governance.tasks.redaction_rescan_task"
# A RUNNING re-scan moves ``updated_at`` with every batch; one that has not moved for
# this long lost its worker. A PENDING one whose task never arrived is sent again.
RESCAN_STALE_RUNNING = timedelta(minutes=30)
RESCAN_STALE_PENDING = timedelta(minutes=10)
RESCAN_ABANDONED = "abandoned: no worker finished it"
# Called after each batch with the tier, its counts so far and its total.
RescanProgress = Callable[[str, dict[str, int], int], None]


def _rescan_rows(workspace: Workspace, tier: str) -> QuerySet[Message | Observation | Reflection]:
    model, _ = REDACTION_TARGETS[_TIER_TARGETS[tier]]
    rows: QuerySet[Message | Observation | Reflection] = model.objects.filter(
        conversation__workspace_id=workspace.pk
    ).order_by("pk")
    return rows.defer("metadata") if model is Message else rows


def rescan_tiers(tiers: Sequence[str] | None) -> list[str]:
    """The tiers asked for, in their order; every tier when none is named."""
    if not tiers:
        return list(RESCAN_TIERS)
    unknown = sorted(set(tiers) - set(RESCAN_TIERS))
    if unknown:
        raise MemdeskError(
            "invalid_tiers",
            f"tiers must be among {', '.join(RESCAN_TIERS)}; got {', '.join(unknown)}.",
            field="tiers",
        )
    return [tier for tier in RESCAN_TIERS if tier in tiers]


def redaction_rescan(
    *,
    workspace: Workspace,
    tiers: Sequence[str] | None = None,
    batch_size: int = 200,
    n_process: int = presidio.N_PROCESS,
    progress: RescanProgress | None = None,
    actor: Actor = SYSTEM_ACTOR,
) -> dict[str, dict[str, int]]:
    """Scan a workspace's stored memory again under its current policy, in batches of
    ``batch_size`` (each batch one transaction), e.g. after the policy or the engine
    changed. Default: every tier.

    Messages are scanned (``governance.redaction.scan``: findings recorded, the text kept, every
    message read again so an engine upgrade reaches old ones), except where the policy
    redacts at ingest: there their stored text is redacted, as observations and
    reflections always are. Returns per tier the objects in it, the objects scanned, the
    findings recorded and the objects skipped because someone edited them during the
    scan (scan again to pick them up)."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    report: dict[str, dict[str, int]] = {}
    for tier in rescan_tiers(tiers):
        target_type = _TIER_TARGETS[tier]
        rows = _rescan_rows(workspace, tier)
        total = rows.count()
        counts = {"total": total, "scanned": 0, "findings": 0, "skipped": 0}
        scan_only = tier == "messages" and not policy.redact_at_ingest
        last_pk = None
        while True:
            page = rows.filter(pk__gt=last_pk) if last_pk is not None else rows
            batch = list(page[:batch_size])
            if not batch:
                break
            last_pk = batch[-1].pk
            engine_batch = min(batch_size, presidio.BATCH_SIZE)
            if scan_only:
                outcome = scan.messages_scan(
                    policy=policy,
                    messages=batch,  # type: ignore[arg-type]  # the messages tier
                    force=True,
                    actor=actor,
                    batch_size=engine_batch,
                    n_process=n_process,
                )
                counts["findings"] += outcome.new_findings
                counts["skipped"] += len(outcome.skipped)
            else:
                before = RedactionFinding.objects.filter(
                    workspace_id=workspace.pk, target_type=target_type
                ).count()
                try:
                    redact_targets(
                        target_type=target_type,
                        targets=batch,
                        policy=policy,
                        actor=actor,
                        batch_size=engine_batch,
                        n_process=n_process,
                    )
                except RedactionConflict:
                    # One edited object rolls its batch back; one at a time, the others go in.
                    for target in batch:
                        try:
                            redact_targets(
                                target_type=target_type,
                                targets=[target],
                                policy=policy,
                                actor=actor,
                            )
                        except RedactionConflict:
                            counts["skipped"] += 1
                counts["findings"] += (
                    RedactionFinding.objects.filter(
                        workspace_id=workspace.pk, target_type=target_type
                    ).count()
                    - before
                )
            counts["scanned"] += len(batch)
            if progress:
                progress(tier, dict(counts), total)
        report[tier] = counts
    return report


class _RescanStopped(Exception):
    """The run's row left RUNNING (marked abandoned): stop scanning."""


def rescan_run_request(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    tiers: Sequence[str] | None = None,
    enqueue: bool = True,
) -> RescanRun:
    """Queue a re-scan of the workspace for a worker (``rescan_run_execute``), audited
    with its reason. One at a time per workspace: while one is open, a 409. Without
    ``enqueue`` the caller runs it itself (the management command)."""
    reason = require_reason(reason, message="Say why the workspace is scanned again.")
    chosen = rescan_tiers(tiers)
    with transaction.atomic():
        # Serialises two requests for one workspace: both cannot see "none open".
        # NO KEY UPDATE: a full lock would deadlock with audit events being written (their
        # inserts take KEY SHARE on the workspace while holding the chain head).
        Workspace.objects.select_for_update(no_key=True).filter(pk=workspace.pk).first()
        running = RescanRun.objects.filter(
            workspace=workspace, status__in=RescanRun.OPEN_STATUSES
        ).first()
        if running is not None:
            raise MemdeskError(
                "rescan_open",
                f"Re-scan {running.pk} of this workspace is still {running.status}: wait "
                "for it to finish before starting another.",
                status_code=409,
            )
        run = RescanRun.objects.create(
            workspace=workspace,
            tiers=chosen,
            reason=reason,
            requested_by=actor.label[:200],
            requested_by_role=actor.role,
            counts={
                tier: {"total": 0, "scanned": 0, "findings": 0, "skipped": 0} for tier in chosen
            },
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="redaction.rescan_request",
            target_type="rescan_run",
            target_id=str(run.pk),
            after={"runId": run.pk, "tiers": chosen},
            reason=reason,
        )
        if enqueue:
            enqueue_on_commit(RESCAN_TASK, run.pk)
    return run


def rescan_run_execute(
    *,
    run_id: int,
    batch_size: int = 200,
    n_process: int = presidio.N_PROCESS,
    progress: RescanProgress | None = None,
) -> RescanRun:
    """Run one queued re-scan, storing its progress after every batch, then write its
    summary to the audit trail (counts only). Acts only if it claims the PENDING row, so
    a task delivered twice runs once. A failure is recorded on the run, never retried:
    what was scanned stays scanned, and another run picks up the rest."""
    started = timezone.now()
    claimed = RescanRun.objects.filter(pk=run_id, status=RescanRun.Status.PENDING).update(
        status=RescanRun.Status.RUNNING, started_at=started, updated_at=started
    )
    run = RescanRun.objects.select_related("workspace").get(pk=run_id)
    if not claimed:
        return run
    counts: dict[str, dict[str, int]] = {
        tier: {
            "total": _rescan_rows(run.workspace, tier).count(),
            "scanned": 0,
            "findings": 0,
            "skipped": 0,
        }
        for tier in run.tiers
    }
    RescanRun.objects.filter(pk=run.pk).update(
        counts=counts, total=sum(c["total"] for c in counts.values())
    )

    def on_batch(tier: str, tier_counts: dict[str, int], total: int) -> None:
        counts[tier] = tier_counts
        moved = RescanRun.objects.filter(pk=run.pk, status=RescanRun.Status.RUNNING).update(
            counts=counts,
            total=sum(c["total"] for c in counts.values()),
            done=sum(c["scanned"] for c in counts.values()),
            updated_at=timezone.now(),
        )
        if not moved:
            raise _RescanStopped
        if progress:
            progress(tier, tier_counts, total)

    # The run's events carry whoever asked for it, with the role they had then.
    requester = Actor.from_label(run.requested_by, role=run.requested_by_role)
    status, error = RescanRun.Status.COMPLETED, ""
    try:
        redaction_rescan(
            workspace=run.workspace,
            actor=requester,
            tiers=run.tiers,
            batch_size=batch_size,
            n_process=n_process,
            progress=on_batch,
        )
    except _RescanStopped:
        status, error = RescanRun.Status.FAILED, "stopped: the run was marked abandoned"
    except SoftTimeLimitExceeded:
        status, error = (
            RescanRun.Status.FAILED,
            "stopped: the run reached its time limit; start another to scan the rest",
        )
    except Exception as exc:  # noqa: BLE001 - recorded on the run; never any text
        logger.exception("re-scan %s failed", run.pk)
        status, error = RescanRun.Status.FAILED, f"{type(exc).__name__} (see the worker log)"
    finished = timezone.now()
    with transaction.atomic():
        RescanRun.objects.filter(pk=run.pk, status=RescanRun.Status.RUNNING).update(
            status=status,
            error=error,
            counts=counts,
            done=sum(c["scanned"] for c in counts.values()),
            finished_at=finished,
            updated_at=finished,
        )
        audit_record(
            workspace_id=run.workspace_id,
            actor=requester,
            action="redaction.rescan",
            target_type="rescan_run",
            target_id=str(run.pk),
            after={
                "runId": run.pk,
                "status": status,
                "counts": counts,
                "requestedBy": run.requested_by,
                "startedAt": started.isoformat(),
                "finishedAt": finished.isoformat(),
            },
        )
    logger.info("re-scan %s of workspace %s: %s, %s", run.pk, run.workspace_id, status, counts)
    run.refresh_from_db()
    return run


def rescan_run_sweep(*, now: datetime | None = None) -> dict[str, int]:
    """Fail re-scans whose worker vanished, and send again those whose task was lost."""
    now = now or timezone.now()
    abandoned = RescanRun.objects.filter(
        status=RescanRun.Status.RUNNING, updated_at__lt=now - RESCAN_STALE_RUNNING
    ).update(status=RescanRun.Status.FAILED, error=RESCAN_ABANDONED, finished_at=now)
    requeued = 0
    for run_id in RescanRun.objects.filter(
        status=RescanRun.Status.PENDING, created_at__lt=now - RESCAN_STALE_PENDING
    ).values_list("pk", flat=True):
        with transaction.atomic():
            enqueue_on_commit(RESCAN_TASK, run_id)
        requeued += 1
    return {"rescansAbandoned": abandoned, "rescansRequeued": requeued}
