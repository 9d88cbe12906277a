"""The observations and reflections columns of the conversation page: windows of
observations and of reflections, one reflection's sources, the counts per status and
priority, and who wrote the manual ones."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db.models import Count, Exists, F, OuterRef, QuerySet, Sum

from dashboard.selectors.users import actor_labels
from memory import selectors as memory_selectors
from memory.models import Conversation, Message, Observation, Reflection

# The first screen shows the newest few of each tier; older ones load in pages.
OBSERVATIONS_FIRST = 8
OBSERVATION_PAGE = 50
REFLECTIONS_FIRST = 3
REFLECTION_PAGE = 20


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


@dataclass
class ReflectionPage:
    reflections: list[Reflection]
    offset: int  # how many newer reflections come after this page
    has_older: bool

    @property
    def older_offset(self) -> int:
        return self.offset + len(self.reflections)


def reflection_page(
    *, conversation: Conversation, offset: int = 0, limit: int = REFLECTION_PAGE
) -> ReflectionPage:
    """Every reflection (active, stale and superseded), newest generation first, ``limit``
    of them skipped by ``offset``, returned oldest first as the column lists them."""
    newest_first = list(
        Reflection.objects.filter(conversation=conversation).order_by(
            F("generation").desc(), F("created_at").desc(), F("id").desc()
        )[offset : offset + limit + 1]
    )
    return ReflectionPage(
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


def observation_tally(*, conversation: Conversation) -> tuple[dict[str, int], int]:
    """How many observations are active (served) and reflected (condensed into a
    reflection), and how many of each priority, for the column's heading and filter;
    and the tokens of the active ones. One grouped query."""
    counts: dict[str, int] = defaultdict(int)
    active_tokens = 0
    rows = (
        Observation.objects.filter(conversation=conversation)
        .order_by()
        .values_list("status", "priority")
        .annotate(n=Count("pk"), tokens=Sum("token_count"))
    )
    for status, priority, n, tokens in rows:
        counts[status] += n
        counts[priority] += n
        if status == Observation.Status.ACTIVE:
            active_tokens += tokens or 0
    return counts, active_tokens


def observation_counts(*, conversation: Conversation) -> dict[str, int]:
    """``observation_tally``'s counts."""
    return observation_tally(conversation=conversation)[0]


def mark_served_in_place(*, conversation: Conversation, observations: list[Observation]) -> None:
    """Flag the reflected observations the agent is served while their reflection is
    re-derived, for the template."""
    in_place = (
        memory_selectors.stale_source_ids(conversation=conversation)
        if any(o.status == Observation.Status.REFLECTED for o in observations)
        else set()
    )
    for observation in observations:
        observation.served_in_place = str(observation.pk) in in_place  # type: ignore[attr-defined]


def note_authors(*, notes: Sequence[Observation | Reflection]) -> None:
    """Give each note the names of whoever wrote it and last corrected it, for the
    template (``author``, ``corrector``): a person's username, an API key's name."""
    labels = {n.written_by for n in notes if n.written_by} | {
        n.corrected_by for n in notes if n.corrected_by
    }
    names = actor_labels(labels)
    for note in notes:
        note.author = names.get(note.written_by, "")  # type: ignore[union-attr]  # for the template
        note.corrector = names.get(note.corrected_by, "")  # type: ignore[union-attr]
