"""A workspace's memory settings: how much detail the Observer keeps, and the
default token budget of a served context."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record, require_reason
from memory.engines.base import FIDELITIES
from tenancy.models import APPROVAL_MODES, Workspace

# A default context budget beyond any model's window is a typo, not a choice.
MAX_CONTEXT_MAX_TOKENS = 10_000_000


def workspace_settings_snapshot(workspace: Workspace) -> dict[str, Any]:
    """The memory settings as the audit trail records them: the level the workspace chose
    (null: it follows MEMDESK_OBSERVER_FIDELITY), the level in force, and the default
    token budget of a served context (null: none)."""
    return {
        "fidelity": workspace.fidelity or None,
        "effectiveFidelity": workspace.effective_fidelity,
        "contextMaxTokens": workspace.context_max_tokens,
        "approval": workspace.approval,
        "approvalByTag": workspace.approval_by_tag,
    }


MAX_APPROVAL_TAGS = 100


def _approval_mode(mode: object, *, field: str) -> str:
    if mode not in APPROVAL_MODES:
        raise MemdeskError(
            "invalid_approval",
            f"{field} must be one of {', '.join(APPROVAL_MODES)}; got {mode!r}.",
            field=field,
        )
    return str(mode)


class _Unchanged:
    """A setting the caller leaves as it is (``None`` means "back to the default")."""


UNCHANGED: Any = _Unchanged()


def workspace_settings_update(
    *,
    workspace: Workspace,
    actor: Actor,
    reason: str,
    fidelity: str | None = UNCHANGED,
    context_max_tokens: int | None = UNCHANGED,
    approval: str = UNCHANGED,
    approval_by_tag: dict[str, str] = UNCHANGED,
) -> Workspace:
    """Choose how much detail the Observer keeps in this workspace: one of ``FIDELITIES``,
    or ``None`` / ``""`` to follow ``MEMDESK_OBSERVER_FIDELITY`` again; the token
    budget of a context served without ``max_tokens`` (``None``: no budget); and which
    new reflections wait for a person (``approval``, and per conversation tag
    ``approval_by_tag``: memory/approval/).

    The Observer's next runs use the fidelity; memory already written stays as it is.
    The change and its reason go to the audit trail; a change that changes nothing is not
    recorded.
    """
    reason = require_reason(reason, message="A reason is required to change memory settings.")
    changes: dict[str, Any] = {}
    if fidelity is not UNCHANGED:
        chosen = fidelity or ""
        if chosen and chosen not in FIDELITIES:
            raise MemdeskError(
                "invalid_fidelity",
                f"fidelity must be one of {', '.join(FIDELITIES)}, or null to follow the "
                f"default ({settings.MEMDESK_OBSERVER_FIDELITY}); got {fidelity!r}.",
                field="fidelity",
            )
        changes["fidelity"] = chosen
    if context_max_tokens is not UNCHANGED:
        if context_max_tokens is not None and (
            isinstance(context_max_tokens, bool)
            or not isinstance(context_max_tokens, int)
            or not 1 <= context_max_tokens <= MAX_CONTEXT_MAX_TOKENS
        ):
            raise MemdeskError(
                "invalid_context_max_tokens",
                f"context_max_tokens must be a whole number from 1 to {MAX_CONTEXT_MAX_TOKENS},"
                " or null for no default budget.",
                field="context_max_tokens",
            )
        changes["context_max_tokens"] = context_max_tokens
    if approval is not UNCHANGED:
        changes["approval"] = _approval_mode(approval, field="approval")
    if approval_by_tag is not UNCHANGED:
        if not isinstance(approval_by_tag, dict) or len(approval_by_tag) > MAX_APPROVAL_TAGS:
            raise MemdeskError(
                "invalid_approval_by_tag",
                f"approval_by_tag must map at most {MAX_APPROVAL_TAGS} conversation tags to "
                f"an approval mode ({', '.join(APPROVAL_MODES)}).",
                field="approval_by_tag",
            )
        by_tag = {}
        for tag, mode in approval_by_tag.items():
            if not isinstance(tag, str) or not tag.strip() or len(tag) > 100:
                raise MemdeskError(
                    "invalid_approval_by_tag",
                    "approval_by_tag's keys are conversation tags of 1 to 100 characters.",
                    field="approval_by_tag",
                )
            by_tag[tag.strip()] = _approval_mode(mode, field="approval_by_tag")
        changes["approval_by_tag"] = by_tag
    with transaction.atomic():
        # NO KEY UPDATE: these settings are no key, and a full lock would deadlock with
        # audit events being written (their inserts take KEY SHARE on the workspace).
        locked = Workspace.objects.select_for_update(no_key=True).get(pk=workspace.pk)
        changed = [name for name, value in changes.items() if getattr(locked, name) != value]
        if not changed:
            return locked
        before = workspace_settings_snapshot(locked)
        for name in changed:
            setattr(locked, name, changes[name])
        locked.save(update_fields=changed)
        audit_record(
            workspace_id=locked.pk,
            actor=actor,
            action="workspace.settings.update",
            target_type="workspace",
            target_id=str(locked.pk),
            before=before,
            after=workspace_settings_snapshot(locked),
            reason=reason,
        )
    return locked
