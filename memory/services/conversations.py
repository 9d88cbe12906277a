"""Conversations: creating one, deleting one with everything under it, and the memory
version that every change to what a context serves bumps."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.actors import Actor, ActorType
from core.errors import MemdeskError
from core.transactions import retried_on_conflict
from governance.audit.writer import audit_record, audit_text_digest
from governance.holds import LegalHoldError, conversation_delete_check
from governance.redaction.gates import (
    conversation_pseudonyms,
    pseudonyms_release,
    texts_masked_for_display,
)
from memory.context.caches import caches_forget
from memory.models import Conversation
from memory.search.index import index_purge_deleted
from tenancy.models import ApiKey, Workspace


def conversation_create(
    *,
    workspace: Workspace,
    user_id: str = "",
    title: str = "",
    metadata: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Conversation:
    """A new conversation. Its title is shown on pages masked (``title_masked``): the
    one pass of the redaction engine here runs only for a conversation with a title."""
    now = created_at or timezone.now()
    [title_masked] = texts_masked_for_display(workspace_id=workspace.pk, texts=[title])
    return Conversation.objects.create(
        workspace=workspace,
        user_id=user_id,
        title=title,
        title_masked=title_masked,
        metadata=metadata or {},
        created_at=now,
        updated_at=now,
    )


AGENT_DELETE_REASON = "deleted by agent"


def conversation_delete(
    *, conversation: Conversation, actor: Actor, reason: str = ""
) -> dict[str, Any]:
    """Delete a conversation and every tier under it, leaving a receipt in the audit trail.

    An agent-scope key needs no reason, but its deletes are told apart from a person's in
    the trail: the reason starts "deleted by agent" and the event names the key. A
    conversation that another request deleted meanwhile is left alone: nothing changes,
    nothing is audited, and the counts are zero (a delete is idempotent).
    """
    if actor.is_human and not reason.strip():
        raise MemdeskError("reason_required", "Deleting memory needs a reason.", field="reason")
    # The trail outlives the conversation: a reason quoting it keeps no value (an agent's
    # usual empty one loads no engine).
    [reason] = texts_masked_for_display(
        workspace_id=conversation.workspace_id, texts=[reason.strip()]
    )
    deleted_by: dict[str, Any] | None = None
    if actor.type == ActorType.API_KEY and actor.role == ApiKey.Scope.AGENT:
        reason = AGENT_DELETE_REASON + (f": {reason}" if reason else "")
        deleted_by = {"deletedBy": {"apiKey": actor.name, "apiKeyId": actor.id}}
    # A worker writing the conversation's scans or memory at the same moment can
    # deadlock with the cascade on PostgreSQL; the whole delete is tried again.
    return retried_on_conflict(
        lambda: _conversation_delete_once(
            conversation=conversation, actor=actor, reason=reason, deleted_by=deleted_by
        ),
        name="conversation delete",
    )


def _conversation_delete_once(
    *, conversation: Conversation, actor: Actor, reason: str, deleted_by: dict[str, Any] | None
) -> dict[str, Any]:
    with transaction.atomic():
        # Locked first: placing a legal hold takes the same lock, so the check below
        # cannot miss a hold placed at the same moment. A hold overrides everything.
        if Conversation.objects.select_for_update().filter(pk=conversation.pk).first() is None:
            return {"messages": 0, "observations": 0, "reflections": 0}
        try:
            conversation_delete_check(conversation=conversation)
        except LegalHoldError as held:
            raise MemdeskError("legal_hold", str(held), status_code=409) from None
        counts = {
            "messages": conversation.messages.count(),
            "observations": conversation.observations.count(),
            "reflections": conversation.reflections.count(),
            "reasoningSteps": conversation.reasoning_steps.count(),
            "toolCalls": conversation.tool_calls.count(),
        }
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="conversation.delete",
            target_type="conversation",
            target_id=str(conversation.pk),
            before={
                "userId": conversation.user_id,
                "titleDigest": audit_text_digest(conversation.title),
                "counts": counts,
            },
            after=deleted_by,
            reason=reason,
        )
        pseudonyms = conversation_pseudonyms(conversation_id=conversation.pk)
        workspace_id, conversation_id = conversation.workspace_id, conversation.pk
        conversation.delete()
        # Values no message holds any more leave their pseudonyms anonymous.
        pseudonyms_release(
            workspace_id=workspace_id,
            pseudonym_ids=pseudonyms,
            actor=actor,
            conversation_id=conversation_id,
            reason=reason,
        )
        # Its cached contexts repeat its messages: they go with it.
        transaction.on_commit(lambda: caches_forget([conversation_id]))
    return counts


def conversation_traces_purge(*, conversation_ids: Any, **_: Any) -> None:
    """After an erasure deleted these conversations (``core.signals.rows_erased``):
    their words leave the search index's older segments, and their cached contexts
    leave the caches."""
    index_purge_deleted()
    caches_forget(conversation_ids)


def memory_version_bump(conversation_id: uuid.UUID) -> None:
    """Mark what a context of the conversation serves as changed: the memory version
    keys the rendered-context cache and the ETag."""
    Conversation.objects.filter(pk=conversation_id).update(
        memory_version=F("memory_version") + 1, updated_at=timezone.now()
    )
