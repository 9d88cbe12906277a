"""The three tiers of memory (messages, observations, reflections). The workspaces they
belong to are tenancy's (``tenancy.models``)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.actors import ActorType
from core.fields import ClientJSONField
from tenancy.models import Workspace


class Conversation(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="conversations")
    user_id = models.CharField(max_length=255, blank=True, default="")
    title = models.CharField(max_length=255, blank=True, default="")
    # What pages show of the title: each value the redaction policy finds in it masked
    # as its entity type, worked out once when the conversation is created. The API
    # answers the title as the client sent it, as it does messages.
    title_masked = models.TextField(blank=True, default="")
    metadata = ClientJSONField(default=dict, blank=True)
    # Labels that retention policies select on (e.g. "billing", "eu").
    tags = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # The highest message seq handed out. Appends bump it with a conditional UPDATE,
    # which takes the row lock, so seq stays gapless and unique under concurrency.
    last_seq = models.PositiveIntegerField(default=0)
    # Bumped by every service that changes observations or reflections; with last_seq
    # it keys the rendered-context cache and the ETag.
    memory_version = models.PositiveIntegerField(default=0)
    # At least the tokens of the messages no Observer run or observation covers, while
    # memory_version is still unobserved_bound_version: the exact count at the last due
    # check plus every write's tokens since (added in the UPDATE that hands out seq
    # numbers). A write that leaves it below the threshold skips the check's queries
    # (memory/pipeline/scheduling.py). Everything that uncovers messages moves
    # memory_version; NULL (rows from before it) means "count".
    unobserved_tokens_bound = models.PositiveIntegerField(null=True, default=0, editable=False)
    unobserved_bound_version = models.PositiveIntegerField(null=True, default=0, editable=False)
    observer_threshold = models.PositiveIntegerField(null=True, blank=True)
    reflector_threshold = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["workspace", "-updated_at", "-id"], name="conv_ws_updated"),
            models.Index(fields=["workspace", "user_id"], name="conv_ws_user"),
        ]

    def __str__(self) -> str:
        return str(self.id)

    @property
    def shown_title(self) -> str:
        """The title as every dashboard page shows it, to every role: masked."""
        return self.title_masked if self.title_masked or not self.title else "(title not scanned)"

    @property
    def effective_observer_threshold(self) -> int:
        return self.observer_threshold or self.workspace.effective_observer_threshold

    @property
    def effective_reflector_threshold(self) -> int:
        return self.reflector_threshold or self.workspace.effective_reflector_threshold


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user", "user"
        ASSISTANT = "assistant", "assistant"
        SYSTEM = "system", "system"
        TOOL = "tool", "tool"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    # The speaker's name, as OpenAI chat messages carry it ("Maria", "Tom (agent)"): two
    # people who share a role stay apart. Blank when the client sends only the role.
    name = models.CharField(max_length=64, blank=True, default="")
    tool_name = models.CharField(max_length=200, blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    token_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=timezone.now)
    metadata = ClientJSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "seq"], name="message_conv_seq_unique")
        ]
        # The full-text GIN index is PostgreSQL-only: migration 0002 adds it there.
        ordering = ["seq"]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.seq}"


class Priority(models.TextChoices):
    HIGH = "high", "high"
    MEDIUM = "medium", "medium"
    LOW = "low", "low"
    COMPLETED = "completed", "completed"


PRIORITY_MARKERS = {
    Priority.HIGH: "\N{LARGE RED CIRCLE}",
    Priority.MEDIUM: "\N{LARGE YELLOW CIRCLE}",
    Priority.LOW: "\N{LARGE GREEN CIRCLE}",
    Priority.COMPLETED: "\N{WHITE HEAVY CHECK MARK}",
}
# Lower keeps longer when a context must shrink to a token budget.
PRIORITY_KEEP_RANK: dict[str, int] = {
    Priority.HIGH: 0,
    Priority.MEDIUM: 1,
    Priority.COMPLETED: 2,
    Priority.LOW: 3,
}


def is_weakly_grounded(grounding: float | None) -> bool:
    """Below the workspace-wide threshold: shown for review, counted in the metrics."""
    return grounding is not None and grounding < settings.MEMDESK_GROUNDING_THRESHOLD


class MemorySource(models.TextChoices):
    OBSERVER = "observer", "observer engine"
    REFLECTOR = "reflector", "reflector engine"
    MANUAL = "manual", "a person"
    API = "api", "an agent over the API"


class MemoryNote(models.Model):
    """What an observation and a reflection share: a line of memory about a
    conversation, with its dates, the window of messages it covers, who wrote it, and a
    version that every correction bumps (the versions it replaced are kept in
    ``ObservationVersion`` / ``ReflectionVersion``)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The conversation is a field of each: its related name (observations, reflections)
    # written as "%(class)ss" here would be a migration.
    text = models.TextField()
    priority = models.CharField(max_length=10, choices=Priority.choices, default=Priority.MEDIUM)
    # When the source messages were said (the last of them; a reflection: as of its
    # newest source observation); a note without sources, when it was written.
    # ``written_at`` is when the Observer, the Reflector or a person wrote it.
    observed_at = models.DateTimeField(default=timezone.now)
    referenced_at = models.DateTimeField(null=True, blank=True)
    written_at = models.DateTimeField(default=timezone.now)
    # The share of its names, numbers and content words found in its sources (an
    # observation's messages, a reflection's source observations); None: a note without
    # sources, nothing to check it against.
    grounding = models.FloatField(null=True, blank=True)
    # The messages it covers (a reflection: its sources' messages).
    window_start_seq = models.PositiveIntegerField(null=True, blank=True)
    window_end_seq = models.PositiveIntegerField(null=True, blank=True)
    window_start_at = models.DateTimeField(null=True, blank=True)
    window_end_at = models.DateTimeField(null=True, blank=True)
    engine = models.CharField(max_length=50, blank=True, default="")
    model_name = models.CharField(max_length=200, blank=True, default="")
    # Whose word it is (``origin``): the person or agent who wrote it, as an actor label
    # ("user:12", "api_key:<id>"; "" when an engine did: ``engine`` and ``model_name``
    # say which), and the last person or agent who changed it (edit or revert).
    written_by = models.CharField(max_length=200, blank=True, default="")
    corrected_by = models.CharField(max_length=200, blank=True, default="")
    corrected_at = models.DateTimeField(null=True, blank=True)
    # Staged approval (memory/approval/): why it waited for a person (the checks' reasons,
    # in words), and who approved or rejected it, when.
    waits_for = models.JSONField(default=list, blank=True)
    decided_by = models.CharField(max_length=200, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    topics = models.JSONField(default=list, blank=True)
    token_count = models.PositiveIntegerField()
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    # Each kind's own field (MemorySource): who wrote it.
    source: str

    class Meta:
        abstract = True

    @property
    def marker(self) -> str:
        return PRIORITY_MARKERS[Priority(self.priority)]

    @property
    def needs_grounding_review(self) -> bool:
        return is_weakly_grounded(self.grounding)

    @property
    def persons_words(self) -> bool:
        """A person wrote it, or changed it last: the Reflector never rewrites it."""
        return self.source == MemorySource.MANUAL or self.corrected_by.startswith(
            f"{ActorType.USER}:"
        )

    @property
    def origin_kind(self) -> str:
        """Who wrote it: "observer", "reflector", "agent" or "person"."""
        kinds: dict[str, str] = {MemorySource.MANUAL: "person", MemorySource.API: "agent"}
        return kinds.get(self.source, self.source)


class Observation(MemoryNote):
    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        REFLECTED = "reflected", "reflected"
        # Staged approval (memory/approval/): not served until a person approves it, the
        # messages it covers served word for word meanwhile; a rejected one never is.
        WAITING = "waiting", "waiting for approval"
        REJECTED = "rejected", "rejected"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="observations"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    source_message_ids = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=10, choices=MemorySource.choices)
    ticket_id = models.CharField(max_length=100, blank=True, default="")
    reflection = models.ForeignKey(
        "Reflection",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="source_observations",
    )

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "status", "observed_at"], name="obs_conv_status"),
            models.Index(fields=["conversation", "window_end_seq"], name="obs_conv_window"),
            # The conversation page's newest observations, of every status, without
            # sorting all of a long conversation's.
            models.Index(fields=["conversation", "observed_at"], name="obs_conv_observed"),
        ]

    def __str__(self) -> str:
        return f"observation {self.id}"


class MemoryVersion(models.Model):
    """The state of an observation or reflection before an edit or deletion, with the
    reason given."""

    version = models.PositiveIntegerField()
    text = models.TextField()
    priority = models.CharField(max_length=10, choices=Priority.choices)
    referenced_at = models.DateTimeField(null=True, blank=True)
    tags = models.JSONField(default=list, blank=True)
    change = models.CharField(max_length=10)  # "edit", "revert" or "delete"
    reason = models.TextField()
    changed_by = models.CharField(max_length=200)
    changed_at = models.DateTimeField(default=timezone.now)
    # The note's other fields at this version (``note_state``: its grounding, topics,
    # token count, dates, window, sources...), so that the version alone rebuilds the
    # note as it was served, after the note itself is edited or deleted
    # (memory/context/rebuild.py). {} in versions kept before it existed.
    state = models.JSONField(default=dict, blank=True)

    class Meta:
        abstract = True


# The notes whose words are a person's (``MemoryNote.persons_words``), as a filter.
PERSONS_WORDS = models.Q(source=MemorySource.MANUAL) | models.Q(
    corrected_by__startswith=f"{ActorType.USER}:"
)


# What a version row keeps in columns of its own, or what never differs between versions.
_KEPT_APART = frozenset(
    {"id", "conversation_id", "text", "priority", "referenced_at", "tags", "version", "updated_at"}
)


def note_state(note: MemoryNote) -> dict[str, Any]:
    """The fields of ``note`` a version row keeps in ``state``, as JSON values."""
    state: dict[str, Any] = {}
    for field in note._meta.concrete_fields:
        if field.attname in _KEPT_APART:
            continue
        value = getattr(note, field.attname)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, uuid.UUID):
            value = str(value)
        state[field.attname] = value
    return state


NoteT = TypeVar("NoteT", "Observation", "Reflection")


def note_as_kept(
    model: type[NoteT], kept: ObservationVersion | ReflectionVersion, *, now: NoteT | None
) -> NoteT | None:
    """The note as it stood at ``kept``'s version, in memory only: ``now`` (the note as
    it stands, None once deleted) with the version's fields put back. None when the
    version alone cannot say (one kept before versions kept their ``state``, of a note
    since deleted)."""
    if now is None and not kept.state:
        return None
    if now is not None:
        note = copy.copy(now)
    else:
        note = model(id=getattr(kept, f"{model._meta.model_name}_id"))
        note.conversation_id = kept.conversation_id
    for name, value in kept.state.items():
        field = model._meta.get_field(name)
        assert isinstance(field, models.Field)  # a concrete field, as note_state wrote it
        setattr(note, name, field.to_python(value))
    note.text, note.priority, note.tags = kept.text, kept.priority, kept.tags
    note.referenced_at, note.version = kept.referenced_at, kept.version
    return note


class ObservationVersion(MemoryVersion):
    observation_id = models.UUIDField(db_index=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="observation_versions"
    )

    class Meta:
        ordering = ["observation_id", "version"]

    def __str__(self) -> str:
        return f"observation {self.observation_id} v{self.version} ({self.change})"


class Reflection(MemoryNote):
    """A synthesis of observations. ``active`` ones are served; a ``stale`` one (a source
    observation was corrected) is not, its sources as they now stand are served in its
    place until the Reflector re-derives it; a ``superseded`` one was replaced by that
    re-derivation and stays for its history. Under staged approval a new one is
    ``waiting`` (not served; its sources are, or the stale one it would replace goes on
    serving its sources, ``superseded_by`` pointing at it) until a person approves it,
    or ``rejected``."""

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        STALE = "stale", "stale"
        SUPERSEDED = "superseded", "superseded"
        # Staged approval (memory/approval/): written, not served until a person approves
        # it; a rejected one never is.
        WAITING = "waiting", "waiting for approval"
        REJECTED = "rejected", "rejected"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="reflections"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    generation = models.PositiveIntegerField(default=1)
    source_observation_ids = models.JSONField(default=list, blank=True)
    source = models.CharField(
        max_length=10, choices=MemorySource.choices, default=MemorySource.REFLECTOR
    )
    # The reflection the Reflector re-derived this stale one into (the first of them, if
    # its sources went into several); None while it is not superseded, or when nothing
    # replaced it (every source was deleted).
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "status", "generation"], name="refl_conv_status"),
            # The conversation page's newest reflections, of every status.
            models.Index(
                fields=["conversation", "generation", "created_at"], name="refl_conv_newest"
            ),
        ]

    def __str__(self) -> str:
        return f"reflection {self.id}"

    @property
    def is_stale(self) -> bool:
        return self.status == self.Status.STALE


class ReflectionVersion(MemoryVersion):
    reflection_id = models.UUIDField(db_index=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="reflection_versions"
    )

    class Meta:
        ordering = ["reflection_id", "version"]

    def __str__(self) -> str:
        return f"reflection {self.reflection_id} v{self.version} ({self.change})"


class IdempotencyRecordQuerySet(models.QuerySet["IdempotencyRecord"]):
    def repeating(self, messages: Iterable[Message]) -> IdempotencyRecordQuerySet:
        """The records whose reply repeats any of ``messages``."""
        covering = models.Q(pk__in=[])
        for message in messages:
            covering |= models.Q(
                conversation_id=message.conversation_id,
                first_seq__lte=message.seq,
                last_seq__gte=message.seq,
            )
        return self.filter(covering, repeats=IdempotencyRecord.Repeats.MESSAGES)

    def with_rows_gone(self) -> IdempotencyRecordQuerySet:
        """The records whose reply repeats a row that is no longer stored: one of the
        messages ``first_seq..last_seq`` of its conversation (seq numbers are unique in
        a conversation, so a range holding fewer messages than numbers has lost one),
        or its reasoning step or tool call."""
        messages_left = (
            Message.objects.filter(
                conversation_id=models.OuterRef("conversation_id"),
                seq__gte=models.OuterRef("first_seq"),
                seq__lte=models.OuterRef("last_seq"),
            )
            .order_by()
            .values("conversation_id")
            .annotate(n=models.Count("pk"))
            .values("n")
        )
        repeats = IdempotencyRecord.Repeats
        return self.alias(
            messages_left=Coalesce(models.Subquery(messages_left), 0),
            step_left=models.Exists(ReasoningStep.objects.filter(pk=models.OuterRef("row_id"))),
            call_left=models.Exists(ToolCall.objects.filter(pk=models.OuterRef("row_id"))),
        ).filter(
            models.Q(
                repeats=repeats.MESSAGES,
                messages_left__lt=models.F("last_seq") - models.F("first_seq") + 1,
            )
            | models.Q(repeats=repeats.REASONING_STEP, step_left=False)
            | models.Q(repeats=repeats.TOOL_CALL, call_left=False)
        )


class IdempotencyRecord(models.Model):
    """The first response to a write sent with an ``Idempotency-Key``, for replays.

    The reply repeats what the write stored (message contents, a step's reasoning, a
    tool's output), so it must not outlive it: it is replayed for
    ``MEMDESK_IDEMPOTENCY_TTL_HOURS`` and then deleted by beat's expiry; it goes with
    its conversation, and a retention batch that deletes a row it repeats deletes it in
    the same transaction. A replay checks that every row is still there."""

    class Repeats(models.TextChoices):
        # Named as the retention tiers' line kinds, so a sweep finds the replies of a tier.
        NOTHING = "", "nothing of its own (a new conversation, or written before 0025)"
        MESSAGES = "message", "the messages first_seq..last_seq"
        REASONING_STEP = "reasoning_step", "the reasoning step row_id"
        TOOL_CALL = "tool_call", "the tool call row_id"

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE)
    # The conversation the write created or added to: its reply repeats that
    # conversation's messages, so the record goes when the conversation goes.
    conversation = models.ForeignKey(
        "Conversation", null=True, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=255)
    request_fingerprint = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    # The rows the reply repeats: the messages of one write have consecutive seqs in
    # its conversation; a reasoning step or a tool call is one row.
    repeats = models.CharField(
        max_length=20, choices=Repeats.choices, blank=True, default=Repeats.NOTHING
    )
    first_seq = models.PositiveIntegerField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(null=True, blank=True)
    row_id = models.UUIDField(null=True, blank=True)

    objects = IdempotencyRecordQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "key"], name="idempotency_ws_key_unique")
        ]
        # Beat's expiry deletes by age.
        indexes = [models.Index(fields=["created_at"], name="idempotency_created")]

    def __str__(self) -> str:
        return f"idempotency key {self.key}"


class PipelineRun(models.Model):
    """One run of the Observer or the Reflector over one conversation.

    A run is created PENDING (shown as "queued") when it is due, claimed by one worker
    with a conditional UPDATE that also takes a lease, and finished by the worker that
    holds the lease. A retryable error (a provider down, a timeout) makes it RETRYING
    until its next attempt at ``next_attempt_at``; after the last attempt it is FAILED.
    A person may cancel an open run. A worker that dies leaves a RUNNING row whose lease
    expires; the sweeper or the redelivered task then claims it again, and the lease
    token makes sure only one worker's results are ever stored.
    """

    class Status(models.TextChoices):
        # Stored as "pending" since the first version; the API and the dashboard say
        # "queued" (``state``).
        PENDING = "pending", "queued"
        RUNNING = "running", "running"
        RETRYING = "retrying", "retrying"
        SUCCEEDED = "succeeded", "succeeded"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    class Trigger(models.TextChoices):
        THRESHOLD = "threshold", "threshold crossed"
        MANUAL = "manual", "on demand"
        SWEEPER = "sweeper", "periodic sweeper"
        CORRECTION = "correction", "a correction to reflected memory"

    OPEN_STATUSES = (Status.PENDING, Status.RUNNING, Status.RETRYING)
    # The first attempt and the task's retries (memory.tasks.MAX_RETRIES).
    MAX_ATTEMPTS = 6

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    trigger = models.CharField(max_length=10, choices=Trigger.choices)
    engine = models.CharField(max_length=20, blank=True, default="")
    model_name = models.CharField(max_length=200, blank=True, default="")
    prompt_version = models.CharField(max_length=50, blank=True, default="")
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    items_in = models.PositiveIntegerField(default=0)
    items_out = models.PositiveIntegerField(default=0)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    # The last error in words (a status code, a timeout, a rule broken), never content.
    error = models.CharField(max_length=500, blank=True, default="")
    # When a RETRYING run is tried again (the task's backoff countdown).
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.UUIDField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def is_open(self) -> bool:
        return self.status in self.OPEN_STATUSES

    @property
    def state(self) -> str:
        """The status as the API and the dashboard name it: ``queued`` for PENDING."""
        return "queued" if self.status == self.Status.PENDING else str(self.status)


class ObserverRun(PipelineRun):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="observer_runs"
    )
    # The messages this run covers, fixed when it is claimed: later messages stay recent.
    window_start_seq = models.PositiveIntegerField(null=True, blank=True)
    window_end_seq = models.PositiveIntegerField(null=True, blank=True)
    current_task = models.TextField(blank=True, default="")
    suggested_response = models.TextField(blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status__in=["pending", "running", "retrying"]),
                name="one_open_observer_run_per_conversation",
            )
        ]
        indexes = [
            models.Index(fields=["conversation", "status"], name="obsrun_conv_status"),
            models.Index(fields=["status", "created_at"], name="obsrun_status_created"),
        ]

    def __str__(self) -> str:
        return f"observer run {self.id} ({self.status})"


class ReflectorRun(PipelineRun):
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="reflector_runs"
    )
    generation = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["conversation"],
                condition=models.Q(status__in=["pending", "running", "retrying"]),
                name="one_open_reflector_run_per_conversation",
            )
        ]
        indexes = [
            models.Index(fields=["conversation", "status"], name="refrun_conv_status"),
            models.Index(fields=["status", "created_at"], name="refrun_status_created"),
        ]

    def __str__(self) -> str:
        return f"reflector run {self.id} ({self.status})"


# A row of either run table (PipelineRun is abstract and has no conversation of its own).
AnyRun = ObserverRun | ReflectorRun


class Pin(models.Model):
    """A verbatim quote of one message (all of it, or the characters ``start:end``),
    served in every context as it stands: never condensed, never trimmed to a budget.

    The message link is DO_NOTHING for Django because the retention sweep deletes
    expired messages with raw SQL on PostgreSQL and deletes their pins itself, in the
    same transaction, counting them in its receipt. The database constraint is still
    there (checked at commit), so a pin can never outlive the message it quotes.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="pins")
    message = models.ForeignKey(Message, on_delete=models.DO_NOTHING, related_name="pins")
    # Character offsets into the message's content; both None: the whole message.
    start = models.PositiveIntegerField(null=True, blank=True)
    end = models.PositiveIntegerField(null=True, blank=True)
    text = models.TextField()
    token_count = models.PositiveIntegerField()
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["conversation", "created_at"], name="pin_conv_created")]

    def __str__(self) -> str:
        return f"pin {self.id}"


class Escalation(models.Model):
    """An agent handing a conversation to a person (the fallback to a human): why, and,
    once a reviewer has dealt with it, when, by whom and with what note.

    The reason is the agent's own words about the conversation and may hold personal
    data, so it is treated as message content: never logged, never in an audit event,
    shown only to roles that may reveal personal data. It lives as long as its
    conversation (deleted with it, and so by an end user's erasure)."""

    class Status(models.TextChoices):
        OPEN = "open", "open"
        RESOLVED = "resolved", "resolved"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="escalations"
    )
    reason = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_by = models.CharField(max_length=200, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_note = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "-created_at"], name="esc_conv_created"),
            models.Index(fields=["status", "-created_at"], name="esc_status_created"),
        ]

    def __str__(self) -> str:
        return f"escalation {self.id}"


class ReasoningStep(models.Model):
    """One step of an agent's reasoning in a conversation, as NAMS records it: what it
    thought (``reasoning``), what it did (``action_taken``) and what came of it
    (``result``). ``after_seq`` is the conversation's ``last_seq`` when it was recorded:
    the step comes after that message and before the next one."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="reasoning_steps"
    )
    step_number = models.PositiveIntegerField()
    after_seq = models.PositiveIntegerField(default=0)
    reasoning = models.TextField(blank=True, default="")
    action_taken = models.TextField(blank=True, default="")
    result = models.TextField(blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["conversation", "after_seq", "created_at"], name="step_conv_seq"),
            models.Index(fields=["created_at"], name="step_created"),
        ]

    def __str__(self) -> str:
        return f"reasoning step {self.id}"


class ToolCall(models.Model):
    """One call of a tool by an agent: its name, input and output as the agent sent them
    (JSON text or plain text), status and duration. It may hang off a reasoning step;
    ``after_seq`` places it among the messages as for a step. The Observer reads it as
    tool output together with the message that follows it."""

    class Status(models.TextChoices):
        # The statuses of the NAMS clients' ToolCallStatus.
        PENDING = "pending", "pending"
        SUCCESS = "success", "success"
        FAILURE = "failure", "failure"
        ERROR = "error", "error"
        TIMEOUT = "timeout", "timeout"
        CANCELLED = "cancelled", "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="tool_calls"
    )
    # SET_NULL, not CASCADE: retention deletes steps and tool calls each by their own
    # age, and a tool call recorded just after its step must not go with it unreceipted.
    step = models.ForeignKey(
        ReasoningStep, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    after_seq = models.PositiveIntegerField(default=0)
    tool_name = models.CharField(max_length=200)
    input = models.TextField(blank=True, default="")
    output = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.SUCCESS)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(
                fields=["conversation", "after_seq", "created_at"], name="toolcall_conv_seq"
            ),
            models.Index(fields=["created_at"], name="toolcall_created"),
        ]

    def __str__(self) -> str:
        return f"tool call {self.id} ({self.tool_name})"

    @property
    def observed_output(self) -> str:
        """What the Observer reads as the tool's output (with ``tool_name``, the engines
        write it as ``Tool <name>: ...``): the output, else the error, else the status."""
        return self.output or self.error or self.status


# The recall index (memory/search/): its rows are written by the database, never here.
from memory.search.index import SearchEntry  # noqa: E402, F401
