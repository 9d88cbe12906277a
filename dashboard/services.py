"""Writes to who may do what: role grants (memberships). Each is audited in the
workspace it grants, in the transaction that makes it, whatever the door (``/admin/``,
a command)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from core.actors import Actor
from core.errors import MemdeskError
from dashboard.models import Membership, Role
from governance.audit import audit_record, require_reason
from memory.models import Workspace

REASON_REQUIRED = "A reason is required to change who may do what."


def membership_snapshot(membership: Membership) -> dict[str, Any]:
    return {"userId": membership.user_id, "role": membership.role}


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise MemdeskError(
            "invalid_role",
            f"role must be one of {', '.join(Role.values)}; got {role!r}.",
            field="role",
        )


def membership_grant(
    *,
    user: AbstractBaseUser,
    workspace: Workspace,
    role: str,
    actor: Actor,
    reason: str,
) -> Membership:
    """Give ``user`` a role in ``workspace``, or change the role they have there."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    _check_role(role)
    with transaction.atomic():
        membership = (
            Membership.objects.select_for_update()
            .filter(user_id=user.pk, workspace_id=workspace.pk)
            .first()
        )
        if membership is not None:
            return membership_role_change(
                membership=membership, role=role, actor=actor, reason=reason
            )
        membership = Membership.objects.create(user_id=user.pk, workspace=workspace, role=role)
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="membership.grant",
            target_type="membership",
            target_id=str(membership.pk),
            after=membership_snapshot(membership),
            reason=reason,
        )
    return membership


def membership_role_change(
    *, membership: Membership, role: str, actor: Actor, reason: str
) -> Membership:
    """Change a member's role; a change that changes nothing is not recorded."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    _check_role(role)
    with transaction.atomic():
        locked = Membership.objects.select_for_update().get(pk=membership.pk)
        if locked.role == role:
            return locked
        before = membership_snapshot(locked)
        locked.role = role
        locked.save(update_fields=["role"])
        audit_record(
            workspace_id=locked.workspace_id,
            actor=actor,
            action="membership.change",
            target_type="membership",
            target_id=str(locked.pk),
            before=before,
            after=membership_snapshot(locked),
            reason=reason,
        )
    return locked


def membership_revoke(*, membership: Membership, actor: Actor, reason: str) -> None:
    """Take a user's role in a workspace away."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    with transaction.atomic():
        audit_record(
            workspace_id=membership.workspace_id,
            actor=actor,
            action="membership.revoke",
            target_type="membership",
            target_id=str(membership.pk),
            before=membership_snapshot(membership),
            reason=reason,
        )
        membership.delete()
