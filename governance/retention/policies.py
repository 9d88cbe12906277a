"""Retention policies: create, update, delete, validated and audited."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError, wire_field
from governance.audit.writer import audit_record
from governance.models import (
    RetentionPolicy,
)
from governance.redaction.gates import texts_masked_for_display
from governance.retention.common import MAX_DAYS
from tenancy.models import Workspace


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def policy_snapshot(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "name": policy.name,
        "conversationTag": policy.conversation_tag,
        "messageDays": policy.message_days,
        "observationDays": policy.observation_days,
        "reflectionDays": policy.reflection_days,
        "contextReadDays": policy.context_read_days,
        "enabled": policy.enabled,
    }


def _reason_for_trail(reason: str, *, workspace_id: Any) -> str:
    """A policy change's reason as the audit trail keeps it: each value the workspace's
    redaction policy finds masked as its type. A reason may quote the data it is about,
    and the trail outlives every erasure. Masked before the transaction: an empty reason
    loads no engine, another holds no lock while it loads."""
    [masked] = texts_masked_for_display(workspace_id=workspace_id, texts=[reason])
    return masked


def _validate_days(value: int | None, field_name: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_DAYS:
        raise MemdeskError(
            "invalid_days",
            f"{wire_field(field_name)} must be a whole number of days from 1 to {MAX_DAYS}, "
            "or null "
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
            "The conversation tag must be at most 100 characters.",
            field="conversation_tag",
        )
    _validate_days(policy.message_days, "message_days")
    _validate_days(policy.observation_days, "observation_days")
    _validate_days(policy.reflection_days, "reflection_days")
    _validate_days(policy.context_read_days, "context_read_days")
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
            field="conversation_tag",
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
    context_read_days: int | None = None,
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
        context_read_days=context_read_days,
        enabled=enabled,
    )
    reason = _reason_for_trail(reason, workspace_id=workspace.pk)
    with transaction.atomic():
        _validate_policy(policy)
        _policy_save(policy)
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="retention_policy.create",
            target_type="retention_policy",
            target_id=str(policy.pk),
            after=policy_snapshot(policy),
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
    context_read_days: int | None | _Unset = UNSET,
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
        "context_read_days": context_read_days,
        "enabled": enabled,
    }
    changes = {key: value for key, value in changes.items() if value is not UNSET}
    if not changes:
        raise MemdeskError(
            "nothing_to_change",
            "Send at least one of name, conversationTag, messageDays, observationDays, "
            "reflectionDays, contextReadDays, enabled.",
        )
    reason = _reason_for_trail(reason, workspace_id=policy.workspace_id)
    with transaction.atomic():
        locked = RetentionPolicy.objects.select_for_update().get(pk=policy.pk)
        before = policy_snapshot(locked)
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
            after=policy_snapshot(locked),
            reason=reason,
        )
    return locked


def retention_policy_delete(*, policy: RetentionPolicy, actor: Actor, reason: str = "") -> None:
    reason = _reason_for_trail(reason, workspace_id=policy.workspace_id)
    with transaction.atomic():
        locked = RetentionPolicy.objects.select_for_update().get(pk=policy.pk)
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="retention_policy.delete",
            target_type="retention_policy",
            target_id=str(locked.pk),
            before=policy_snapshot(locked),
            reason=reason,
        )
        locked.delete()
