"""Workspaces and the API keys of their agents."""

from __future__ import annotations

import secrets

from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import transaction
from django.utils import timezone

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record
from tenancy.auth import forget_api_key
from tenancy.models import ApiKey, Workspace


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
