"""Reads for the dashboard. Every function takes the workspace (or an object already
scoped to one); nothing here decides who may read it (that is ``dashboard.access``)."""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
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

from dashboard.models import Membership, Role
from governance.models import LegalHold, MessageScan, RedactionFinding
from governance.scan import MASKED_STATUSES, content_digest
from memory.metrics import SERIES_DAYS, pipeline_metrics, served_token_count
from memory.models import (
    ApiKey,
    Conversation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    Reflection,
    ReflectorRun,
    Workspace,
)

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
    numeric = [int(i) for i in ids if i.isdigit()]
    names = dict(get_user_model().objects.filter(pk__in=numeric).values_list("pk", "username"))
    return {
        label: names.get(int(label[5:]), label)
        if label.startswith("user:") and label[5:].isdigit()
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


class ConversationFlags(TypedDict):
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
    pins = Pin.objects.filter(conversation=OuterRef("pk"))
    return _flags(queryset).annotate(
        message_count=_count_of(messages),
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
    "-updated": ("Last activity, newest first", F("updated_at").desc()),
    "updated": ("Last activity, oldest first", F("updated_at").asc()),
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
        qs = qs.filter(updated_at__date__gte=filters.active_from)
    if filters.active_to:
        qs = qs.filter(updated_at__date__lte=filters.active_to)
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
    *, conversation: Conversation, offset: int = 0, limit: int = OBSERVATION_PAGE
) -> ObservationPage:
    """Every observation (active and reflected), newest ``limit`` first skipped by
    ``offset``, returned oldest first to read like the messages beside them."""
    newest_first = list(
        _with_sources_stored(Observation.objects.filter(conversation=conversation)).order_by(
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
