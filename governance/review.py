"""People's decisions on redaction: approving or dismissing a finding pending review,
reading a kept original (audited), and re-scanning stored memory under the policy."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance import redaction
from governance.audit import audit_record
from governance.gates import (
    RedactionConflict,
    keep_original,
    redact_targets,
    shift_findings,
    store_target_text,
)
from governance.models import (
    REDACTION_TARGETS,
    RedactionFinding,
    RedactionPolicy,
    RestrictedOriginal,
)
from governance.pseudonyms import WorkspacePseudonyms, pseudonym_sightings_record
from governance.redaction_policy import (
    POLICY_LIST_LIMIT,
    invalid_policy,
    redaction_policy_get_or_create,
    redaction_policy_snapshot,
)
from memory.models import Conversation, Message, Observation, Reflection, Workspace


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
    spec = redaction.PolicySpec.of(policy)
    if not value.strip() or not redaction.engine().locates(
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
            replacement = redaction.operate(
                value,
                entity_type=locked.entity_type,
                operator=locked.operator,
                spec=redaction.PolicySpec.of(policy),
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
    *, workspace: Workspace, target_type: str, target_id: object, actor: Actor
) -> RestrictedOriginal:
    """The text of a message, observation or reflection as it was before redaction, for
    the compliance role. Every read is audited (``restricted_original.read``), in the
    same transaction, before the text is returned. The caller checks the role."""
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
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="restricted_original.read",
            target_type=target_type,
            target_id=str(target_uuid),
            after={"originalId": original.pk, "characters": len(original.text)},
        )
    return original


RESCAN_TIERS = ("messages", "observations", "reflections")
_TIER_TARGETS = {
    "messages": RedactionFinding.TargetType.MESSAGE,
    "observations": RedactionFinding.TargetType.OBSERVATION,
    "reflections": RedactionFinding.TargetType.REFLECTION,
}


def redaction_rescan(
    *,
    workspace: Workspace,
    tiers: Sequence[str] | None = None,
    batch_size: int = 200,
    n_process: int = redaction.N_PROCESS,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Scan a workspace's stored memory again under its current policy, in batches of
    ``batch_size`` (each batch one transaction), e.g. after the policy changed.

    Default tiers: observations and reflections, and messages too when the policy
    redacts messages (at ingest or before observation). Returns per tier the objects
    scanned, the findings recorded and the objects skipped because someone edited them
    during the scan (scan again to pick them up)."""
    policy = redaction_policy_get_or_create(workspace_id=workspace.pk)
    if tiers is None:
        tiers = ["observations", "reflections"]
        if policy.redact_at_ingest or policy.redact_before_observation:
            tiers.insert(0, "messages")
    report: dict[str, dict[str, int]] = {}
    for tier in tiers:
        target_type = _TIER_TARGETS[tier]
        model, _ = REDACTION_TARGETS[target_type]
        rows: QuerySet[Message | Observation | Reflection] = model.objects.filter(
            conversation__workspace_id=workspace.pk
        ).order_by("pk")
        total = rows.count()
        counts = {"scanned": 0, "findings": 0, "skipped": 0}
        last_pk = None
        while True:
            page = rows.filter(pk__gt=last_pk) if last_pk is not None else rows
            batch = list(page[:batch_size])
            if not batch:
                break
            last_pk = batch[-1].pk
            before = RedactionFinding.objects.filter(
                workspace_id=workspace.pk, target_type=target_type
            ).count()
            try:
                redact_targets(
                    target_type=target_type,
                    targets=batch,
                    policy=policy,
                    batch_size=min(batch_size, redaction.BATCH_SIZE),
                    n_process=n_process,
                )
            except RedactionConflict:
                # One edited object rolls its batch back; one at a time, the others go in.
                for target in batch:
                    try:
                        redact_targets(target_type=target_type, targets=[target], policy=policy)
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
                progress(tier, counts["scanned"], total)
        report[tier] = counts
    return report
