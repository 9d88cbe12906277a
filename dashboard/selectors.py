"""Reads for the dashboard. Every function takes the workspace (or an object already
scoped to one); nothing here decides who may read it (that is ``dashboard.access``)."""

from __future__ import annotations

import contextlib
import itertools
import json
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import (
    Avg,
    Count,
    Exists,
    F,
    FloatField,
    IntegerField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Greatest, NullIf, TruncDate
from django.utils import timezone

from core.paging import is_ascii_digits
from dashboard.models import Membership, Role
from governance.gates import (
    reasoning_masked_for_display,
    reidentifier_for_api,
    reidentifier_for_measurement,
)
from governance.models import AuditEvent, LegalHold, MessageScan, RedactionFinding
from governance.pseudonyms import LABEL
from governance.scan import MASKED_STATUSES, content_digest
from memory.context import ContextBudget, Reidentifies, context_budget, context_for_conversation
from memory.metrics import SERIES_DAYS, pipeline_metrics, served_token_count
from memory.models import (
    ApiKey,
    Conversation,
    MemorySource,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    ReasoningStep,
    Reflection,
    ReflectorRun,
    ToolCall,
    Workspace,
)
from memory.recall import Recall, recall_for_conversation
from memory.selectors import covered_intervals, unobserved_messages

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations

MESSAGE_PAGE = 50
OBSERVATION_PAGE = 50
REFLECTION_LIMIT = 100
# Messages shown above the first source message when the list jumps to an observation,
# so the reader sees what led up to it.
JUMP_CONTEXT = 3


# --- workspaces and roles --------------------------------------------------------------------


def workspaces_for_user(user: User) -> list[tuple[Workspace, str]]:
    """The workspaces a user may open, with their role in each, by name."""
    if getattr(user, "is_superuser", False):
        return [(workspace, Role.ADMIN) for workspace in Workspace.objects.order_by("name")]
    memberships = Membership.objects.filter(user=user).select_related("workspace")
    return sorted(((m.workspace, m.role) for m in memberships), key=lambda pair: pair[0].name)


def user_labels(labels: set[str]) -> dict[str, str]:
    """Audit labels ("user:12") to usernames, for history pages; others stay as they are."""
    ids = {label.split(":", 1)[1] for label in labels if label.startswith("user:")}
    numeric = [int(i) for i in ids if is_ascii_digits(i)]
    names = dict(get_user_model().objects.filter(pk__in=numeric).values_list("pk", "username"))
    return {
        label: names.get(int(label[5:]), label)
        if label.startswith("user:") and is_ascii_digits(label[5:])
        else label
        for label in labels
    }


# --- conversations with their per-tier figures -------------------------------------------------


def _sum_of(queryset: QuerySet[Any], column: str) -> Coalesce:
    return Coalesce(
        Subquery(
            queryset.order_by()
            .values("conversation_id")
            .annotate(total=Sum(column))
            .values("total")[:1],
            output_field=IntegerField(),
        ),
        Value(0),
    )


def _count_of(queryset: QuerySet[Any]) -> Coalesce:
    return Coalesce(
        Subquery(
            queryset.order_by()
            .values("conversation_id")
            .annotate(total=Count("pk"))
            .values("total")[:1],
            output_field=IntegerField(),
        ),
        Value(0),
    )


def _latest_status(model: type[ObserverRun] | type[ReflectorRun]) -> Subquery:
    return Subquery(
        model.objects.filter(conversation=OuterRef("pk"))
        .order_by("-created_at")
        .values("status")[:1]
    )


def _last_activity() -> Coalesce:
    # The newest message's own time (an imported conversation keeps its timestamps), not
    # when the row last changed: a correction or a run is not activity of the end user.
    newest = Message.objects.filter(conversation=OuterRef("pk")).order_by("-seq")
    return Coalesce(Subquery(newest.values("created_at")[:1]), F("created_at"))


class ConversationFlags(TypedDict):
    last_activity: datetime
    pii_found: bool
    on_hold: bool
    weakly_grounded: bool


def _flags(
    queryset: QuerySet[Conversation],
) -> QuerySet[WithAnnotations[Conversation, ConversationFlags]]:
    holds = LegalHold.objects.filter(released_at__isnull=True).filter(
        Q(conversation=OuterRef("pk"))
        | Q(
            conversation__isnull=True,
            workspace=OuterRef("workspace"),
            end_user_id=OuterRef("user_id"),
        )
    )
    findings = RedactionFinding.objects.filter(conversation=OuterRef("pk")).exclude(
        status=RedactionFinding.Status.DISMISSED
    )
    threshold = settings.MEMDESK_GROUNDING_THRESHOLD
    weak_observations = Observation.objects.filter(
        conversation=OuterRef("pk"), status=Observation.Status.ACTIVE, grounding__lt=threshold
    )
    weak_reflections = Reflection.objects.filter(
        conversation=OuterRef("pk"), status=Reflection.Status.ACTIVE, grounding__lt=threshold
    )
    return queryset.annotate(
        last_activity=_last_activity(),
        pii_found=Exists(findings),
        on_hold=Exists(holds),
        weakly_grounded=Exists(weak_observations) | Exists(weak_reflections),
    )


def with_tier_stats(
    queryset: QuerySet[Conversation],
) -> QuerySet[WithAnnotations[Conversation, ConversationFlags]]:
    """Annotate each conversation with counts and tokens per tier and the flags the list
    filters on. Correlated subqueries, one row each: the database computes them for the
    rows it returns, so a page of 25 costs one query whatever the sizes. Served tokens
    and compression are derived in Python (``add_figures``): in SQL each reference would
    repeat the message subquery."""
    messages = Message.objects.filter(conversation=OuterRef("pk"))
    active_observations = Observation.objects.filter(
        conversation=OuterRef("pk"), status=Observation.Status.ACTIVE
    )
    active_reflections = Reflection.objects.filter(
        conversation=OuterRef("pk"), status=Reflection.Status.ACTIVE
    )
    observed_runs = ObserverRun.objects.filter(
        conversation=OuterRef("pk"), status=PipelineRun.Status.SUCCEEDED
    )
    reflected_observations = Observation.objects.filter(
        conversation=OuterRef("pk"), status=Observation.Status.REFLECTED
    )
    pins = Pin.objects.filter(conversation=OuterRef("pk"))
    return _flags(queryset).annotate(
        message_count=_count_of(messages),
        reflected_count=_count_of(reflected_observations),
        message_tokens=_sum_of(messages, "token_count"),
        pin_count=_count_of(pins),
        pin_tokens=_sum_of(pins, "token_count"),
        observation_count=_count_of(active_observations),
        observation_tokens=_sum_of(active_observations, "token_count"),
        reflection_count=_count_of(active_reflections),
        reflection_tokens=_sum_of(active_reflections, "token_count"),
        observed_tokens=_sum_of(observed_runs, "tokens_in"),
        latest_observer_status=_latest_status(ObserverRun),
        latest_reflector_status=_latest_status(ReflectorRun),
    )


def _with_compression(
    queryset: QuerySet[WithAnnotations[Conversation, ConversationFlags]],
) -> QuerySet[WithAnnotations[Conversation, ConversationFlags]]:
    # Only to sort by it: memory.metrics.served_token_count in SQL (pins, active
    # reflections and observations, messages no Observer run has read yet).
    served = (
        F("pin_tokens")
        + F("reflection_tokens")
        + F("observation_tokens")
        + Greatest(F("message_tokens") - F("observed_tokens"), Value(0))
    )
    return queryset.annotate(
        compression_sort=Cast(F("message_tokens"), FloatField())
        / NullIf(Cast(served, FloatField()), Value(0.0))
    )


@dataclass(frozen=True)
class TierStats:
    """Counts and tokens per tier of one conversation (active memory only)."""

    message_count: int
    message_tokens: int
    observation_count: int
    observation_tokens: int
    reflection_count: int
    reflection_tokens: int
    pin_count: int
    pin_tokens: int
    observed_tokens: int  # what succeeded Observer runs read

    @property
    def served_tokens(self) -> int:
        """What the agent is served, counted as ``/v1/metrics`` counts it."""
        return served_token_count(
            pin_tokens=self.pin_tokens,
            reflection_tokens=self.reflection_tokens,
            observation_tokens=self.observation_tokens,
            message_tokens=self.message_tokens,
            observed_tokens=self.observed_tokens,
        )

    @property
    def compression(self) -> float | None:
        served = self.served_tokens
        return self.message_tokens / served if served else None


def add_figures(conversations: list[Conversation]) -> None:
    """Give conversations annotated by ``with_tier_stats`` their ``stats``."""
    for conversation in conversations:
        conversation.stats = TierStats(  # type: ignore[attr-defined]  # for the template
            message_count=conversation.message_count,  # type: ignore[attr-defined]  # with_tier_stats annotation
            message_tokens=conversation.message_tokens,  # type: ignore[attr-defined]  # with_tier_stats annotation
            observation_count=conversation.observation_count,  # type: ignore[attr-defined]  # with_tier_stats annotation
            observation_tokens=conversation.observation_tokens,  # type: ignore[attr-defined]  # with_tier_stats annotation
            reflection_count=conversation.reflection_count,  # type: ignore[attr-defined]  # with_tier_stats annotation
            reflection_tokens=conversation.reflection_tokens,  # type: ignore[attr-defined]  # with_tier_stats annotation
            pin_count=conversation.pin_count,  # type: ignore[attr-defined]  # with_tier_stats annotation
            pin_tokens=conversation.pin_tokens,  # type: ignore[attr-defined]  # with_tier_stats annotation
            observed_tokens=conversation.observed_tokens,  # type: ignore[attr-defined]  # with_tier_stats annotation
        )


def tier_stats(*, conversation: Conversation) -> TierStats:
    """One conversation's figures: five aggregates, each a single indexed scan (a
    10,000-message conversation's page spent 20-40 ms on the subquery form)."""
    messages = Message.objects.filter(conversation=conversation).aggregate(
        n=Count("pk"), tokens=Sum("token_count")
    )
    observations = Observation.objects.filter(
        conversation=conversation, status=Observation.Status.ACTIVE
    ).aggregate(n=Count("pk"), tokens=Sum("token_count"))
    reflections = Reflection.objects.filter(
        conversation=conversation, status=Reflection.Status.ACTIVE
    ).aggregate(n=Count("pk"), tokens=Sum("token_count"))
    observed = ObserverRun.objects.filter(
        conversation=conversation, status=PipelineRun.Status.SUCCEEDED
    ).aggregate(tokens=Sum("tokens_in"))
    pins = Pin.objects.filter(conversation=conversation).aggregate(
        n=Count("pk"), tokens=Sum("token_count")
    )
    return TierStats(
        message_count=messages["n"],
        message_tokens=messages["tokens"] or 0,
        observation_count=observations["n"],
        observation_tokens=observations["tokens"] or 0,
        reflection_count=reflections["n"],
        reflection_tokens=reflections["tokens"] or 0,
        pin_count=pins["n"],
        pin_tokens=pins["tokens"] or 0,
        observed_tokens=observed["tokens"] or 0,
    )


SORTS: dict[str, tuple[str, Any]] = {
    "-updated": ("Last activity, newest first", F("last_activity").desc()),
    "updated": ("Last activity, oldest first", F("last_activity").asc()),
    "-created": ("Started, newest first", F("created_at").desc()),
    "created": ("Started, oldest first", F("created_at").asc()),
    "-messages": ("Most messages", F("message_count").desc()),
    "-tokens": ("Most message tokens", F("message_tokens").desc()),
    "-compression": ("Highest compression", F("compression_sort").desc(nulls_last=True)),
    "compression": ("Lowest compression", F("compression_sort").asc(nulls_last=True)),
    "user": ("End user, A to Z", F("user_id").asc()),
}
DEFAULT_SORT = "-updated"


@dataclass(frozen=True)
class ConversationFilters:
    query: str = ""
    end_user: str = ""
    active_from: date | None = None
    active_to: date | None = None
    pii_found: bool = False
    on_hold: bool = False
    weakly_grounded: bool = False
    pipeline_failed: bool = False
    pipeline_retrying: bool = False
    sort: str = DEFAULT_SORT


def conversation_search(
    *, workspace: Workspace, filters: ConversationFilters
) -> QuerySet[Conversation]:
    qs = with_tier_stats(Conversation.objects.filter(workspace=workspace))
    if filters.query:
        text = filters.query
        mentions = Message.objects.filter(conversation=OuterRef("pk"), content__icontains=text)
        match = Q(title__icontains=text) | Q(user_id__icontains=text) | Q(Exists(mentions))
        with contextlib.suppress(ValueError):  # not an id: search the text only
            match |= Q(pk=uuid.UUID(text))
        qs = qs.filter(match)
    if filters.end_user:
        qs = qs.filter(user_id=filters.end_user)
    if filters.active_from:
        # (a dict: django-stubs types a __date lookup on an annotation as a datetime)
        qs = qs.filter(**{"last_activity__date__gte": filters.active_from})
    if filters.active_to:
        qs = qs.filter(**{"last_activity__date__lte": filters.active_to})
    if filters.pii_found:
        qs = qs.filter(pii_found=True)
    if filters.on_hold:
        qs = qs.filter(on_hold=True)
    if filters.weakly_grounded:
        qs = qs.filter(weakly_grounded=True)
    # Both filters on: a conversation whose latest run failed or is retrying.
    attention = [
        status
        for status, wanted in (
            (PipelineRun.Status.FAILED, filters.pipeline_failed),
            (PipelineRun.Status.RETRYING, filters.pipeline_retrying),
        )
        if wanted
    ]
    if attention:
        qs = qs.filter(
            Q(latest_observer_status__in=attention) | Q(latest_reflector_status__in=attention)
        )
    if filters.sort.lstrip("-") == "compression":
        qs = _with_compression(qs)
    order = SORTS.get(filters.sort, SORTS[DEFAULT_SORT])[1]
    return qs.order_by(order, F("id").desc())


def end_users(*, workspace: Workspace, limit: int = 500) -> list[str]:
    """End-user ids for the filter's suggestions."""
    return list(
        Conversation.objects.filter(workspace=workspace)
        .exclude(user_id="")
        .order_by("user_id")
        .values_list("user_id", flat=True)
        .distinct()[:limit]
    )


def conversation_with_flags(
    *, workspace_ids: list[uuid.UUID], conversation_id: uuid.UUID
) -> Conversation | None:
    """One conversation of the given workspaces, with ``pii_found`` and ``on_hold``."""
    return (
        _flags(Conversation.objects.filter(pk=conversation_id, workspace_id__in=workspace_ids))
        .select_related("workspace")
        .first()
    )


def conversation_in(
    *, workspace_ids: list[uuid.UUID], conversation_id: uuid.UUID
) -> Conversation | None:
    return (
        Conversation.objects.filter(pk=conversation_id, workspace_id__in=workspace_ids)
        .select_related("workspace")
        .first()
    )


# --- the conversation page ---------------------------------------------------------------------


@dataclass
class MessageWindow:
    """A contiguous run of messages, oldest first, and whether there are more either side."""

    messages: list[Message]
    has_older: bool
    has_newer: bool
    highlighted: set[str] = field(default_factory=set)
    # Reasoning steps and tool calls after the conversation's last message
    # (``attach_reasoning``).
    reasoning_tail: list[ReasoningItem] = field(default_factory=list)

    @property
    def first_seq(self) -> int | None:
        return self.messages[0].seq if self.messages else None

    @property
    def last_seq(self) -> int | None:
        return self.messages[-1].seq if self.messages else None

    @property
    def older_at(self) -> int:
        """Where a whole page of the messages before this window starts (for no-JS links)."""
        return max((self.first_seq or 1) - MESSAGE_PAGE, 1)


@dataclass(frozen=True)
class ReasoningItem:
    """A reasoning step or a tool call as the messages column shows it, its texts masked
    (``reasoning_masked_for_display``)."""

    kind: str  # "step" or "tool_call"
    id: uuid.UUID
    created_at: datetime
    after_seq: int
    title: str  # "Step 3" or the tool's name
    status: str  # a tool call's status; "" for a step
    duration_ms: int | None
    fields: list[tuple[str, str]]  # (label, masked text), empty texts left out


def _reasoning_items(
    conversation: Conversation, steps: Sequence[ReasoningStep], calls: Sequence[ToolCall]
) -> list[ReasoningItem]:
    texts: list[str] = []
    for step in steps:
        texts += [step.reasoning, step.action_taken, step.result]
    for call in calls:
        texts += [call.input, call.output, call.error]
    masked = iter(reasoning_masked_for_display(workspace_id=conversation.workspace_id, texts=texts))

    def labelled(*labels: str) -> list[tuple[str, str]]:
        texts = [(label, next(masked)) for label in labels]
        return [(label, text) for label, text in texts if text.strip()]

    items = [
        ReasoningItem(
            kind="step",
            id=step.pk,
            created_at=step.created_at,
            after_seq=step.after_seq,
            title=f"Step {step.step_number}",
            status="",
            duration_ms=None,
            fields=labelled("Thought", "Action", "Result"),
        )
        for step in steps
    ]
    items += [
        ReasoningItem(
            kind="tool_call",
            id=call.pk,
            created_at=call.created_at,
            after_seq=call.after_seq,
            title=call.tool_name,
            status=call.status,
            duration_ms=call.duration_ms,
            fields=labelled("Input", "Output", "Error"),
        )
        for call in calls
    ]
    return sorted(items, key=lambda item: (item.after_seq, item.created_at, item.kind))


def attach_reasoning(*, conversation: Conversation, window: MessageWindow) -> None:
    """Place the conversation's reasoning steps and tool calls among the window's
    messages, in time order: each before the first message after it
    (``message.reasoning_before``), and those after the conversation's last message at
    the end (``window.reasoning_tail``) when the window reaches it. A window shows the
    items from the message before it up to its last message, so the windows a page
    loads one after another show each item once."""
    window.reasoning_tail = []
    messages = window.messages
    before = 0
    bounds = Q()
    if messages:
        # The message before the window is seq - 1, without a query: seq numbers are
        # consecutive, but for the oldest messages retention deleted, and it deletes
        # the reasoning recorded before them with them (it is older still).
        before = messages[0].seq - 1
        bounds &= Q(after_seq__gte=before)
        if messages[-1].seq < conversation.last_seq:
            bounds &= Q(after_seq__lt=messages[-1].seq)
    steps = list(ReasoningStep.objects.filter(bounds, conversation=conversation))
    calls = list(ToolCall.objects.filter(bounds, conversation=conversation))
    if not steps and not calls:
        return
    items = _reasoning_items(conversation, steps, calls)
    for message in messages:
        message.reasoning_before = [  # type: ignore[attr-defined]  # for the template
            item for item in items if item.after_seq < message.seq and item.after_seq >= before
        ]
        before = message.seq
    last = messages[-1].seq if messages else -1
    window.reasoning_tail = [item for item in items if item.after_seq >= last]


def _messages(conversation: Conversation) -> QuerySet[Message]:
    # Metadata is not shown; leaving it out keeps a page of tool calls light.
    return Message.objects.filter(conversation=conversation).defer("metadata")


def message_window(
    *,
    conversation: Conversation,
    before: int | None = None,
    after: int | None = None,
    at: int | None = None,
    limit: int = MESSAGE_PAGE,
) -> MessageWindow:
    """The newest ``limit`` messages; or the ``limit`` before seq ``before`` / after seq
    ``after`` (to extend a list already shown); or ``limit`` starting a few messages
    before seq ``at`` (to jump to an observation's sources)."""
    qs = _messages(conversation)
    if at is not None:
        start = max(at - JUMP_CONTEXT, 0)
        page = list(qs.filter(seq__gte=start).order_by("seq")[: limit + 1])
        has_older = bool(page) and qs.filter(seq__lt=page[0].seq).exists()
        return MessageWindow(page[:limit], has_older=has_older, has_newer=len(page) > limit)
    if after is not None:
        page = list(qs.filter(seq__gt=after).order_by("seq")[: limit + 1])
        return MessageWindow(page[:limit], has_older=False, has_newer=len(page) > limit)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    newest_first = list(qs.order_by("-seq")[: limit + 1])
    return MessageWindow(
        newest_first[:limit][::-1], has_older=len(newest_first) > limit, has_newer=False
    )


@dataclass
class ObservationPage:
    observations: list[Observation]
    offset: int  # how many newer observations come after this page
    has_older: bool
    reflection: Reflection | None = None  # set when the page is one reflection's sources
    highlighted: set[str] = field(default_factory=set)

    @property
    def older_offset(self) -> int:
        return self.offset + len(self.observations)


def _with_sources_stored(observations: QuerySet[Observation]) -> QuerySet[Observation]:
    """``sources_stored``: whether any message of the observation's window is still kept;
    retention and erasure delete messages and leave the observations made from them."""
    stored = Message.objects.filter(
        conversation_id=OuterRef("conversation_id"),
        seq__gte=OuterRef("window_start_seq"),
        seq__lte=OuterRef("window_end_seq"),
    )
    return observations.annotate(sources_stored=Exists(stored))


def observation_page(
    *,
    conversation: Conversation,
    offset: int = 0,
    limit: int = OBSERVATION_PAGE,
    priority: str = "",
) -> ObservationPage:
    """Every observation (active and reflected), or those of one ``priority``, newest
    ``limit`` first skipped by ``offset``, returned oldest first to read like the
    messages beside them."""
    observations = Observation.objects.filter(conversation=conversation)
    if priority:
        observations = observations.filter(priority=priority)
    newest_first = list(
        _with_sources_stored(observations).order_by(
            F("observed_at").desc(),
            F("window_start_seq").desc(nulls_last=True),
            F("created_at").desc(),
            F("id").desc(),
        )[offset : offset + limit + 1]
    )
    return ObservationPage(
        newest_first[:limit][::-1], offset=offset, has_older=len(newest_first) > limit
    )


def reflection_sources(*, conversation: Conversation, reflection: Reflection) -> ObservationPage:
    """The observations a reflection was made from, for "highlight its observations"."""
    ids = [str(i) for i in reflection.source_observation_ids]
    observations = list(
        _with_sources_stored(
            Observation.objects.filter(conversation=conversation, pk__in=ids)
        ).order_by("observed_at", "window_start_seq", "created_at", "id")
    )
    return ObservationPage(
        observations,
        offset=0,
        has_older=False,
        reflection=reflection,
        highlighted={str(o.pk) for o in observations},
    )


def observation_counts(*, conversation: Conversation) -> dict[str, int]:
    """How many observations are active (served) and reflected (condensed into a
    reflection), and how many of each priority, for the column's heading and filter."""
    counts: dict[str, int] = defaultdict(int)
    rows = (
        Observation.objects.filter(conversation=conversation)
        .order_by()
        .values_list("status", "priority")
        .annotate(n=Count("pk"))
    )
    for status, priority, n in rows:
        counts[status] += n
        counts[priority] += n
    return counts


def unobserved_ids(*, conversation: Conversation) -> set[uuid.UUID]:
    """The messages no Observer run or observation covers yet (served verbatim)."""
    return set(unobserved_messages(conversation=conversation).values_list("pk", flat=True))


def mark_unobserved(*, conversation: Conversation, messages: Sequence[Message]) -> None:
    """Flag ``unobserved`` on messages no observation covers yet, for the template."""
    intervals = covered_intervals(conversation=conversation)
    for message in messages:
        message.unobserved = not any(  # type: ignore[attr-defined]  # for the template
            start <= message.seq <= end for start, end in intervals
        )


def manual_authors(*, workspace: Workspace, observations: Sequence[Observation]) -> None:
    """Give each observation a person wrote ``author``: the username the audit trail
    records for its creation (the observation itself stores only that a person did)."""
    manual = {str(o.pk) for o in observations if o.source == MemorySource.MANUAL}
    authors: dict[str, str] = {}
    if manual:
        rows = AuditEvent.objects.filter(
            workspace=workspace,
            action="observation.create",
            target_type="observation",
            target_id__in=manual,
        ).values_list("target_id", "actor_type", "actor_id")
        labels = {target: f"{actor_type}:{actor_id}" for target, actor_type, actor_id in rows}
        names = user_labels(set(labels.values()))
        authors = {target: names[label] for target, label in labels.items()}
    for observation in observations:
        observation.author = authors.get(str(observation.pk), "")  # type: ignore[attr-defined]  # for the template


def reflection_list(
    *, conversation: Conversation, limit: int = REFLECTION_LIMIT
) -> list[Reflection]:
    newest_first = Reflection.objects.filter(conversation=conversation).order_by(
        "-generation", "-created_at", "-id"
    )[:limit]
    return list(newest_first)[::-1]


def reflection_in(*, conversation: Conversation, reflection_id: uuid.UUID) -> Reflection | None:
    return (
        Reflection.objects.filter(conversation=conversation, pk=reflection_id)
        .select_related("conversation")
        .first()
    )


def observation_in(*, conversation: Conversation, observation_id: uuid.UUID) -> Observation | None:
    return (
        Observation.objects.filter(conversation=conversation, pk=observation_id)
        .select_related("conversation")
        .first()
    )


def pin_list(*, conversation: Conversation) -> list[Pin]:
    """Oldest first, as served; each with ``message_seq`` for its link to the message."""
    return list(
        Pin.objects.filter(conversation=conversation)
        .annotate(message_seq=F("message__seq"))
        .order_by("created_at", "id")
    )


def pin_in(*, conversation: Conversation, pin_id: uuid.UUID) -> Pin | None:
    return (
        Pin.objects.filter(conversation=conversation, pk=pin_id)
        .annotate(message_seq=F("message__seq"))
        .select_related("conversation")
        .first()
    )


@dataclass(frozen=True)
class LatestRuns:
    observer: ObserverRun | None
    reflector: ReflectorRun | None


def latest_runs(*, conversation: Conversation) -> LatestRuns:
    return LatestRuns(
        observer=ObserverRun.objects.filter(conversation=conversation)
        .order_by("-created_at")
        .first(),
        reflector=ReflectorRun.objects.filter(conversation=conversation)
        .order_by("-created_at")
        .first(),
    )


def run_in(
    *, conversation: Conversation, kind: str, run_id: uuid.UUID
) -> ObserverRun | ReflectorRun | None:
    model = ObserverRun if kind == "observer" else ReflectorRun
    return model.objects.filter(conversation=conversation, pk=run_id).first()


# --- personal data in messages, masked --------------------------------------------------------


@dataclass(frozen=True)
class TextPart:
    """A stretch of a message as a page shows it: plain text, or the value of one or
    more overlapping findings (``entity_type`` set), masked unless revealed."""

    text: str
    entity_type: str = ""
    finding_ids: str = ""  # comma-separated: what the part's reveal button asks for
    revealed: bool = False

    @property
    def masked(self) -> bool:
        return bool(self.entity_type) and not self.revealed

    @property
    def label(self) -> str:
        # The type of value, not a part of it: the last digits of a card number or the
        # domain of an address still say whose they are.
        return f"<{self.entity_type}>"


Span = tuple[int, int, str, int]  # start, end, entity type, finding id


def mask_parts(text: str, spans: Sequence[Span], revealed: Collection[int] = ()) -> list[TextPart]:
    """``text`` split around ``spans``; overlapping spans are one part covering all of
    them (shown only when every one of them is revealed). Spans outside the text are
    ignored."""
    inside = sorted(
        (span for span in spans if 0 <= span[0] < span[1] <= len(text)),
        key=lambda span: (span[0], -span[1]),
    )
    groups: list[list[Span]] = []
    for span in inside:
        if groups and span[0] < max(member[1] for member in groups[-1]):
            groups[-1].append(span)
        else:
            groups.append([span])
    parts: list[TextPart] = []
    cursor = 0
    for group in groups:
        start, end = group[0][0], max(member[1] for member in group)
        if start > cursor:
            parts.append(TextPart(text[cursor:start]))
        ids = [member[3] for member in group]
        parts.append(
            TextPart(
                text[start:end],
                entity_type="/".join(dict.fromkeys(member[2] for member in group)),
                finding_ids=",".join(str(i) for i in ids),
                revealed=all(i in revealed for i in ids),
            )
        )
        cursor = end
    if cursor < len(text) or not parts:
        parts.append(TextPart(text[cursor:]))
    return parts


def masked_text(parts: Sequence[TextPart]) -> str:
    return "".join(part.label if part.masked else part.text for part in parts)


def _masked_spans(message_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[Span]]:
    """The findings whose values are still in these messages' texts, by message."""
    spans: dict[uuid.UUID, list[Span]] = defaultdict(list)
    rows = (
        RedactionFinding.objects.filter(
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id__in=message_ids,
            status__in=MASKED_STATUSES,
        )
        .exclude(operator="keep")
        .values_list("target_id", "start", "end", "entity_type", "pk")
    )
    for message_id, start, end, entity_type, pk in rows:
        spans[message_id].append((start, end, entity_type, pk))
    return spans


def _scanned_digests(message_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, str]:
    return dict(
        MessageScan.objects.filter(message_id__in=message_ids).values_list(
            "message_id", "content_digest"
        )
    )


def mask_messages(*, messages: Sequence[Message], revealed: Collection[int] = ()) -> None:
    """Give each message what the page shows of it: ``parts`` (its text split around
    the values of its findings, masked unless their id is in ``revealed``),
    ``masked_text`` (the text with each value as ``<ENTITY_TYPE>``) and ``scan_pending``
    (no scan has read its current content yet, so nothing in it is masked). Two queries
    for the whole list."""
    ids = [m.pk for m in messages]
    spans = _masked_spans(ids)
    digests = _scanned_digests(ids)
    for message in messages:
        parts = mask_parts(message.content, spans.get(message.pk, []), revealed)
        message.parts = parts  # type: ignore[attr-defined]  # for the template
        message.masked_text = masked_text(parts)  # type: ignore[attr-defined]  # for the template
        message.has_masked = any(part.masked for part in parts)  # type: ignore[attr-defined]  # for the template
        message.scan_pending = digests.get(message.pk) != content_digest(message.content)  # type: ignore[attr-defined]  # for the template


def mask_pins(*, pins: Sequence[Pin]) -> None:
    """Give each pin ``parts`` and ``masked_text`` as ``mask_messages`` does, from its
    message's findings. A quote that is not the stretch of its message it says it is
    (it should always be) is masked whole."""
    spans = _masked_spans({pin.message_id for pin in pins})
    contents = dict(
        Message.objects.filter(pk__in={pin.message_id for pin in pins}).values_list("pk", "content")
    )
    for pin in pins:
        content = contents.get(pin.message_id, "")
        start = 0 if pin.start is None else pin.start
        end = len(content) if pin.end is None else pin.end
        if content[start:end] == pin.text:
            inside = [
                (max(s, start) - start, min(e, end) - start, entity, pk)
                for s, e, entity, pk in spans.get(pin.message_id, [])
                if s < end and start < e
            ]
            parts = mask_parts(pin.text, inside)
        else:
            parts = [TextPart(pin.text, entity_type="QUOTE", finding_ids="")]
        pin.parts = parts  # type: ignore[attr-defined]  # for the template
        pin.masked_text = masked_text(parts)  # type: ignore[attr-defined]  # for the template


TranscriptRow = tuple[int, str, datetime, str, str, bool]


def transcript_rows(
    *, conversation: Conversation, chunk_size: int = 2000
) -> Iterator[TranscriptRow]:
    """Every message as plain tuples, oldest first, its content masked as
    ``mask_messages`` masks it, with ``scan_pending`` last. Streamed from the database
    in chunks (a server-side cursor on PostgreSQL), each chunk's findings read in one
    query: the urgent-review path never builds models."""
    rows = (
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("pk", "seq", "role", "created_at", "tool_name", "content")
        .iterator(chunk_size=chunk_size)
    )
    while chunk := list(itertools.islice(rows, chunk_size)):
        ids = [row[0] for row in chunk]
        spans = _masked_spans(ids)
        digests = _scanned_digests(ids)
        for pk, seq, role, created_at, tool_name, content in chunk:
            text = masked_text(mask_parts(content, spans.get(pk, [])))
            pending = digests.get(pk) != content_digest(content)
            yield seq, role, created_at, tool_name, text, pending


# --- what the agent is served ------------------------------------------------------------------


class _RecordingReidentifier:
    """Wraps the API's reidentifier and remembers which value replaced which pseudonym,
    so a page can put the pseudonyms back: people see memory as the conversation page
    shows it, not with the values only agents are given."""

    def __init__(self, inner: Reidentifies) -> None:
        self.inner = inner
        self.cache_key = inner.cache_key
        self.values: dict[str, str] = {}

    def prepare(self, texts: Iterable[str]) -> None:
        self.inner.prepare(texts)

    def text(self, text: str) -> str:
        after = self.inner.text(text)
        if after != text:
            for match in LABEL.finditer(text):
                value = self.inner.text(match.group(0))
                if value != match.group(0):
                    self.values[value] = match.group(0)
        return after


@dataclass(frozen=True)
class ServedContext:
    """The context ``GET /v1/conversations/{id}/context`` returns, as text and as chat
    messages, with the values a person may not read here masked (``masked_values``)."""

    text: str
    chat: list[dict[str, Any]]
    budget: ContextBudget
    masked_values: int
    reidentified: bool


def _mask_values(text: str, replacements: list[tuple[str, str]]) -> str:
    for value, label in replacements:
        text = text.replace(value, label)
    return text


def served_context(*, conversation: Conversation, max_tokens: int | None) -> ServedContext:
    """Exactly what the agent API serves for this conversation (the same selector, the
    same reidentifier choice, the same budget), then masked as the conversation page
    masks: the values the scan found in messages (for every role), and the values a
    re-identifying workspace gives agents back as their pseudonyms."""
    reidentifier = reidentifier_for_api(workspace_id=conversation.workspace_id)
    recorder = _RecordingReidentifier(reidentifier) if reidentifier is not None else None
    budget = context_budget(conversation=conversation, max_tokens=max_tokens, reidentifier=recorder)
    text = context_for_conversation(
        conversation=conversation, fmt="text", max_tokens=max_tokens, reidentifier=reidentifier
    ).body.decode()
    chat = json.loads(
        context_for_conversation(
            conversation=conversation,
            fmt="messages",
            max_tokens=max_tokens,
            reidentifier=reidentifier,
        ).body
    )["messages"]
    pin_message_ids = set(
        Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True)
    )
    message_ids = {*budget.recent_message_ids, *pin_message_ids}
    contents = dict(Message.objects.filter(pk__in=message_ids).values_list("pk", "content"))
    found: dict[str, str] = {}
    for message_id, spans in _masked_spans(message_ids).items():
        content = contents.get(message_id, "")
        for start, end, entity_type, _ in spans:
            if content[start:end].strip():
                found[content[start:end]] = f"<{entity_type}>"
    if recorder is not None:
        found.update({value: label for value, label in recorder.values.items() if value})
    # Longest first: a value inside another is not masked half.
    replacements = sorted(found.items(), key=lambda pair: -len(pair[0]))
    for turn in chat:
        if isinstance(turn.get("content"), str):
            turn["content"] = _mask_values(turn["content"], replacements)
    return ServedContext(
        text=_mask_values(text, replacements),
        chat=chat,
        budget=budget,
        masked_values=len(replacements),
        reidentified=reidentifier is not None,
    )


# --- search across conversations ----------------------------------------------------------------

SEARCH_KINDS = {
    "messages": "Messages",
    "observations": "Observations",
    "reflections": "Reflections",
}
# Messages are matched on what a person sees of them (masked): the database finds these
# many candidates by their stored text, the masked text decides.
SEARCH_MESSAGE_CANDIDATES = 500
SNIPPET_CONTEXT = 90


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "message", "observation", "reflection"
    conversation: Conversation
    item_id: uuid.UUID
    anchor: str  # the item's element id on the conversation page
    query: str  # what the conversation page needs to show the item ("at=12")
    before: str
    match: str
    after: str
    when: datetime
    seq: int | None = None
    role: str = ""
    priority: str = ""
    status: str = ""


def _snippet(text: str, query: str) -> tuple[str, str, str]:
    at = text.lower().find(query.lower())
    if at < 0:
        return text[: SNIPPET_CONTEXT * 2], "", ""
    start = max(at - SNIPPET_CONTEXT, 0)
    end = at + len(query)
    before = ("…" if start else "") + text[start:at]
    after = text[end : end + SNIPPET_CONTEXT] + ("…" if end + SNIPPET_CONTEXT < len(text) else "")
    return before, text[at:end], after


@dataclass
class SearchResults:
    counts: dict[str, int]
    capped: bool  # more messages matched than were read
    hits: dict[
        str, Sequence[Any] | QuerySet[Any]
    ]  # by kind: SearchHit for messages, rows otherwise

    def first_kind_found(self) -> str:
        return next((kind for kind, n in self.counts.items() if n), "messages")


def _message_hits(workspace: Workspace, query: str, end_user: str) -> tuple[list[SearchHit], bool]:
    candidates = Message.objects.filter(
        conversation__workspace=workspace, content__icontains=query
    ).select_related("conversation")
    if end_user:
        candidates = candidates.filter(conversation__user_id=end_user)
    rows = list(
        candidates.defer("metadata").order_by("-created_at", "-seq")[
            : SEARCH_MESSAGE_CANDIDATES + 1
        ]
    )
    capped = len(rows) > SEARCH_MESSAGE_CANDIDATES
    rows = rows[:SEARCH_MESSAGE_CANDIDATES]
    mask_messages(messages=rows)
    hits = []
    for message in rows:
        shown = message.masked_text  # type: ignore[attr-defined]  # set by mask_messages
        if query.lower() not in shown.lower():
            continue  # it matched only inside a masked value
        before, match, after = _snippet(shown, query)
        hits.append(
            SearchHit(
                "message",
                message.conversation,
                message.pk,
                before=before,
                match=match,
                after=after,
                anchor=f"m-{message.seq}",
                query=f"at={message.seq}",
                when=message.created_at,
                seq=message.seq,
                role=message.role,
            )
        )
    return hits, capped


def _memory_hits(
    model: type[Observation] | type[Reflection], workspace: Workspace, query: str, end_user: str
) -> QuerySet[Any]:
    rows = model.objects.filter(conversation__workspace=workspace, text__icontains=query)
    if end_user:
        rows = rows.filter(conversation__user_id=end_user)
    return rows.select_related("conversation").order_by("-observed_at", "-created_at", "-id")


def memory_hit(item: Observation | Reflection, query: str) -> SearchHit:
    if isinstance(item, Observation):
        kind, anchor, link = "observation", f"obs-{item.pk}", f"highlight={item.pk}"
    else:
        kind, anchor, link = "reflection", f"refl-{item.pk}", f"reflection={item.pk}"
    before, match, after = _snippet(item.text, query)
    return SearchHit(
        kind,
        item.conversation,
        item.pk,
        anchor=anchor,
        query=link,
        when=item.observed_at,
        priority=item.priority,
        status=item.status,
        before=before,
        match=match,
        after=after,
    )


def memory_search(*, workspace: Workspace, query: str, end_user: str = "") -> SearchResults:
    """Messages, observations and reflections of one workspace whose text holds
    ``query`` (case-insensitive, on every database: people search for exact words and
    ids, and a substring answers that the same on SQLite and PostgreSQL), newest first.
    The observation and reflection hits are lazy querysets, for a paginator."""
    messages, capped = _message_hits(workspace, query, end_user)
    observations = _memory_hits(Observation, workspace, query, end_user)
    reflections = _memory_hits(Reflection, workspace, query, end_user)
    return SearchResults(
        counts={
            "messages": len(messages),
            "observations": observations.count(),
            "reflections": reflections.count(),
        },
        capped=capped,
        hits={"messages": messages, "observations": observations, "reflections": reflections},
    )


# --- end users ------------------------------------------------------------------------------------

END_USER_MEMORY_LIMIT = 100


@dataclass
class EndUserMemory:
    conversations: list[Conversation]
    observations: list[Observation]
    reflections: list[Reflection]
    pins: Sequence[Pin]


def end_user_memory(*, workspace: Workspace, end_user: str) -> EndUserMemory:
    """One end user's conversations in a workspace (with their figures) and the memory
    served from them: active observations and reflections, newest first, and pins."""
    conversations = list(
        conversation_search(workspace=workspace, filters=ConversationFilters(end_user=end_user))
    )
    add_figures(conversations)
    scope = {"conversation__workspace": workspace, "conversation__user_id": end_user}
    observations = list(
        Observation.objects.filter(status=Observation.Status.ACTIVE, **scope)
        .select_related("conversation")
        .order_by("-observed_at", "-created_at")[:END_USER_MEMORY_LIMIT]
    )
    reflections = list(
        Reflection.objects.filter(status=Reflection.Status.ACTIVE, **scope)
        .select_related("conversation")
        .order_by("-observed_at", "-created_at")[:END_USER_MEMORY_LIMIT]
    )
    pins = list(
        Pin.objects.filter(**scope)
        .annotate(message_seq=F("message__seq"))
        .select_related("conversation")
        .order_by("-created_at")[:END_USER_MEMORY_LIMIT]
    )
    mask_pins(pins=pins)
    return EndUserMemory(conversations, observations, reflections, pins)


# --- metrics -------------------------------------------------------------------------------------


def metrics_for_charts(
    *, workspace: Workspace, conversation: Conversation | None
) -> dict[str, Any]:
    """``pipeline_metrics`` plus its daily series laid on one axis of the last
    SERIES_DAYS days (days without runs as zeros), as the charts need them."""
    metrics = pipeline_metrics(workspace=workspace, conversation=conversation)
    today = timezone.now().date()
    days = [(today - timedelta(days=n)).isoformat() for n in range(SERIES_DAYS - 1, -1, -1)]
    empty = {"runs": 0, "failures": 0, "tokensIn": 0, "tokensOut": 0}
    metrics["days"] = days
    metrics["daily"] = {
        kind: [dict(metrics["series"][kind].get(day, empty)) for day in days]
        for kind in ("observer", "reflector")
    }
    scope: dict[str, Any] = (
        {"conversation": conversation} if conversation else {"conversation__workspace": workspace}
    )
    since = timezone.now() - timedelta(days=SERIES_DAYS)
    for kind, model in (("observer", ObserverRun), ("reflector", ReflectorRun)):
        # pipeline_metrics gives duration percentiles overall; the chart of durations over
        # time needs them per day (succeeded runs, averaged and the slowest).
        rows = {
            row["day"].isoformat(): row
            for row in model.objects.filter(
                status=PipelineRun.Status.SUCCEEDED, created_at__gte=since, **scope
            )
            .exclude(duration_ms=None)
            .annotate(day=TruncDate("created_at"))
            .values("day")
            .annotate(avg=Avg("duration_ms"), slowest=Max("duration_ms"))
        }
        for day, entry in zip(days, metrics["daily"][kind], strict=True):
            row = rows.get(day)
            entry["durationAvgMs"] = round(row["avg"]) if row else None
            entry["durationMaxMs"] = row["slowest"] if row else None
    return metrics


def conversation_recall(*, conversation: Conversation) -> Recall:
    """The recall estimate as ``/v1/metrics`` gives it (memory's pseudonyms matched with
    their values, in memory only)."""
    return recall_for_conversation(
        conversation=conversation,
        reidentifier=reidentifier_for_measurement(workspace_id=conversation.workspace_id),
    )


# --- API keys -------------------------------------------------------------------------------------


def api_keys_of(*, workspace: Workspace) -> QuerySet[ApiKey]:
    """Active keys first, newest first; revoked ones stay listed for the record."""
    return ApiKey.objects.filter(workspace=workspace).order_by(
        F("revoked_at").desc(nulls_first=True), "-created_at"
    )


def api_key_in(*, workspace: Workspace, api_key_id: int) -> ApiKey | None:
    return (
        ApiKey.objects.filter(workspace=workspace, pk=api_key_id)
        .select_related("workspace")
        .first()
    )
