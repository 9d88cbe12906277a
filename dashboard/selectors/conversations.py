"""Conversations with their per-tier figures: the list, its filters and sorts, and one
conversation of the user's workspaces."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypedDict

from django.conf import settings
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Cast, Coalesce, Greatest, NullIf

from core.errors import MemdeskError
from dashboard.selectors.search import conversations_matching
from governance.models import LegalHold, RedactionFinding
from memory.metrics import served_token_count
from memory.models import (
    Conversation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    PipelineRun,
    Reflection,
    ReflectorRun,
)
from tenancy.models import Workspace

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


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


class PageFlags(TypedDict):
    last_activity: datetime
    pii_found: bool
    on_hold: bool


class ConversationFlags(PageFlags):
    weakly_grounded: bool


def _flags(
    queryset: QuerySet[Conversation],
) -> QuerySet[WithAnnotations[Conversation, PageFlags]]:
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
    return queryset.annotate(
        last_activity=_last_activity(), pii_found=Exists(findings), on_hold=Exists(holds)
    )


def _listed_flags(
    queryset: QuerySet[Conversation],
) -> QuerySet[WithAnnotations[Conversation, ConversationFlags]]:
    """``_flags`` and ``weakly_grounded``, which the list filters on (the conversation
    page shows each note's own: without a weak note the flag reads every active one)."""
    threshold = settings.MEMDESK_GROUNDING_THRESHOLD
    weak_observations = Observation.objects.filter(
        conversation=OuterRef("pk"), status=Observation.Status.ACTIVE, grounding__lt=threshold
    )
    weak_reflections = Reflection.objects.filter(
        conversation=OuterRef("pk"), status=Reflection.Status.ACTIVE, grounding__lt=threshold
    )
    return _flags(queryset).annotate(
        weakly_grounded=Exists(weak_observations) | Exists(weak_reflections)
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
    return _listed_flags(queryset).annotate(
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
    *,
    workspace: Workspace,
    filters: ConversationFilters,
    raw_values: bool = False,
) -> QuerySet[Conversation]:
    """The workspace's conversations that pass ``filters``, with their figures, sorted.
    The query matches the title as pages show it (masked), the end user's id, the
    conversation's id, and through the recall index its memory, messages masked; with
    ``raw_values`` (a role that may reveal them) messages and the title as stored too.
    Each conversation listed only because a masked value holds the query (in its memory
    or its title) is annotated ``found_only_masked``. End user ids are matched as
    stored: the list shows them so."""
    qs = with_tier_stats(Conversation.objects.filter(workspace=workspace))
    if filters.query:
        text = filters.query
        # Memory through the recall index, messages as a page shows them (masked): a
        # value every page masks must not tell which conversation holds it.
        mentions = conversations_matching(workspace=workspace, query=text, raw_values=raw_values)
        shown = Q(title_masked__icontains=text) | Q(user_id__icontains=text)
        with contextlib.suppress(ValueError):  # not an id: search the text only
            shown |= Q(pk=uuid.UUID(text))
        masked = Q(pk__in=mentions.only_masked)
        if raw_values:
            masked |= Q(title__icontains=text)
        qs = qs.filter(shown | Q(pk__in=mentions.ids) | masked)
        if mentions.only_masked or raw_values:
            qs = qs.annotate(
                found_only_masked=ExpressionWrapper(masked & ~shown, output_field=BooleanField())
            )
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


def found_only_masked_count(conversations: QuerySet[Conversation]) -> int:
    """How many of ``conversation_search``'s conversations are listed only because a
    masked value holds the query (0 when it found none so: it annotated nothing)."""
    if "found_only_masked" not in conversations.query.annotations:
        return 0
    # (a dict: django-stubs does not know the annotation)
    return conversations.filter(**{"found_only_masked": True}).count()


def end_users(*, workspace: Workspace, limit: int = 500) -> list[str]:
    """End-user ids for the filter's suggestions."""
    return list(
        Conversation.objects.filter(workspace=workspace)
        .exclude(user_id="")
        .order_by("user_id")
        .values_list("user_id", flat=True)
        .distinct()[:limit]
    )


def _conversation_not_found() -> MemdeskError:
    return MemdeskError("not_found", "No such conversation in your workspaces.", status_code=404)


def conversation_get_with_flags(
    *, workspace_ids: list[uuid.UUID], conversation_id: uuid.UUID
) -> Conversation:
    """One conversation of the given workspaces, with ``pii_found`` and ``on_hold``."""
    try:
        return (
            _flags(Conversation.objects.filter(pk=conversation_id, workspace_id__in=workspace_ids))
            .select_related("workspace")
            .get()
        )
    except Conversation.DoesNotExist:
        raise _conversation_not_found() from None


def conversation_get(*, workspace_ids: list[uuid.UUID], conversation_id: uuid.UUID) -> Conversation:
    try:
        return Conversation.objects.select_related("workspace").get(
            pk=conversation_id, workspace_id__in=workspace_ids
        )
    except Conversation.DoesNotExist:
        raise _conversation_not_found() from None
