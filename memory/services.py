"""Writes to memory. Every change goes through one of these functions, which validates
it, writes it and its audit event in one transaction, and raises ``MemdeskError``."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import (
    DEFAULT_DB_ALIAS,
    IntegrityError,
    connections,
    models,
    transaction,
)
from django.db.models import F, QuerySet
from django.utils import timezone

from core.actors import Actor, ActorType
from core.auth import forget_api_key
from core.errors import MemdeskError
from core.paging import parse_uuid
from core.transactions import retried_on_conflict
from governance.audit import audit_record, require_reason
from governance.gates import (
    conversation_pseudonyms,
    message_scan_request,
    pseudonyms_release,
    reasoning_redaction_at_ingest,
    redaction_at_ingest,
    redaction_at_ingest_record,
)
from governance.holds import LegalHoldError, conversation_delete_check
from memory.engines.base import FIDELITIES
from memory.grounding import grounding_score
from memory.models import (
    ApiKey,
    Conversation,
    Escalation,
    IdempotencyRecord,
    MemorySource,
    Message,
    Observation,
    ObservationVersion,
    Pin,
    Priority,
    ReasoningStep,
    Reflection,
    ReflectionVersion,
    ToolCall,
    Workspace,
)
from memory.pipeline import observer_schedule_if_due, reflector_schedule_for_correction
from memory.references import references_in
from memory.tokens import token_count, token_counts

MAX_BULK_MESSAGES = 100
# A default context budget beyond any model's window is a typo, not a choice.
MAX_CONTEXT_MAX_TOKENS = 10_000_000
REASON_REQUIRED = "A reason is required to change memory."

# --- Workspaces and keys -------------------------------------------------------------


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


def workspace_settings_snapshot(workspace: Workspace) -> dict[str, Any]:
    """The memory settings as the audit trail records them: the level the workspace chose
    (null: it follows MEMDESK_OBSERVER_FIDELITY), the level in force, and the default
    token budget of a served context (null: none)."""
    return {
        "fidelity": workspace.fidelity or None,
        "effectiveFidelity": workspace.effective_fidelity,
        "contextMaxTokens": workspace.context_max_tokens,
    }


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
) -> Workspace:
    """Choose how much detail the Observer keeps in this workspace: one of ``FIDELITIES``,
    or ``None`` / ``""`` to follow ``MEMDESK_OBSERVER_FIDELITY`` again; and the token
    budget of a context served without ``max_tokens`` (``None``: no budget).

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


# --- Conversations and messages ----------------------------------------------------------


def conversation_create(
    *,
    workspace: Workspace,
    user_id: str = "",
    title: str = "",
    metadata: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Conversation:
    now = created_at or timezone.now()
    return Conversation.objects.create(
        workspace=workspace,
        user_id=user_id,
        title=title,
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
    deleted_by: dict[str, Any] | None = None
    if actor.type == ActorType.API_KEY and actor.role == ApiKey.Scope.AGENT:
        reason = AGENT_DELETE_REASON + (f": {reason.strip()}" if reason.strip() else "")
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
            before={"userId": conversation.user_id, "title": conversation.title, "counts": counts},
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
    return counts


# When a message may say it was written: an imported history keeps its own dates, but a
# date out of these bounds is a client's bug, and one far in the future would both sort
# before every real message and overflow date arithmetic ("tomorrow" of 9999-12-31).
EARLIEST_MESSAGE_TIME = datetime(1970, 1, 1, tzinfo=UTC)
MESSAGE_CLOCK_SKEW = timedelta(days=1)


@dataclass(frozen=True)
class MessageInput:
    role: str
    content: str
    created_at: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    tool_name: str = ""
    tool_call_id: str = ""


def _validate_message(item: MessageInput, field_prefix: str) -> None:
    if item.role not in Message.Role.values:
        raise MemdeskError(
            "invalid_role",
            f"role must be one of {', '.join(Message.Role.values)}; got {item.role!r}.",
            field=f"{field_prefix}role",
        )
    if not item.content.strip():
        raise MemdeskError(
            "empty_content", "content must not be empty.", field=f"{field_prefix}content"
        )
    if len(item.content) > settings.MEMDESK_MAX_MESSAGE_CHARS:
        raise MemdeskError(
            "content_too_long",
            f"content is {len(item.content)} characters; the limit is "
            f"{settings.MEMDESK_MAX_MESSAGE_CHARS}.",
            field=f"{field_prefix}content",
        )
    if item.created_at is not None and not (
        EARLIEST_MESSAGE_TIME <= item.created_at <= timezone.now() + MESSAGE_CLOCK_SKEW
    ):
        raise MemdeskError(
            "invalid_created_at",
            f"createdAt must be between {EARLIEST_MESSAGE_TIME.date().isoformat()} and "
            f"{MESSAGE_CLOCK_SKEW.days} day from now; got {item.created_at.isoformat()}.",
            field=f"{field_prefix}createdAt",
        )


def _messages_insert(messages: list[Message]) -> None:
    """``bulk_create``, or one COPY on PostgreSQL, which spares the web worker building
    and quoting a 100-row INSERT (about 5 ms of CPU per 100 rows, against 4 ms for COPY;
    docs/benchmarks.md). Every concrete field goes through its own ``pre_save`` and
    ``get_db_prep_save``, as in ``bulk_create``."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs per lookup
    if db.vendor != "postgresql":
        Message.objects.bulk_create(messages)
        return
    fields = Message._meta.concrete_fields
    quote = db.ops.quote_name
    copy_sql = "COPY {} ({}) FROM STDIN".format(
        quote(Message._meta.db_table), ", ".join(quote(field.column) for field in fields)
    )
    with db.cursor() as cursor, db.wrap_database_errors, cursor.cursor.copy(copy_sql) as copy:
        for message in messages:
            copy.write_row(
                [field.get_db_prep_save(field.pre_save(message, True), db) for field in fields]
            )


def _seq_numbers_take(conversation: Conversation, count: int, *, now: datetime) -> int:
    """Move the conversation's ``last_seq`` on by ``count`` and return it, in one
    statement (``UPDATE ... RETURNING``, PostgreSQL and SQLite 3.35+), which takes the
    row's lock until the transaction ends."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = (
        f"UPDATE {db.ops.quote_name(Conversation._meta.db_table)} "
        f"SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s RETURNING last_seq"
    )
    with db.cursor() as cursor:
        cursor.execute(
            sql,
            [
                count,
                db.ops.adapt_datetimefield_value(now),
                models.UUIDField().get_db_prep_value(conversation.pk, db),
            ],
        )
        row = cursor.fetchone()
    if row is None:
        raise MemdeskError("not_found", "Conversation not found.", status_code=404)
    return int(row[0])


def messages_append(
    *,
    conversation: Conversation,
    items: Sequence[MessageInput],
    redact_at_ingest: bool | None = None,
) -> list[Message]:
    """Append messages with consecutive seq numbers, all or none. ``redact_at_ingest``
    is what the workspace's redaction policy says of it, when the caller read it with the
    conversation (``policy_flags_of``); otherwise it is read here.

    The conditional UPDATE of ``last_seq`` takes the conversation's row lock (PostgreSQL)
    or the database write lock (SQLite, IMMEDIATE transactions) before seq numbers are
    handed out, so concurrent appends queue instead of colliding, and a rolled-back
    append gives its numbers back: seq stays gapless.
    """
    if not items:
        raise MemdeskError("empty_batch", "Send at least one message.", field="messages")
    if len(items) > MAX_BULK_MESSAGES:
        raise MemdeskError(
            "too_many_messages",
            f"A bulk add takes at most {MAX_BULK_MESSAGES} messages; got {len(items)}.",
            field="messages",
        )
    many = len(items) > 1
    for index, item in enumerate(items):
        _validate_message(item, f"messages[{index}]." if many else "")

    contents = [item.content for item in items]
    # Analysed before anything is stored when the policy redacts at ingest (None
    # otherwise, without loading the redaction engine: the write path stays fast).
    ingest = redaction_at_ingest(
        workspace_id=conversation.workspace_id, contents=contents, redact=redact_at_ingest
    )
    counts = token_counts(contents) if ingest is None else []
    now = timezone.now()
    with transaction.atomic():
        if ingest is not None:
            # Redacted in the transaction that stores them: new pseudonyms are numbered
            # here and given back if the write fails.
            contents = ingest.redact()
            counts = token_counts(contents)
        last_seq = _seq_numbers_take(conversation, len(items), now=now)
        first_seq = last_seq - len(items) + 1
        messages = [
            Message(
                id=uuid.uuid4(),
                conversation_id=conversation.pk,
                seq=first_seq + offset,
                role=item.role,
                content=content,
                tool_name=item.tool_name,
                tool_call_id=item.tool_call_id,
                token_count=tokens,
                created_at=item.created_at or now,
                metadata=item.metadata,
            )
            for offset, (item, content, tokens) in enumerate(
                zip(items, contents, counts, strict=True)
            )
        ]
        _messages_insert(messages)
        if ingest is not None:
            redaction_at_ingest_record(conversation=conversation, messages=messages, ingest=ingest)
        else:
            # Scanned by a worker once this commits, never on the request path.
            message_scan_request(conversation=conversation, messages=messages)
        conversation.last_seq = last_seq
        conversation.updated_at = now
        # At most inserts a PENDING run; its task is sent after this commits, so the
        # write never waits for an engine.
        observer_schedule_if_due(conversation=conversation)
    return messages


# --- Idempotent writes ----------------------------------------------------------------------


def request_fingerprint(*, method: str, path: str, body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def idempotent_write(
    *,
    workspace: Workspace,
    key: str | None,
    fingerprint: str,
    write: Callable[[], tuple[int, Any, Conversation]],
) -> tuple[int, Any, bool]:
    """Run ``write`` once per ``Idempotency-Key``; replay its response for repeats.

    ``write`` returns (status, body, the conversation written to); the function returns
    (status, body, replayed). The record is inserted in the write's own
    transaction, so a crash leaves neither, and of two concurrent requests with one key
    the loser's insert fails, its write rolls back, and it replays the winner's response.
    """
    if not key:
        status, body, _ = write()
        return status, body, False
    if len(key) > 255:
        raise MemdeskError(
            "invalid_idempotency_key", "Idempotency-Key is longer than 255 characters."
        )
    existing = IdempotencyRecord.objects.filter(workspace=workspace, key=key).first()
    if existing is None:
        try:
            with transaction.atomic():
                status, body, conversation = write()
                IdempotencyRecord.objects.create(
                    workspace=workspace,
                    conversation=conversation,
                    key=key,
                    request_fingerprint=fingerprint,
                    response_status=status,
                    response_body=body,
                )
            return status, body, False
        except IntegrityError:
            existing = IdempotencyRecord.objects.filter(workspace=workspace, key=key).first()
            if existing is None:
                raise
    if existing.request_fingerprint != fingerprint:
        raise MemdeskError(
            "idempotency_key_reused",
            "This Idempotency-Key was already used with a different request body.",
            status_code=409,
        )
    return existing.response_status, existing.response_body, True


# --- Observations ---------------------------------------------------------------------------


def _bump_memory_version(conversation_id: uuid.UUID) -> None:
    Conversation.objects.filter(pk=conversation_id).update(
        memory_version=F("memory_version") + 1, updated_at=timezone.now()
    )


def _snapshot(item: Observation | Reflection) -> dict[str, Any]:
    """An observation or reflection as the audit trail records it."""
    snapshot: dict[str, Any] = {
        "text": item.text,
        "priority": item.priority,
        "referencedAt": item.referenced_at.isoformat() if item.referenced_at else None,
        "tags": item.tags,
        "version": item.version,
    }
    if isinstance(item, Reflection):
        snapshot["status"] = item.status
    return snapshot


def _keep_version(
    item: Observation | Reflection, *, change: str, reason: str, actor: Actor
) -> None:
    kept: dict[str, Any] = {
        "conversation_id": item.conversation_id,
        "version": item.version,
        "text": item.text,
        "priority": item.priority,
        "referenced_at": item.referenced_at,
        "tags": item.tags,
        "change": change,
        "reason": reason,
        "changed_by": actor.label,
    }
    if isinstance(item, Reflection):
        ReflectionVersion.objects.create(reflection_id=item.pk, **kept)
    else:
        ObservationVersion.objects.create(observation_id=item.pk, **kept)


def _validate_priority(priority: str) -> None:
    if priority not in Priority.values:
        raise MemdeskError(
            "invalid_priority",
            f"priority must be one of {', '.join(Priority.values)}; got {priority!r}.",
            field="priority",
        )


def observation_create(
    *,
    conversation: Conversation,
    actor: Actor,
    text: str,
    priority: str = Priority.MEDIUM,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
    topics: list[str] | None = None,
    ticket_id: str = "",
    source_message_ids: list[uuid.UUID] | None = None,
    reason: str = "",
) -> Observation:
    """Add an observation written by a person or an agent (not by the Observer)."""
    text = (text or "").strip()
    if not text:
        raise MemdeskError("empty_text", "text must not be empty.", field="text")
    _validate_priority(priority)
    references = references_in(text)
    tags = [*(tags or []), *(t for t in references.tags if t not in (tags or []))]
    ticket_id = ticket_id or references.ticket_id
    window: dict[str, Any] = {}
    source_ids: list[str] = []
    if source_message_ids:
        sources = list(
            Message.objects.filter(conversation=conversation, id__in=source_message_ids)
            .order_by("seq")
            .values("id", "seq", "created_at", "content", "tool_name")
        )
        if len(sources) != len(set(source_message_ids)):
            raise MemdeskError(
                "unknown_source_message",
                "A source message id names a message that is not in this conversation.",
                field="source_message_ids",
            )
        source_ids = [str(s["id"]) for s in sources]
        window = {
            "window_start_seq": sources[0]["seq"],
            "window_end_seq": sources[-1]["seq"],
            "window_start_at": sources[0]["created_at"],
            "window_end_at": sources[-1]["created_at"],
            "observed_at": sources[-1]["created_at"],
            "grounding": grounding_score(
                text, [f"{s['content']} {s['tool_name']}" for s in sources]
            ),
        }
    with transaction.atomic():
        observation = Observation.objects.create(
            conversation=conversation,
            text=text,
            priority=priority,
            referenced_at=referenced_at,
            source=MemorySource.MANUAL if actor.is_human else MemorySource.API,
            tags=tags or [],
            topics=topics or [],
            ticket_id=ticket_id,
            source_message_ids=source_ids,
            token_count=token_count(text),
            **window,
        )
        _bump_memory_version(conversation.pk)
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="observation.create",
            target_type="observation",
            target_id=str(observation.pk),
            after=_snapshot(observation),
            reason=reason,
        )
    return observation


def _source_texts(message_ids: list[str]) -> list[str]:
    return [
        f"{content} {tool_name}"
        for content, tool_name in Message.objects.filter(pk__in=message_ids).values_list(
            "content", "tool_name"
        )
    ]


def _edit_reason(
    *,
    reason: str,
    text: str | None,
    priority: str | None,
    referenced_at: datetime | None,
    tags: list[str] | None,
) -> str:
    """The reason, once the edit itself is known to be valid (else MemdeskError)."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    if text is not None and not text.strip():
        raise MemdeskError("empty_text", "text must not be empty.", field="text")
    if priority is not None:
        _validate_priority(priority)
    if text is None and priority is None and referenced_at is None and tags is None:
        raise MemdeskError(
            "nothing_to_change",
            "Send at least one of content (or text), priority, referencedAt, tags.",
        )
    return reason


def _regrounded(item: Observation | Reflection) -> float | None:
    """The grounding score of an edited text: an observation against its source
    messages, a reflection against those of its source observations still stored."""
    if isinstance(item, Reflection):
        ids = [str(i) for i in item.source_observation_ids]
        texts = list(Observation.objects.filter(pk__in=ids).values_list("text", flat=True))
        return grounding_score(item.text, texts) if texts else None
    if item.source_message_ids:
        return grounding_score(item.text, _source_texts(item.source_message_ids))
    return item.grounding


def _apply_edit(
    item: Observation | Reflection,
    *,
    text: str | None,
    priority: str | None,
    referenced_at: datetime | None,
    tags: list[str] | None,
) -> None:
    """Change what was sent, bump the version and save. A stale reflection a person
    edits is active again: their words are served from now on."""
    if text is not None:
        item.text = text.strip()
        item.token_count = token_count(item.text)
        item.grounding = _regrounded(item)
    if priority is not None:
        item.priority = priority
    if referenced_at is not None:
        item.referenced_at = referenced_at
    if tags is not None:
        item.tags = tags
    if isinstance(item, Reflection) and item.status == Reflection.Status.STALE:
        item.status = Reflection.Status.ACTIVE
    item.version += 1
    item.updated_at = timezone.now()
    item.save()


def _edit_action(
    kind: str, *, text: object, priority: object, referenced_at: object, tags: object
) -> str:
    only_priority = priority is not None and text is None and tags is None and referenced_at is None
    return f"{kind}.reprioritise" if only_priority else f"{kind}.edit"


# What the Reflector reads of an observation (with its id and dates): when one of these
# changes, what a reflection says about it may no longer be true.
REFLECTED_FIELDS = ("text", "priority", "referencedAt")


def _reflected_change(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return any(before[name] != after[name] for name in REFLECTED_FIELDS)


def _reflections_go_stale(
    *, observation: Observation, actor: Actor, reason: str, change: str
) -> list[Reflection]:
    """Stop serving every active reflection built from ``observation``, which was just
    edited, reverted or deleted in the caller's transaction: each becomes stale (its
    sources, as they now stand, are served in its place) and the Reflector is scheduled,
    once this commits, to re-derive it. A reflection a person edited goes stale too:
    its sources changed after the person wrote it."""
    source_id = str(observation.pk)
    candidates = Reflection.objects.select_for_update().filter(
        conversation_id=observation.conversation_id, status=Reflection.Status.ACTIVE
    )
    built_from = [r for r in candidates if source_id in {str(i) for i in r.source_observation_ids}]
    if not built_from:
        return []
    Reflection.objects.filter(pk__in=[r.pk for r in built_from]).update(
        status=Reflection.Status.STALE, updated_at=timezone.now()
    )
    conversation = observation.conversation
    for reflection in built_from:
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="reflection.stale",
            target_type="reflection",
            target_id=str(reflection.pk),
            before={"status": Reflection.Status.ACTIVE},
            after={
                "status": Reflection.Status.STALE,
                "sourceObservationId": source_id,
                "sourceChange": change,
            },
            reason=reason,
        )
    reflector_schedule_for_correction(conversation=conversation)
    return built_from


NoteT = TypeVar("NoteT", Observation, Reflection)


def _record_change(
    locked: NoteT,
    *,
    action: str,
    actor: Actor,
    reason: str,
    change: str,
    apply: Callable[[NoteT], None],
    after_extra: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The steps every correction of a locked observation or reflection takes: keep the
    version it replaces, apply it, serve it (memory version), audit it. Returns the
    snapshots before and after."""
    before = _snapshot(locked)
    _keep_version(locked, change=change, reason=reason, actor=actor)
    apply(locked)
    after = _snapshot(locked)
    _bump_memory_version(locked.conversation_id)
    audit_record(
        workspace_id=locked.conversation.workspace_id,
        actor=actor,
        action=action,
        target_type=action.split(".")[0],
        target_id=str(locked.pk),
        before=before,
        after={**after, **(after_extra or {})},
        reason=reason,
    )
    return before, after


def _record_delete(
    locked: Observation | Reflection,
    *,
    actor: Actor,
    reason: str,
    before_delete: Callable[[], object] | None = None,
) -> None:
    """Delete a locked observation or reflection, keeping its last version, audited."""
    kind = "observation" if isinstance(locked, Observation) else "reflection"
    _keep_version(locked, change="delete", reason=reason, actor=actor)
    audit_record(
        workspace_id=locked.conversation.workspace_id,
        actor=actor,
        action=f"{kind}.delete",
        target_type=kind,
        target_id=str(locked.pk),
        before=_snapshot(locked),
        reason=reason,
    )
    if before_delete is not None:
        before_delete()
    conversation_id = locked.conversation_id
    locked.delete()
    _bump_memory_version(conversation_id)


def observation_update(
    *,
    observation: Observation,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
) -> Observation:
    """Edit an observation, keeping the previous version and the reason for the change.
    Reflections built from it stop being served at once and are re-derived."""
    reason = _edit_reason(
        reason=reason, text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    action = _edit_action(
        "observation", text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    with transaction.atomic():
        locked = Observation.objects.select_for_update().get(pk=observation.pk)
        before, after = _record_change(
            locked,
            action=action,
            actor=actor,
            reason=reason,
            change="edit",
            apply=lambda item: _apply_edit(
                item, text=text, priority=priority, referenced_at=referenced_at, tags=tags
            ),
        )
        if _reflected_change(before, after):
            _reflections_go_stale(
                observation=locked, actor=actor, reason=reason, change=action.split(".")[1]
            )
    return locked


def observation_delete(*, observation: Observation, actor: Actor, reason: str) -> None:
    """Delete an observation, keeping its last version. Reflections built from it stop
    being served at once and are re-derived from their other sources."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    with transaction.atomic():
        locked = Observation.objects.select_for_update().get(pk=observation.pk)
        _record_delete(
            locked,
            actor=actor,
            reason=reason,
            before_delete=lambda: _reflections_go_stale(
                observation=locked, actor=actor, reason=reason, change="delete"
            ),
        )


def _revert_to(
    locked: Observation | Reflection, target: ObservationVersion | ReflectionVersion
) -> None:
    locked.text = target.text
    locked.token_count = token_count(target.text)
    locked.grounding = _regrounded(locked)
    locked.priority = target.priority
    locked.referenced_at = target.referenced_at
    locked.tags = target.tags
    if isinstance(locked, Reflection) and locked.status == Reflection.Status.STALE:
        locked.status = Reflection.Status.ACTIVE
    locked.version += 1
    locked.updated_at = timezone.now()
    locked.save()


def _unknown_version(kind: str, version: int) -> MemdeskError:
    return MemdeskError(
        "unknown_version", f"This {kind} has no earlier version {version}.", field="version"
    )


def observation_revert(
    *, observation: Observation, version: int, actor: Actor, reason: str
) -> Observation:
    """Restore an earlier version's text, priority, event date and tags. The revert is
    itself an edit: it keeps the version it replaces and is audited as a revert, and
    reflections built from the observation are re-derived."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    target = ObservationVersion.objects.filter(
        observation_id=observation.pk, version=version
    ).first()
    if target is None:
        raise _unknown_version("observation", version)
    with transaction.atomic():
        locked = Observation.objects.select_for_update().get(pk=observation.pk)
        before, after = _record_change(
            locked,
            action="observation.revert",
            actor=actor,
            reason=reason,
            change="revert",
            apply=lambda item: _revert_to(item, target),
            after_extra={"revertedTo": version},
        )
        if _reflected_change(before, after):
            _reflections_go_stale(observation=locked, actor=actor, reason=reason, change="revert")
    return locked


# --- Reflections ----------------------------------------------------------------------------


def _reflection_locked(reflection: Reflection, *, superseded_ok: bool = False) -> Reflection:
    """The reflection's row, locked. A superseded one is history: the Reflector replaced
    it, and a correction belongs on what replaced it (a deletion may still remove it)."""
    locked = (
        Reflection.objects.select_for_update()
        .select_related("conversation")
        .filter(pk=reflection.pk)
        .first()
    )
    if locked is None:
        raise MemdeskError(
            "not_found", "Reflection not found in this conversation.", status_code=404
        )
    if locked.status == Reflection.Status.SUPERSEDED and not superseded_ok:
        raise MemdeskError(
            "reflection_superseded",
            "This reflection was replaced when the Reflector re-derived it"
            + (f" (by {locked.superseded_by_id})" if locked.superseded_by_id else "")
            + "; correct the reflection that replaced it.",
            status_code=409,
        )
    return locked


def reflection_update(
    *,
    reflection: Reflection,
    actor: Actor,
    reason: str,
    text: str | None = None,
    priority: str | None = None,
    referenced_at: datetime | None = None,
    tags: list[str] | None = None,
) -> Reflection:
    """Edit a reflection, keeping the previous version and the reason for the change.

    The edit is served at once. A stale reflection that is edited is active again and
    the re-derivation leaves it as the person wrote it; only a later change to one of
    its sources makes it stale again, for the Reflector to re-derive."""
    reason = _edit_reason(
        reason=reason, text=text, priority=priority, referenced_at=referenced_at, tags=tags
    )
    with transaction.atomic():
        locked = _reflection_locked(reflection)
        _record_change(
            locked,
            action=_edit_action(
                "reflection", text=text, priority=priority, referenced_at=referenced_at, tags=tags
            ),
            actor=actor,
            reason=reason,
            change="edit",
            apply=lambda item: _apply_edit(
                item, text=text, priority=priority, referenced_at=referenced_at, tags=tags
            ),
        )
    return locked


def reflection_delete(*, reflection: Reflection, actor: Actor, reason: str) -> None:
    """Delete a reflection, keeping its last version: what it says leaves the context at
    once. Its source observations stay stored and reflected, so they are not served in
    its place and the Reflector does not bring it back; delete them too to remove them."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    with transaction.atomic():
        _record_delete(
            _reflection_locked(reflection, superseded_ok=True), actor=actor, reason=reason
        )


def reflection_revert(
    *, reflection: Reflection, version: int, actor: Actor, reason: str
) -> Reflection:
    """Restore an earlier version's text, priority, event date and tags: an edit like
    ``reflection_update``, kept and audited as a revert."""
    reason = require_reason(reason, message=REASON_REQUIRED)
    target = ReflectionVersion.objects.filter(reflection_id=reflection.pk, version=version).first()
    if target is None:
        raise _unknown_version("reflection", version)
    with transaction.atomic():
        locked = _reflection_locked(reflection)
        _record_change(
            locked,
            action="reflection.revert",
            actor=actor,
            reason=reason,
            change="revert",
            apply=lambda item: _revert_to(item, target),
            after_extra={"revertedTo": version},
        )
    return locked


# --- Grounding of notes written before it was scored -----------------------------------------


def _grounding_backfill_tier(
    rows: QuerySet[NoteT],
    *,
    source_ids: Callable[[NoteT], list[str]],
    source_texts: Callable[[set[str]], dict[str, str]],
    batch_size: int,
) -> dict[str, int]:
    counts = {"scored": 0, "withoutSources": 0, "sourcesGone": 0}
    last_pk = None
    while True:
        with transaction.atomic():
            page = rows.filter(pk__gt=last_pk) if last_pk is not None else rows
            # Locked, so that an edit that rescored a note meanwhile is not overwritten.
            batch = list(page.select_for_update(of=("self",))[:batch_size])
            if not batch:
                return counts
            last_pk = batch[-1].pk
            texts = source_texts({str(i) for row in batch for i in source_ids(row)})
            scored = []
            for row in batch:
                ids = [str(i) for i in source_ids(row)]
                if not ids:
                    counts["withoutSources"] += 1
                elif any(i not in texts for i in ids):
                    counts["sourcesGone"] += 1
                else:
                    row.grounding = grounding_score(row.text, [texts[i] for i in ids])
                    scored.append(row)
            rows.model._default_manager.bulk_update(scored, ["grounding"])
            counts["scored"] += len(scored)


def grounding_backfill(
    *, workspace: Workspace, actor: Actor, batch_size: int = 500
) -> dict[str, dict[str, int]]:
    """Score the observations and reflections that have no grounding score (written
    before scores existed) as new ones are scored: an observation against its source
    messages, a reflection against its source observations, as they are stored.

    A note without sources keeps no score (nothing to check it against), and so does a
    note whose sources are not all still stored (retention deleted some): against part
    of its sources it would be flagged for claims the missing ones made. Batches of
    ``batch_size`` rows, each its own transaction; then one audit event with the counts
    per tier, if anything was scored. Running it again scores nothing more.
    """
    if batch_size < 1:
        raise MemdeskError("invalid_batch_size", "batch_size must be at least 1.")
    report: dict[str, dict[str, int]] = {}
    try:
        report["observations"] = _grounding_backfill_tier(
            Observation.objects.filter(
                conversation__workspace=workspace, grounding__isnull=True
            ).order_by("pk"),
            source_ids=lambda observation: observation.source_message_ids,
            source_texts=lambda ids: {
                str(pk): f"{content} {tool_name}"
                for pk, content, tool_name in Message.objects.filter(pk__in=ids).values_list(
                    "pk", "content", "tool_name"
                )
            },
            batch_size=batch_size,
        )
        report["reflections"] = _grounding_backfill_tier(
            Reflection.objects.filter(
                conversation__workspace=workspace, grounding__isnull=True
            ).order_by("pk"),
            source_ids=lambda reflection: reflection.source_observation_ids,
            source_texts=lambda ids: {
                str(pk): text
                for pk, text in Observation.objects.filter(pk__in=ids).values_list("pk", "text")
            },
            batch_size=batch_size,
        )
    finally:
        # Also when a batch failed: the batches before it are committed, and counted.
        if any(counts["scored"] for counts in report.values()):
            audit_record(
                workspace_id=workspace.pk,
                actor=actor,
                action="grounding.backfill",
                target_type="workspace",
                target_id=str(workspace.pk),
                after={**report, "finished": len(report) == 2},
                reason="grounding scores for notes written before they were scored",
            )
    return report


# --- Pins -------------------------------------------------------------------------------------


def _pin_snapshot(pin: Pin) -> dict[str, Any]:
    return {
        "messageId": str(pin.message_id),
        "start": pin.start,
        "end": pin.end,
        "text": pin.text,
        "tokenCount": pin.token_count,
        "createdBy": pin.created_by,
    }


def _pin_span(content: str, start: int | None, end: int | None) -> tuple[int | None, int | None]:
    """The span as stored: (None, None) for the whole message, else both offsets."""
    if start is None and end is None:
        return None, None
    first = 0 if start is None else start
    last = len(content) if end is None else end
    if first < 0 or first > len(content):
        raise MemdeskError(
            "invalid_span",
            f"start must be between 0 and {len(content)} (the message's length); got {first}.",
            field="start",
        )
    if last > len(content):
        raise MemdeskError(
            "invalid_span",
            f"end must be at most {len(content)} (the message's length); got {last}.",
            field="end",
        )
    if last <= first:
        raise MemdeskError(
            "invalid_span", f"end ({last}) must be greater than start ({first}).", field="end"
        )
    return first, last


def pin_create(
    *,
    conversation: Conversation,
    actor: Actor,
    message_id: uuid.UUID | str,
    start: int | None = None,
    end: int | None = None,
    reason: str = "",
) -> Pin:
    """Pin a verbatim quote of one of the conversation's messages: all of it, or the
    characters ``start:end``. The quote is copied as the message stands (redacted, if
    the workspace redacts at ingest) and served first in every context format."""
    message = (
        Message.objects.filter(
            conversation=conversation, pk=parse_uuid(message_id, field="message_id")
        )
        .only("pk", "content")
        .first()
    )
    if message is None:
        raise MemdeskError(
            "unknown_message",
            "message_id names no message of this conversation.",
            field="message_id",
        )
    start, end = _pin_span(message.content, start, end)
    text = message.content if start is None else message.content[start:end]
    if not text.strip():
        raise MemdeskError(
            "empty_span", "The quote is only whitespace: pin some text.", field="start"
        )
    with transaction.atomic():
        pin = Pin.objects.create(
            conversation=conversation,
            message=message,
            start=start,
            end=end,
            text=text,
            token_count=token_count(text),
            created_by=actor.label,
        )
        _bump_memory_version(conversation.pk)
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="pin.create",
            target_type="pin",
            target_id=str(pin.pk),
            after=_pin_snapshot(pin),
            reason=reason,
        )
    return pin


def pin_delete(*, pin: Pin, actor: Actor, reason: str) -> None:
    """Unpin: the quote leaves the context at once; the audit event keeps what it was."""
    reason = require_reason(reason, message="A reason is required to unpin.")
    with transaction.atomic():
        locked = Pin.objects.select_for_update().filter(pk=pin.pk).first()
        if locked is None:
            raise MemdeskError("not_found", "Pin not found in this conversation.", status_code=404)
        audit_record(
            workspace_id=pin.conversation.workspace_id,
            actor=actor,
            action="pin.delete",
            target_type="pin",
            target_id=str(locked.pk),
            before=_pin_snapshot(locked),
            reason=reason,
        )
        locked.delete()
        _bump_memory_version(locked.conversation_id)


# --- escalations ---------------------------------------------------------------------------------

ESCALATION_REASON_MAX_CHARS = 2000
ESCALATION_NOTE_MAX_CHARS = 2000


def _escalation_snapshot(escalation: Escalation) -> dict[str, Any]:
    # Ids and state only: the reason and the note may hold personal data, kept out of
    # the trail as message content is.
    return {"conversationId": str(escalation.conversation_id), "status": escalation.status}


def _bounded_text(value: str, *, field: str, limit: int, what: str) -> str:
    value = (value or "").strip()
    if not value:
        raise MemdeskError(f"{field}_required", f"{what} is required.", field=field)
    if len(value) > limit:
        raise MemdeskError(
            f"{field}_too_long",
            f"{what} is {len(value)} characters; at most {limit} are kept.",
            field=field,
        )
    return value


def escalation_create(
    *,
    conversation: Conversation,
    actor: Actor,
    reason: str,
    metadata: dict[str, Any] | None = None,
) -> Escalation:
    """Hand the conversation to a person: an open escalation that reviewers see in the
    dashboard's list, audited (ids only)."""
    reason = _bounded_text(
        reason, field="reason", limit=ESCALATION_REASON_MAX_CHARS, what="A reason"
    )
    with transaction.atomic():
        escalation = Escalation.objects.create(
            conversation=conversation,
            reason=reason,
            metadata=metadata or {},
            created_by=actor.label,
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="conversation.escalate",
            target_type="escalation",
            target_id=str(escalation.pk),
            after=_escalation_snapshot(escalation),
        )
    return escalation


def escalation_resolve(*, escalation: Escalation, actor: Actor, note: str) -> Escalation:
    """Close an open escalation with a note saying what the person did; audited (ids
    only). Resolving one that is already resolved is refused, so the first note stands."""
    note = _bounded_text(note, field="note", limit=ESCALATION_NOTE_MAX_CHARS, what="A note")
    with transaction.atomic():
        changed = Escalation.objects.filter(pk=escalation.pk, status=Escalation.Status.OPEN).update(
            status=Escalation.Status.RESOLVED,
            resolved_by=actor.label,
            resolved_at=timezone.now(),
            resolution_note=note,
        )
        if not changed:
            raise MemdeskError(
                "already_resolved",
                "This escalation is already resolved.",
                status_code=409,
            )
        before = _escalation_snapshot(escalation)
        escalation.refresh_from_db()
        audit_record(
            workspace_id=escalation.conversation.workspace_id,
            actor=actor,
            action="escalation.resolve",
            target_type="escalation",
            target_id=str(escalation.pk),
            before=before,
            after=_escalation_snapshot(escalation),
        )
    return escalation


# --- Reasoning memory (steps and tool calls) ---------------------------------------------------


def _check_reasoning_text(text: str, field: str) -> None:
    if len(text) > settings.MEMDESK_MAX_MESSAGE_CHARS:
        raise MemdeskError(
            "content_too_long",
            f"{field} is {len(text)} characters; the limit is "
            f"{settings.MEMDESK_MAX_MESSAGE_CHARS}.",
            field=field,
        )


def _stored_texts(*, workspace_id: uuid.UUID, texts: list[str]) -> list[str]:
    """The texts as stored: redacted when the policy redacts at ingest."""
    redacted = reasoning_redaction_at_ingest(workspace_id=workspace_id, texts=texts)
    return texts if redacted is None else redacted


def _after_seq_locked(conversation: Conversation) -> int:
    """Lock the conversation (as an append does, so a step and a message recorded at
    once are ordered) and return the seq of its last message."""
    updated = Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    if not updated:
        raise MemdeskError("not_found", "Conversation not found.", status_code=404)
    return Conversation.objects.values_list("last_seq", flat=True).get(pk=conversation.pk)


def reasoning_step_record(
    *,
    conversation: Conversation,
    actor: Actor,
    reasoning: str,
    action_taken: str = "",
    result: str = "",
    metadata: dict[str, Any] | None = None,
) -> ReasoningStep:
    """Record one reasoning step of the agent in ``conversation``, numbered after the
    steps before it and placed after the conversation's last message. Whitespace-only
    text is stored as empty (the NAMS Python client sends " " for a missing thought),
    but a step must say something. Its texts are redacted at ingest when the policy
    says so; the audit event names it, never its text."""
    texts = [t if t.strip() else "" for t in (reasoning, action_taken, result)]
    if not any(texts):
        raise MemdeskError(
            "empty_step",
            "A reasoning step needs reasoning, actionTaken or result: all are empty.",
            field="reasoning",
        )
    for text, name in zip(texts, ("reasoning", "action_taken", "result"), strict=True):
        _check_reasoning_text(text, name)
    reasoning, action_taken, result = _stored_texts(
        workspace_id=conversation.workspace_id, texts=texts
    )
    with transaction.atomic():
        after_seq = _after_seq_locked(conversation)
        last = (
            ReasoningStep.objects.filter(conversation=conversation)
            .order_by("-step_number")
            .values_list("step_number", flat=True)
            .first()
        )
        step = ReasoningStep.objects.create(
            conversation=conversation,
            step_number=(last or 0) + 1,
            after_seq=after_seq,
            reasoning=reasoning,
            action_taken=action_taken,
            result=result,
            metadata=metadata or {},
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="reasoning_step.create",
            target_type="reasoning_step",
            target_id=str(step.pk),
            after={
                "conversationId": str(conversation.pk),
                "stepNumber": step.step_number,
                "afterSeq": after_seq,
            },
        )
    return step


def tool_call_record(
    *,
    conversation: Conversation | None,
    actor: Actor,
    workspace: Workspace,
    tool_name: str,
    step_id: uuid.UUID | None = None,
    input: str = "",
    output: str = "",
    status: str = ToolCall.Status.SUCCESS,
    duration_ms: int | None = None,
    error: str = "",
    metadata: dict[str, Any] | None = None,
) -> ToolCall:
    """Record one tool call in ``conversation``, or in the conversation of the step
    ``step_id`` names (NAMS clients send only the step). ``input`` and ``output`` are
    kept as text (the clients send JSON-encoded text), redacted at ingest when the
    policy says so. The Observer reads the output as tool output with the message that
    follows the call. The audit event names the call and its tool, never its input or
    output."""
    if not tool_name.strip():
        raise MemdeskError("empty_tool_name", "toolName must not be empty.", field="tool_name")
    if status not in ToolCall.Status.values:
        raise MemdeskError(
            "invalid_status",
            f"status must be one of {', '.join(ToolCall.Status.values)}; got {status!r}.",
            field="status",
        )
    step = None
    if step_id is not None:
        step = (
            ReasoningStep.objects.filter(pk=step_id, conversation__workspace=workspace)
            .select_related("conversation")
            .first()
        )
        if step is None:
            raise MemdeskError(
                "not_found",
                "No reasoning step with this stepId in this workspace.",
                field="step_id",
                status_code=404,
            )
        if conversation is not None and step.conversation_id != conversation.pk:
            raise MemdeskError(
                "conflicting_fields",
                "stepId names a step of another conversation than conversationId.",
                field="step_id",
            )
        conversation = step.conversation
    if conversation is None:
        raise MemdeskError(
            "conversation_required",
            "Send conversationId, or the stepId of a step the call belongs to.",
            field="conversation_id",
        )
    for text, name in ((input, "input"), (output, "output"), (error, "error")):
        _check_reasoning_text(text, name)
    input, output, error = _stored_texts(
        workspace_id=conversation.workspace_id, texts=[input, output, error]
    )
    with transaction.atomic():
        after_seq = _after_seq_locked(conversation)
        call = ToolCall.objects.create(
            conversation=conversation,
            step=step,
            after_seq=after_seq,
            tool_name=tool_name,
            input=input,
            output=output,
            status=status,
            duration_ms=duration_ms,
            error=error,
            metadata=metadata or {},
        )
        audit_record(
            workspace_id=conversation.workspace_id,
            actor=actor,
            action="tool_call.create",
            target_type="tool_call",
            target_id=str(call.pk),
            after={
                "conversationId": str(conversation.pk),
                "stepId": str(step.pk) if step else None,
                "toolName": tool_name,
                "status": status,
                "afterSeq": after_seq,
            },
        )
    return call
