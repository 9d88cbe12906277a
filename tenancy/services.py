"""Writes to tenancy: workspaces, their agents' API keys, and who may do what (role
grants, memberships). Each is audited in the workspace it changes, in the transaction
that makes it, whatever the door (the API, the dashboard, ``/admin/``, a command)."""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record, require_reason
from tenancy.auth import forget_api_key
from tenancy.models import ApiKey, Membership, Role, Workspace

REASON_REQUIRED = "A reason is required to change who may do what."


def workspace_get_or_create(*, name: str, actor: Actor | None = None) -> Workspace:
    """The workspace called ``name``, created if there is none. With an ``actor`` a
    creation opens the workspace's audit trail with a ``workspace.create`` event."""
    try:
        validate_slug(name)
    except ValidationError:
        raise MemdeskError(
            "invalid_workspace_name",
            f"A workspace name is letters, digits, '-' and '_' only; got {name!r}.",
            field="name",
        ) from None
    with transaction.atomic():
        workspace, created = Workspace.objects.get_or_create(name=name)
        if created and actor is not None:
            audit_record(
                workspace_id=workspace.pk,
                actor=actor,
                action="workspace.create",
                target_type="workspace",
                target_id=str(workspace.pk),
                after={"name": workspace.name},
            )
    return workspace


def api_key_create(
    *,
    workspace: Workspace,
    actor: Actor,
    name: str = "",
    scope: str = ApiKey.Scope.AGENT,
) -> tuple[ApiKey, str]:
    """Create a key and return it with the raw key, which is never stored or shown again."""
    raw_key = "md_" + secrets.token_urlsafe(32)
    with transaction.atomic():
        api_key = ApiKey.objects.create(
            workspace=workspace,
            name=name,
            prefix=raw_key[: ApiKey.PREFIX_LENGTH],
            key_hash=ApiKey.hash_raw_key(raw_key),
            scope=scope,
        )
        audit_record(
            workspace_id=workspace.pk,
            actor=actor,
            action="api_key.create",
            target_type="api_key",
            target_id=str(api_key.pk),
            after={"prefix": api_key.prefix, "name": name, "scope": scope},
        )
    return api_key, raw_key


def api_key_revoke(*, api_key: ApiKey, actor: Actor) -> ApiKey:
    with transaction.atomic():
        updated = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        if updated:
            audit_record(
                workspace_id=api_key.workspace_id,
                actor=actor,
                action="api_key.revoke",
                target_type="api_key",
                target_id=str(api_key.pk),
                before={"prefix": api_key.prefix},
            )
            # Authentication keeps a key a few seconds: a revoked one must go at once.
            # Again after the commit, in case a request cached the key in between.
            forget_api_key(api_key.key_hash)
            transaction.on_commit(lambda: forget_api_key(api_key.key_hash))
    api_key.refresh_from_db()
    return api_key



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


def _keep_an_admin(membership: Membership) -> None:
    """Refuse to take the admin role from a workspace's last admin: nobody could give
    roles there any more (superusers aside, who need no role)."""
    if membership.role != Role.ADMIN:
        return
    others = (
        Membership.objects.select_for_update()
        .filter(workspace_id=membership.workspace_id, role=Role.ADMIN)
        .exclude(pk=membership.pk)
    )
    if not others.exists():
        raise MemdeskError(
            "last_admin",
            "This is the workspace's only admin: make someone else admin first, or nobody "
            "could give roles here any more.",
            field="role",
            status_code=409,
        )


def member_add(
    *,
    workspace: Workspace,
    username: str,
    role: str,
    actor: Actor,
    reason: str,
    password: str | None = None,
) -> tuple[Membership, bool, str | None]:
    """Give the account ``username`` a role, creating the account if there is none
    (with ``password``, or a generated one). Returns the membership, whether the account
    was created, and the generated password, to be shown once."""
    username = username.strip()
    if not username:
        raise MemdeskError("invalid_username", "Give the person's username.", field="username")
    reason = require_reason(reason, message=REASON_REQUIRED)
    _check_role(role)
    User = get_user_model()
    with transaction.atomic():
        user = User.objects.filter(username=username).first()
        created, generated = user is None, None
        if user is None:
            user = User(username=username)
            try:
                User._meta.get_field("username").run_validators(username)
            except ValidationError as exc:
                raise MemdeskError(
                    "invalid_username", " ".join(exc.messages), field="username"
                ) from None
            if password is None:
                generated = password = secrets.token_urlsafe(12)
        if password is not None:
            try:
                validate_password(password, user)
            except ValidationError as exc:
                raise MemdeskError(
                    "invalid_password", " ".join(exc.messages), field="password"
                ) from None
            user.set_password(password)
            user.save()
        membership = membership_grant(
            user=user, workspace=workspace, role=role, actor=actor, reason=reason
        )
    return membership, created, generated


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
        if role != Role.ADMIN:
            _keep_an_admin(locked)
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
        _keep_an_admin(membership)
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
