"""Appending messages to a conversation: validation, seq numbers, the insert."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, models, transaction
from django.utils import timezone

from core.errors import MemdeskError
from core.inserts import copy_rows, fields_of, insert
from core.text import is_blank
from governance.redaction.gates import message_ingest
from memory.models import Conversation, Message
from memory.pipeline.scheduling import UnobservedBound, observer_schedule_after_append
from memory.tokens import token_counts

MAX_BULK_MESSAGES = 100

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
    name: str = ""  # the speaker's name; blank when the client sends only the role


# The stored column's bound (64).
SPEAKER_NAME_MAX_CHARS = Message._meta.get_field("name").max_length or 64
# What a speaker's name may not hold once its whitespace is collapsed: the C0 and C1
# controls and DEL, and the bidirectional embeddings, overrides and isolates, which make
# a name display as another one on a page or in a prompt.
_NOT_IN_A_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def speaker_name_problem(name: str) -> str | None:
    """Why ``name`` (its whitespace collapsed) cannot name a speaker, said after the
    field's name ("is 70 characters ..."); None when it can."""
    found = _NOT_IN_A_NAME.search(name)
    if found:
        return f"must not hold control characters; it holds U+{ord(found.group()):04X}."
    if len(name) > SPEAKER_NAME_MAX_CHARS:
        return (
            f"is {len(name)} characters once its whitespace is collapsed; the limit is "
            f"{SPEAKER_NAME_MAX_CHARS}."
        )
    return None


def _speaker_name(item: MessageInput) -> str:
    """Who said ``item``: its ``name``, else a ``metadata.name`` (where clients put the
    speaker before messages had a ``name``) that passes the rules of ``name``, else "".
    Metadata is the client's own JSON: what it holds never fails a write."""
    if item.name:
        return " ".join(item.name.split())
    value = item.metadata.get("name") if isinstance(item.metadata, dict) else None
    if not isinstance(value, str):
        return ""
    name = " ".join(value.split())
    return "" if speaker_name_problem(name) else name


def _validate_message(item: MessageInput, field_prefix: str) -> None:
    if item.role not in Message.Role.values:
        raise MemdeskError(
            "invalid_role",
            f"role must be one of {', '.join(Message.Role.values)}; got {item.role!r}.",
            field=f"{field_prefix}role",
        )
    if is_blank(item.content):
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
    problem = speaker_name_problem(" ".join(item.name.split()))
    if problem:
        # The API's field says the same; this holds for every caller (a command, a script).
        raise MemdeskError("invalid_name", f"name {problem}", field=f"{field_prefix}name")
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
    """One COPY on PostgreSQL, which spares the web worker building and quoting a 100-row
    INSERT (about 5 ms of CPU per 100 rows, against 4 ms for COPY;
    docs/benchmarks/2026-11-29.md, "Bulk ingest through the API"), and elsewhere an INSERT
    written once (``core.inserts``). Every concrete field goes through its own
    ``pre_save`` and ``get_db_prep_save``, as in ``bulk_create``."""
    db = connections[DEFAULT_DB_ALIAS]  # the wrapper itself: the proxy costs per lookup
    if db.vendor != "postgresql":
        insert(messages)
        return
    fields = fields_of(Message)
    copy_rows(
        Message,
        (
            [field.get_db_prep_save(field.pre_save(message, True), db) for field in fields]
            for message in messages
        ),
    )


def _seq_numbers_take(
    conversation: Conversation, count: int, tokens: int, *, now: datetime
) -> tuple[int, UnobservedBound]:
    """Move the conversation's ``last_seq`` on by ``count`` and its unobserved-tokens
    bound by ``tokens``, and return the new ``last_seq`` and bound, in one statement
    (``UPDATE ... RETURNING``, PostgreSQL and SQLite 3.35+), which takes the row's lock
    until the transaction ends."""
    db = connections[DEFAULT_DB_ALIAS]
    sql = (
        f"UPDATE {db.ops.quote_name(Conversation._meta.db_table)} "
        f"SET last_seq = last_seq + %s, updated_at = %s, "
        f"unobserved_tokens_bound = unobserved_tokens_bound + %s WHERE id = %s "
        f"RETURNING last_seq, unobserved_tokens_bound, unobserved_bound_version, memory_version"
    )
    with db.cursor() as cursor:
        cursor.execute(
            sql,
            [
                count,
                db.ops.adapt_datetimefield_value(now),
                tokens,
                models.UUIDField().get_db_prep_value(conversation.pk, db),
            ],
        )
        row = cursor.fetchone()
    if row is None:
        raise MemdeskError("not_found", "Conversation not found.", status_code=404)
    last_seq, bound, bound_version, memory_version = row
    return int(last_seq), UnobservedBound(bound, bound_version, memory_version)


def messages_append(
    *,
    conversation: Conversation,
    items: Sequence[MessageInput],
    redact_at_ingest: bool | None = None,
) -> list[Message]:
    """Append messages with consecutive seq numbers, all or none. ``redact_at_ingest``
    is what the workspace's redaction policy says of it, when the caller read it with the
    conversation (``conversation_and_policy_flags``); otherwise it is read here.

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
    # Analysed before anything is stored when the policy redacts at ingest (nothing
    # otherwise, without loading the redaction engine: the write path stays fast).
    ingest = message_ingest(
        workspace_id=conversation.workspace_id,
        contents=contents,
        redact=redact_at_ingest,
        names=[_speaker_name(item) for item in items],
        conversation_id=conversation.pk,
    )
    counts = [] if ingest.redacts else token_counts(contents)
    now = timezone.now()
    with transaction.atomic():
        if ingest.redacts:
            # Redacted in the transaction that stores them: new pseudonyms are numbered
            # here and given back if the write fails.
            contents = ingest.stored_contents()
            counts = token_counts(contents)
        last_seq, bound = _seq_numbers_take(conversation, len(items), sum(counts), now=now)
        first_seq = last_seq - len(items) + 1
        messages = [
            Message(
                id=uuid.uuid4(),
                conversation_id=conversation.pk,
                seq=first_seq + offset,
                role=item.role,
                content=content,
                name=ingest.stored_name(offset),
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
        # Findings recorded (redacted at ingest), or else scanned by a worker once this
        # commits, never on the request path.
        ingest.record(conversation=conversation, messages=messages)
        conversation.last_seq = last_seq
        conversation.updated_at = now
        conversation.memory_version = bound.memory_version
        # At most inserts a PENDING run; its task is sent after this commits, so the
        # write never waits for an engine. Most writes decide it from ``bound`` alone.
        observer_schedule_after_append(conversation=conversation, bound=bound)
    return messages
