"""Reads of memory, scoped to a workspace. Another workspace's object is "not found"."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from django.db import connection
from django.db.models import Count, Model, Q, QuerySet

from core.errors import MemdeskError
from core.paging import keyset_page, parse_uuid
from governance.redaction.gates import API_POLICY_FLAGS, conversations_with_pii, policy_flag_sql
from memory.models import (
    PERSONS_WORDS,
    Conversation,
    Escalation,
    Message,
    Observation,
    ObservationVersion,
    Pin,
    ReasoningStep,
    Reflection,
    ReflectionVersion,
    ToolCall,
)
from tenancy.models import Workspace

ModelT = TypeVar("ModelT", bound=Model)

# Ids per IN (...) when looking up which sources are still stored: well under SQLite's
# limit on bound parameters.
SOURCE_LOOKUP_CHUNK = 500


def _conversation_not_found() -> MemdeskError:
    return MemdeskError("not_found", "Conversation not found in this workspace.", status_code=404)


def conversation_get(*, workspace: Workspace, conversation_id: str) -> Conversation:
    pk = parse_uuid(conversation_id, field="conversation_id")
    try:
        conversation = Conversation.objects.get(pk=pk, workspace=workspace)
    except Conversation.DoesNotExist:
        raise _conversation_not_found() from None
    # The caller already holds the workspace (it came with the API key): no second join.
    conversation.workspace = workspace
    return conversation


@dataclass(frozen=True)
class PolicyFlags:
    """What the workspace's redaction policy says of serving and storing (``API_POLICY_FLAGS``),
    read with the conversation."""

    agents_see_reidentified: bool
    redact_at_ingest: bool


class _RowReader(Generic[ModelT]):
    """How a model's columns, selected in its fields' order, become an instance: the
    attribute names, and each field's column with the converters the ORM runs on its
    value (UUIDs and dates on SQLite, JSON everywhere). Made once per statement and
    backend (looked up per row they cost a write 0.15 ms of its 2-3,
    bench/request_path.py). The converters do not depend on which thread's connection
    looked them up: they read the settings, not the session."""

    def __init__(self, model: type[ModelT]) -> None:
        self.model = model
        self.fields = list(model._meta.concrete_fields)
        self.names = [f.attname for f in self.fields]
        self.columns: list[tuple[Any, tuple[Any, ...]]] = []
        for field in self.fields:
            column = field.get_col(model._meta.db_table)
            converters = connection.ops.get_db_converters(column) + column.get_db_converters(
                connection
            )
            self.columns.append((column, tuple(converters)))

    def selected(self, alias: str = "") -> list[str]:
        """The columns to select, in order, quoted (and qualified by ``alias``)."""
        prefix = f"{alias}." if alias else ""
        return [f"{prefix}{connection.ops.quote_name(f.column)}" for f in self.fields]

    def instance(self, values: Sequence[Any]) -> ModelT:
        converted = []
        for (column, converters), value in zip(self.columns, values, strict=True):
            for convert in converters:
                value = convert(value, column, connection)
            converted.append(value)
        return self.model.from_db(connection.alias, self.names, converted)


@functools.cache
def _conversation_lookup(
    vendor: str,
) -> tuple[str, _RowReader[Conversation], _RowReader[Workspace]]:
    """The statement that reads a conversation, its workspace and the policy flags, with
    how each model's columns become an instance (built once per backend)."""
    quote = connection.ops.quote_name
    conversations, workspaces = _RowReader(Conversation), _RowReader(Workspace)
    columns = conversations.selected("c") + workspaces.selected("w")
    columns += [f"({policy_flag_sql(flag, 'c.workspace_id')})" for flag in API_POLICY_FLAGS]
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(Conversation._meta.db_table)} c "
        f"JOIN {quote(Workspace._meta.db_table)} w ON w.id = c.workspace_id "
        f"WHERE c.id = %s AND c.workspace_id = %s"
    )
    return sql, conversations, workspaces


def _uuid_param(value: Any) -> Any:
    """A UUID as this backend's statements take it (32 hex characters on SQLite)."""
    uuid_field = Conversation._meta.pk
    assert uuid_field is not None
    return uuid_field.get_db_prep_value(value, connection)


def _conversation_row(sql: str, pk: uuid.UUID, workspace_id: Any) -> Sequence[Any]:
    """The one row ``sql`` (a statement written out, taking the conversation's id and its
    workspace's) returns, or "not found"."""
    with connection.cursor() as cursor:
        cursor.execute(sql, [_uuid_param(pk), _uuid_param(workspace_id)])
        row: Sequence[Any] | None = cursor.fetchone()
    if row is None:
        raise _conversation_not_found()
    return row


def conversation_get_with_workspace(*, workspace_id: Any, conversation_id: str) -> Conversation:
    """``conversation_get`` for a caller that has the workspace's id only: the workspace
    comes in the same query."""
    return conversation_and_policy_flags(
        workspace_id=workspace_id, conversation_id=conversation_id
    )[0]


def conversation_and_policy_flags(
    *, workspace_id: Any, conversation_id: str
) -> tuple[Conversation, PolicyFlags]:
    """The conversation, with its workspace, and the ``PolicyFlags`` of that workspace, in
    one statement. Every API request on a conversation starts here; composed by the ORM
    (``select_related`` and a subquery per flag) the same read cost 0.9 ms of a 3 ms
    message write, written out 0.1 ms (bench/request_path.py)."""
    pk = parse_uuid(conversation_id, field="conversation_id")
    sql, conversations, workspaces = _conversation_lookup(connection.vendor)
    row = _conversation_row(sql, pk, workspace_id)
    split, flags_at = len(conversations.fields), len(conversations.fields) + len(workspaces.fields)
    conversation = conversations.instance(row[:split])
    conversation.workspace = workspaces.instance(row[split:flags_at])
    flags = PolicyFlags(*(bool(value) for value in row[flags_at:]))
    return conversation, flags


@dataclass(frozen=True)
class ContextVersions:
    """What a served context depends on: enough to find it in a cache."""

    conversation_id: uuid.UUID
    last_seq: int
    memory_version: int
    context_max_tokens: int | None  # the workspace's default budget
    agents_see_reidentified: bool  # what the workspace's redaction policy says


def context_versions(*, workspace_id: Any, conversation_id: str) -> ContextVersions:
    """``ContextVersions`` of a conversation in the workspace, in one query.

    A cached context read does little else, and building it through the ORM (model
    instances for the conversation and its workspace, the policy as a subquery) cost
    1.3 ms against 0.2 ms for this statement; the other routes use
    ``conversation_get_with_workspace``."""
    pk = parse_uuid(conversation_id, field="conversation_id")
    conversation_table = Conversation._meta.db_table
    workspace_table = Workspace._meta.db_table
    sql = (
        f"SELECT c.last_seq, c.memory_version, w.context_max_tokens, "
        f"({policy_flag_sql('agents_see_reidentified', 'c.workspace_id')}) "
        f'FROM "{conversation_table}" c JOIN "{workspace_table}" w ON w.id = c.workspace_id '
        f"WHERE c.id = %s AND c.workspace_id = %s"
    )
    row = _conversation_row(sql, pk, workspace_id)
    last_seq, memory_version, context_max_tokens, reidentified = row
    return ContextVersions(pk, last_seq, memory_version, context_max_tokens, bool(reidentified))


def conversation_list(
    *, workspace: Workspace, user_id: str | None, limit: int, cursor: str | None
) -> tuple[list[Conversation], str | None]:
    """Most recently updated first, keyset-paged on (updated_at, id)."""
    qs = Conversation.objects.filter(workspace=workspace)
    if user_id:
        qs = qs.filter(user_id=user_id)
    page = keyset_page(qs, keys=("updated_at", "id"), limit=limit, cursor=cursor)
    return page.items, page.next_cursor


def message_counts(*, conversation_ids: list[Any]) -> dict[Any, int]:
    """How many messages each conversation holds now, in one grouped query (the
    (conversation, seq) index answers it); a conversation with none is left out."""
    rows = (
        Message.objects.filter(conversation_id__in=conversation_ids)
        .values("conversation_id")
        .annotate(count=Count("id"))
        .values_list("conversation_id", "count")
    )
    return dict(rows)


@dataclass(frozen=True)
class ConversationSummary:
    """A conversation as its list shows it."""

    conversation: Conversation
    message_count: int
    pii_found: bool  # it holds detected personal data


def conversation_summaries(conversations: Sequence[Conversation]) -> list[ConversationSummary]:
    """Each conversation with its message count and whether it holds personal data: two
    queries, however many conversations."""
    ids = [c.pk for c in conversations]
    flagged = conversations_with_pii(conversation_ids=ids)
    counts = message_counts(conversation_ids=ids)
    return [
        ConversationSummary(c, message_count=counts.get(c.pk, 0), pii_found=c.pk in flagged)
        for c in conversations
    ]


@dataclass(frozen=True)
class ConversationPage:
    conversations: list[ConversationSummary]
    next_cursor: str | None


def conversation_page(
    *, workspace: Workspace, user_id: str | None, limit: int, cursor: str | None
) -> ConversationPage:
    """``conversation_list``'s page, each conversation summarised as its list shows it."""
    conversations, next_cursor = conversation_list(
        workspace=workspace, user_id=user_id, limit=limit, cursor=cursor
    )
    return ConversationPage(conversation_summaries(conversations), next_cursor)


def deleted_source_ids(
    *, conversation: Conversation, observations: Iterable[Observation]
) -> frozenset[str]:
    """The ids among these observations' sources that name no stored message any more:
    retention and erasure delete messages and keep the observations made from them.

    Messages are numbered 1..last_seq without gaps until something deletes one, so a
    conversation that still holds all of them answers with one indexed count."""
    wanted = {str(i) for observation in observations for i in observation.source_message_ids}
    if not wanted:
        return frozenset()
    held = message_counts(conversation_ids=[conversation.pk]).get(conversation.pk, 0)
    if held >= conversation.last_seq:
        return frozenset()
    ids = sorted(wanted)
    stored: set[str] = set()
    for start in range(0, len(ids), SOURCE_LOOKUP_CHUNK):
        chunk = ids[start : start + SOURCE_LOOKUP_CHUNK]
        stored.update(
            str(pk)
            for pk in Message.objects.filter(conversation=conversation, pk__in=chunk).values_list(
                "pk", flat=True
            )
        )
    return frozenset(wanted - stored)


def message_list_newest_first(*, conversation: Conversation, limit: int) -> list[Message]:
    return list(conversation.messages.order_by("-seq")[:limit])


def _merge(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(windows):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def covered_intervals(*, conversation: Conversation) -> list[tuple[int, int]]:
    """The merged seq ranges already observed: every succeeded Observer run's window
    (including messages it found nothing worth noting in) and every observation's own
    window (reflected ones and those people added included).

    Runs are few (one per ~30,000 tokens) and, taking every unobserved message each time,
    cover one contiguous prefix; only observations that reach past that prefix can add
    anything, so only those are read. This runs on every message write.
    """
    from memory.models import ObserverRun

    # The filters exclude NULL windows, which the values_list type cannot know.
    runs = _merge(
        cast(
            list[tuple[int, int]],
            list(
                ObserverRun.objects.filter(
                    conversation=conversation,
                    status=ObserverRun.Status.SUCCEEDED,
                    window_start_seq__isnull=False,
                    window_end_seq__isnull=False,
                ).values_list("window_start_seq", "window_end_seq")
            ),
        )
    )
    prefix_end = runs[0][1] if runs and runs[0][0] == 1 else 0
    observations = Observation.objects.filter(
        conversation=conversation,
        window_start_seq__isnull=False,
        window_end_seq__gt=prefix_end,
    ).values_list("window_start_seq", "window_end_seq")
    return _merge(runs + cast(list[tuple[int, int]], list(observations)))


def _subtract(
    intervals: list[tuple[int, int]], holes: list[tuple[int, int]]
) -> list[tuple[int, int]]:
    """``intervals`` less ``holes`` (both merged and sorted)."""
    left: list[tuple[int, int]] = []
    for start, end in intervals:
        for hole_start, hole_end in holes:
            if hole_end < start or hole_start > end:
                continue
            if hole_start > start:
                left.append((start, hole_start - 1))
            start = hole_end + 1
            if start > end:
                break
        if start <= end:
            left.append((start, end))
    return left


def served_intervals(*, conversation: Conversation) -> list[tuple[int, int]]:
    """The observed seq ranges a context leaves to their observations: ``covered_intervals``
    less the windows of observations waiting for approval or rejected, whose messages
    are served word for word instead (memory/approval/)."""
    covered = covered_intervals(conversation=conversation)
    held = cast(
        list[tuple[int, int]],
        list(
            Observation.objects.filter(
                conversation=conversation,
                status__in=[Observation.Status.WAITING, Observation.Status.REJECTED],
                window_start_seq__isnull=False,
                window_end_seq__isnull=False,
            ).values_list("window_start_seq", "window_end_seq")
        ),
    )
    return _subtract(covered, _merge(held)) if held else covered


def unobserved_messages(
    *, conversation: Conversation, intervals: list[tuple[int, int]] | None = None
) -> QuerySet[Message]:
    if intervals is None:
        intervals = covered_intervals(conversation=conversation)
    qs = conversation.messages.all()
    for start, end in intervals:
        qs = qs.exclude(seq__range=(start, end))
    return qs.order_by("seq")


def unobserved_messages_between(
    *,
    conversation_id: Any,
    intervals: Iterable[tuple[int, int]],
    after_seq: int,
    through_seq: int,
) -> list[Message]:
    """The messages after ``after_seq`` through ``through_seq`` outside the observed
    ``intervals``, by seq: what a kept tail of recent messages lacks (by the
    conversation's id, so that extending it loads no conversation). A read after a write
    starts here; composed by the ORM the statement cost about a third of that read's
    time (bench/request_path.py, "context of a 600-message tail, after a write")."""
    sql, messages = _messages_between(connection.vendor)
    params: list[Any] = [_uuid_param(conversation_id), after_seq, through_seq]
    for start, end in intervals:
        if end > after_seq and start <= through_seq:
            sql += " AND NOT (seq BETWEEN %s AND %s)"
            params += [start, end]
    with connection.cursor() as cursor:
        cursor.execute(f"{sql} ORDER BY seq", params)
        rows = cursor.fetchall()
    return [messages.instance(row) for row in rows]


@functools.cache
def _messages_between(vendor: str) -> tuple[str, _RowReader[Message]]:
    """The statement of ``unobserved_messages_between`` without its observed intervals,
    and how its rows become messages (built once per backend)."""
    messages = _RowReader(Message)
    sql = (
        f"SELECT {', '.join(messages.selected())} "
        f"FROM {connection.ops.quote_name(Message._meta.db_table)} "
        f"WHERE conversation_id = %s AND seq > %s AND seq <= %s"
    )
    return sql, messages


def active_observations(*, conversation: Conversation) -> QuerySet[Observation]:
    return Observation.objects.filter(
        conversation=conversation, status=Observation.Status.ACTIVE
    ).order_by("observed_at", "window_start_seq", "created_at")


def active_reflections(*, conversation: Conversation) -> QuerySet[Reflection]:
    return Reflection.objects.filter(
        conversation=conversation, status=Reflection.Status.ACTIVE
    ).order_by("generation", "created_at")


def stale_reflections(*, conversation: Conversation) -> QuerySet[Reflection]:
    return Reflection.objects.filter(
        conversation=conversation, status=Reflection.Status.STALE
    ).order_by("generation", "created_at")


def rederivable_reflections(*, conversation: Conversation) -> QuerySet[Reflection]:
    """The stale reflections the Reflector makes again from their sources: not those in a
    person's words, which stay stale (their sources served in their place) until a
    person edits or deletes them, nor those whose replacement waits for approval
    (``superseded_by`` set while still stale)."""
    return (
        stale_reflections(conversation=conversation)
        .exclude(PERSONS_WORDS)
        .filter(superseded_by__isnull=True)
    )


def held_for_approval_ids(*, conversation: Conversation) -> set[str]:
    """The observations a reflection waiting for approval, or rejected, cites: the
    Reflector does not condense them again (memory/approval/)."""
    held = Reflection.objects.filter(
        conversation=conversation,
        status__in=[Reflection.Status.WAITING, Reflection.Status.REJECTED],
    )
    return _cited(held.only("source_observation_ids"))


def _cited(reflections: Iterable[Reflection]) -> set[str]:
    return {str(i) for r in reflections for i in r.source_observation_ids}


def stale_source_ids(*, conversation: Conversation) -> set[str]:
    """The observations served in place of stale reflections: every source of a stale
    reflection that no active reflection also cites (what an active one says about it
    is served already). A deleted source is simply not found when they are read."""
    stale = _cited(stale_reflections(conversation=conversation).only("source_observation_ids"))
    if not stale:
        return set()
    return stale - _cited(
        active_reflections(conversation=conversation).only("source_observation_ids")
    )


def served_observations(*, conversation: Conversation) -> QuerySet[Observation]:
    """The observations in the agent's context: the active ones, and the sources of
    stale reflections as they now stand, until the Reflector re-derives them."""
    in_place = stale_source_ids(conversation=conversation)
    served = Q(status=Observation.Status.ACTIVE)
    if in_place:
        served |= Q(pk__in=in_place)
    return Observation.objects.filter(served, conversation=conversation).order_by(
        "observed_at", "window_start_seq", "created_at"
    )


MemoryT = TypeVar("MemoryT", Observation, Reflection)


def _newest(rows: QuerySet[MemoryT], *, limit: int | None) -> list[MemoryT]:
    """The last ``limit`` rows of an ordered queryset (all without one), in its order."""
    if limit is None:
        return list(rows)
    return list(reversed(rows.reverse()[:limit]))


def observation_list(
    *, conversation: Conversation, status: str | None, limit: int | None = None
) -> list[Observation]:
    """Oldest first; with ``limit``, only the newest that many."""
    qs = Observation.objects.filter(conversation=conversation)
    if status:
        if status not in Observation.Status.values:
            raise MemdeskError(
                "invalid_status",
                f"status must be one of {', '.join(Observation.Status.values)}.",
                field="status",
            )
        qs = qs.filter(status=status)
    return _newest(qs.order_by("observed_at", "window_start_seq", "created_at"), limit=limit)


def reflection_list(
    *, conversation: Conversation, status: str | None, limit: int | None = None
) -> list[Reflection]:
    """Oldest generation first; with ``limit``, only the newest that many."""
    qs = Reflection.objects.filter(conversation=conversation)
    if status:
        if status not in Reflection.Status.values:
            raise MemdeskError(
                "invalid_status",
                f"status must be one of {', '.join(Reflection.Status.values)}.",
                field="status",
            )
        qs = qs.filter(status=status)
    return _newest(qs.order_by("generation", "created_at"), limit=limit)


def observation_get(*, conversation: Conversation, observation_id: str) -> Observation:
    pk = parse_uuid(observation_id, field="observation_id")
    try:
        return Observation.objects.select_related("conversation").get(
            pk=pk, conversation=conversation
        )
    except Observation.DoesNotExist:
        raise MemdeskError(
            "not_found", "Observation not found in this conversation.", status_code=404
        ) from None


def reflection_get(*, conversation: Conversation, reflection_id: str) -> Reflection:
    pk = parse_uuid(reflection_id, field="reflection_id")
    try:
        return Reflection.objects.select_related("conversation").get(
            pk=pk, conversation=conversation
        )
    except Reflection.DoesNotExist:
        raise MemdeskError(
            "not_found", "Reflection not found in this conversation.", status_code=404
        ) from None


@dataclass(frozen=True)
class ExtractionStatus:
    messages: list[dict[str, object]]
    summary: dict[str, int]


def extraction_status(*, conversation: Conversation, limit: int) -> ExtractionStatus:
    """Where each message stands with the Observer: ``completed`` once an observation
    covers it; ``processing`` while an open Observer run will cover it (queued: every
    unobserved message; claimed: those of its window); ``failed`` while it is unobserved
    and the latest finished run over it failed (a later run may still pick it up); else
    ``stored``: kept, and waiting until enough accumulates for the Observer's threshold
    or an observe request.

    Only ``processing`` is a state the NAMS clients wait out (their
    ``wait_for_extraction`` polls until no message is pending, queued or processing), so
    a client waits for a run under way, not for a threshold that may be far off."""
    from memory.models import ObserverRun

    intervals = covered_intervals(conversation=conversation)
    runs = ObserverRun.objects.filter(conversation=conversation)
    open_run = runs.filter(status__in=ObserverRun.OPEN_STATUSES).first()
    latest = runs.exclude(status__in=ObserverRun.OPEN_STATUSES).order_by("-created_at").first()
    failed_since = (
        latest.created_at if latest and latest.status == ObserverRun.Status.FAILED else None
    )
    # The seq up to which the open run covers unobserved messages (None: no open run).
    processing_through: int | None = None
    if open_run is not None:
        processing_through = (
            open_run.window_end_seq
            if open_run.window_end_seq is not None
            else conversation.last_seq
        )

    def covered(seq: int) -> bool:
        return any(a <= seq <= b for a, b in intervals)

    unobserved = unobserved_messages(conversation=conversation, intervals=intervals)
    processing_count, rest = 0, unobserved
    if processing_through is not None:
        processing_count = unobserved.filter(seq__lte=processing_through).count()
        rest = unobserved.filter(seq__gt=processing_through)
    failed_count = rest.filter(created_at__lte=failed_since).count() if failed_since else 0
    stored_count = rest.count() - failed_count
    total = conversation.messages.count()
    newest = list(conversation.messages.order_by("-seq").values("id", "seq", "created_at")[:limit])

    def state(row: Mapping[str, Any]) -> str:
        if covered(row["seq"]):
            return "completed"
        if processing_through is not None and row["seq"] <= processing_through:
            return "processing"
        if failed_since and row["created_at"] <= failed_since:
            return "failed"
        return "stored"

    return ExtractionStatus(
        messages=[
            {"messageId": str(row["id"]), "seq": row["seq"], "status": state(row)} for row in newest
        ],
        summary={
            "stored": stored_count,
            "processing": processing_count,
            "completed": total - stored_count - processing_count - failed_count,
            "failed": failed_count,
        },
    )


@dataclass(frozen=True)
class MemoryChange:
    version: int
    text: str
    priority: str
    change: str  # how this version ended: "edit", "revert" or "delete"
    reason: str
    changed_by: str
    changed_at: datetime
    diff: str  # unified diff from this version's text to the next version's


def _history(
    versions: Sequence[ObservationVersion | ReflectionVersion], current: str
) -> list[MemoryChange]:
    import difflib

    if not versions:
        return []
    following = [v.text for v in versions[1:]] + [current]
    return [
        MemoryChange(
            version=v.version,
            text=v.text,
            priority=v.priority,
            change=v.change,
            reason=v.reason,
            changed_by=v.changed_by,
            changed_at=v.changed_at,
            diff="\n".join(
                difflib.unified_diff(
                    v.text.splitlines(),
                    after.splitlines(),
                    f"v{v.version}",
                    f"v{v.version + 1}",
                    lineterm="",
                )
            ),
        )
        for v, after in zip(versions, following, strict=True)
    ]


def observation_history(*, observation: Observation) -> list[MemoryChange]:
    """Every earlier version, oldest first, each with the diff to the version after it."""
    versions = list(ObservationVersion.objects.filter(observation_id=observation.pk))
    return _history(versions, observation.text)


def reflection_history(*, reflection: Reflection) -> list[MemoryChange]:
    """Every earlier version, oldest first, each with the diff to the version after it."""
    versions = list(ReflectionVersion.objects.filter(reflection_id=reflection.pk))
    return _history(versions, reflection.text)


def pin_list(*, conversation: Conversation) -> QuerySet[Pin]:
    """Oldest first: the order they are served in."""
    return Pin.objects.filter(conversation=conversation).order_by("created_at", "id")


def pin_get(*, conversation: Conversation, pin_id: str) -> Pin:
    pk = parse_uuid(pin_id, field="pin_id")
    try:
        return Pin.objects.select_related("conversation").get(pk=pk, conversation=conversation)
    except Pin.DoesNotExist:
        raise MemdeskError(
            "not_found", "Pin not found in this conversation.", status_code=404
        ) from None


# --- escalations ---------------------------------------------------------------------------------


def escalation_list(*, conversation: Conversation) -> QuerySet[Escalation]:
    """Newest first."""
    return Escalation.objects.filter(conversation=conversation).order_by("-created_at", "-id")


def escalation_workspace_list(
    *, workspace: Workspace, status: str | None = Escalation.Status.OPEN
) -> QuerySet[Escalation]:
    """The workspace's escalations (open ones by default), newest first, with their
    conversation."""
    escalations = Escalation.objects.filter(conversation__workspace=workspace)
    if status:
        escalations = escalations.filter(status=status)
    return escalations.select_related("conversation").order_by("-created_at", "-id")


def escalation_get(*, workspace: Workspace, escalation_id: object) -> Escalation:
    pk = parse_uuid(str(escalation_id), field="escalation_id")
    try:
        return Escalation.objects.select_related("conversation").get(
            pk=pk, conversation__workspace=workspace
        )
    except Escalation.DoesNotExist:
        raise MemdeskError(
            "not_found", "No escalation with this id in this workspace.", status_code=404
        ) from None


def reasoning_step_list(*, conversation: Conversation) -> QuerySet[ReasoningStep]:
    """The conversation's reasoning steps, oldest first."""
    return ReasoningStep.objects.filter(conversation=conversation).order_by("step_number", "id")


def tool_call_list(*, conversation: Conversation) -> QuerySet[ToolCall]:
    """The conversation's tool calls, oldest first."""
    return ToolCall.objects.filter(conversation=conversation).order_by(
        "after_seq", "created_at", "id"
    )
