"""OpenAPI declarations of the bodies built by hand on hot paths (camelCase, as on the
wire): the shapes a context carries, rendered in ``memory/wire.py`` and
``memory/context/rendering.py`` (``memory/wire.py`` says why, with the figure), with the
bodies that hold them (lists, search, history); and the bodies that a selector or
``memory/metrics.py`` assembles (extraction status, metrics).

These serializers only describe; tests/memory/test_openapi.py validates real responses
against them. The other bodies are rendered by the serializers that document them, in
``memory/api/presenters.py``.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers

from memory.api.presenters import MemoryVersionOut
from memory.search.index import SearchEntry
from memory.wire import NAMS_ROLES


class MessageOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool"])
    content = serializers.CharField()
    createdAt = serializers.DateTimeField()
    tokenCount = serializers.IntegerField()
    metadata = serializers.DictField()
    name = serializers.CharField(
        required=False,
        help_text="Who said it (the speaker's name, as in OpenAI chat messages); absent "
        "when the message names no one.",
    )
    toolName = serializers.CharField(required=False)
    toolCallId = serializers.CharField(required=False)
    score = serializers.FloatField(required=False, allow_null=True)


class RecentMessageOut(MessageOut):
    role = serializers.ChoiceField(
        choices=list(NAMS_ROLES),
        help_text="The roles every NAMS client knows: a tool message is served as a user "
        "turn whose content is labelled '[toolName result] '.",
    )
    originalRole = serializers.ChoiceField(
        choices=["tool"], required=False, help_text="The stored role, when it was mapped."
    )


class MessageListOut(serializers.Serializer):
    messages = MessageOut(many=True)


class SearchOut(serializers.Serializer):
    messages = MessageOut(many=True)
    searchType = serializers.CharField()


class SearchHitOut(serializers.Serializer):
    tier = serializers.ChoiceField(choices=SearchEntry.Kind.choices)
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    seq = serializers.IntegerField(allow_null=True)
    role = serializers.CharField(allow_null=True)
    name = serializers.CharField(allow_null=True, help_text="The speaker's name, if any.")
    at = serializers.DateTimeField(help_text="When said (a message, a pin) or observed (a note).")
    status = serializers.CharField(allow_null=True)
    snippet = serializers.CharField(help_text="The text, or its stretch around the matches.")
    highlights = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="[start, end) character spans of the question's words in the snippet.",
    )
    score = serializers.FloatField(allow_null=True, help_text="Higher is better.")
    observationIds = serializers.ListField(
        child=serializers.UUIDField(), required=False, help_text="A message's observations."
    )


class SearchHitsOut(serializers.Serializer):
    hits = SearchHitOut(many=True)
    scope = serializers.ChoiceField(choices=["conversation", "user", "workspace"])


class NoteOriginOut(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["observer", "reflector", "agent", "person"], help_text="Who wrote it."
    )
    engine = serializers.CharField(allow_null=True, help_text="The engine that wrote it.")
    model = serializers.CharField(allow_null=True, help_text="The engine's model.")
    writtenBy = serializers.CharField(
        allow_null=True,
        help_text="The person (user:<id>) or agent (api_key:<id>) who wrote it; null when an "
        "engine did.",
    )
    correctedBy = serializers.CharField(
        allow_null=True, help_text="The person or agent who changed it last (edit or revert)."
    )
    correctedAt = serializers.DateTimeField(allow_null=True)
    personsWords = serializers.BooleanField(
        help_text="A person wrote it or changed it last: the Reflector never rewrites it."
    )


class _MemoryItemOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    content = serializers.CharField(help_text="The line as it goes into a prompt.")
    text = serializers.CharField()
    priority = serializers.ChoiceField(choices=["high", "medium", "low", "completed"])
    marker = serializers.CharField()
    status = serializers.CharField()
    observedAt = serializers.DateTimeField(
        help_text="When the source messages were said (a reflection: the newest source)."
    )
    referencedAt = serializers.DateTimeField(allow_null=True)
    writtenAt = serializers.DateTimeField(
        help_text="When the Observer, Reflector or a person wrote it."
    )
    relativeDate = serializers.CharField(help_text="Computed when read, never stored.")
    grounding = serializers.FloatField(
        allow_null=True,
        help_text="Share (0-1) of its names, numbers and content words found in its sources; "
        "null when it has none.",
    )
    groundingFlagged = serializers.BooleanField(
        help_text="Below MEMDESK_GROUNDING_THRESHOLD: check it against its sources."
    )
    windowStart = serializers.DateTimeField(
        required=False,
        help_text="When the first message behind it was said; absent when it was written "
        "from no message.",
    )
    windowEnd = serializers.DateTimeField(
        required=False,
        help_text="When the last message behind it was said; absent when it was written "
        "from no message.",
    )
    windowStartSeq = serializers.IntegerField(
        allow_null=True, help_text="seq of the first message behind it."
    )
    windowEndSeq = serializers.IntegerField(
        allow_null=True, help_text="seq of the last message behind it."
    )
    # The metaclass moves declared fields off the class, so this wire field never
    # replaces Field.source at runtime; only the stubs see a clash.
    source = serializers.CharField()  # type: ignore[assignment]
    engine = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    origin = NoteOriginOut(help_text="Whose word it is.")
    tags = serializers.ListField(child=serializers.CharField())
    topics = serializers.ListField(child=serializers.CharField())
    tokenCount = serializers.IntegerField()
    version = serializers.IntegerField()
    createdAt = serializers.DateTimeField(help_text="When the row was stored.")


class ObservationOut(_MemoryItemOut):
    sourceMessageIds = serializers.ListField(child=serializers.UUIDField())
    deletedSourceMessageIds = serializers.ListField(
        child=serializers.UUIDField(),
        help_text="The sources retention or an erasure has deleted since: no message "
        "answers to these ids any more. The observation stays until it is deleted itself.",
    )
    ticketId = serializers.CharField(allow_null=True)
    reflectionId = serializers.UUIDField(allow_null=True)


class ReflectionOut(_MemoryItemOut):
    generation = serializers.IntegerField()
    sourceObservationIds = serializers.ListField(child=serializers.UUIDField())
    supersededBy = serializers.UUIDField(
        allow_null=True,
        help_text="A superseded reflection: the one the Reflector re-derived it into.",
    )


class ObservationListOut(serializers.Serializer):
    observations = ObservationOut(many=True)


class ReflectionListOut(serializers.Serializer):
    reflections = ReflectionOut(many=True)


class PinOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    messageId = serializers.UUIDField()
    start = serializers.IntegerField(
        allow_null=True, help_text="Character offset into the message; null: all of it."
    )
    end = serializers.IntegerField(allow_null=True, help_text="End offset (exclusive).")
    text = serializers.CharField(help_text="The quote, verbatim, as it is served.")
    tokenCount = serializers.IntegerField()
    createdBy = serializers.CharField(help_text="Who pinned it: 'api_key:<id>' or 'user:<id>'.")
    createdAt = serializers.DateTimeField()


class PinListOut(serializers.Serializer):
    pins = PinOut(many=True)


class TrimmedOut(serializers.Serializer):
    recentMessages = serializers.IntegerField()
    observations = serializers.IntegerField()
    reflections = serializers.IntegerField()


class RecalledTurnOut(serializers.Serializer):
    tier = serializers.ChoiceField(choices=SearchEntry.Kind.choices)
    id = serializers.UUIDField()
    seq = serializers.IntegerField(allow_null=True)
    role = serializers.CharField(allow_null=True)
    name = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField()
    text = serializers.CharField(help_text="The turn, or its stretch around the question's words.")
    score = serializers.FloatField(allow_null=True)


class RecalledOut(serializers.Serializer):
    query = serializers.CharField()
    tokenCount = serializers.IntegerField()
    turns = RecalledTurnOut(many=True)


class ContextOut(serializers.Serializer):
    conversationId = serializers.UUIDField()
    pins = PinOut(many=True, help_text="Served verbatim, first, never trimmed by max_tokens.")
    reflections = ReflectionOut(many=True)
    observations = ObservationOut(many=True)
    recentMessages = RecentMessageOut(many=True)
    maxTokens = serializers.IntegerField(required=False)
    tokenCount = serializers.IntegerField(required=False)
    trimmed = TrimmedOut(required=False)
    recalled = RecalledOut(
        required=False,
        help_text="With ?query=: the turns that best answer it, after everything else.",
    )


class ChatMessageOut(serializers.Serializer):
    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool"])
    content = serializers.CharField()
    name = serializers.RegexField(
        r"^[A-Za-z0-9_-]{1,64}$",
        required=False,
        help_text="Who said it, in the form OpenAI accepts for a chat message's name "
        '(letters, digits, _ and -: "Maria Lopez" is "Maria_Lopez"); absent when the '
        "message names no one. Drop it for a provider that takes no name.",
    )
    tool_calls = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="An assistant turn's calls, from its metadata.toolCalls.",
    )
    tool_call_id = serializers.CharField(
        required=False, help_text="A tool turn answering a call earlier in the array."
    )


class ContextMessagesOut(serializers.Serializer):
    messages = ChatMessageOut(
        many=True,
        help_text="The memory as one system message, then the recent turns (OpenAI chat).",
    )
    maxTokens = serializers.IntegerField(required=False)
    tokenCount = serializers.IntegerField(required=False)
    trimmed = TrimmedOut(required=False)


CONTEXT_JSON = OpenApiResponse(
    PolymorphicProxySerializer(
        component_name="ContextAnyOut",
        serializers=[ContextOut, ContextMessagesOut],
        resource_type_field_name=None,
    ),
    description="format=json (default): the three tiers; format=messages: a chat array.",
)
CONTEXT_TEXT = OpenApiResponse(
    OpenApiTypes.STR, description="format=text: the block the NAMS Python client builds."
)


class ExtractionMessageOut(serializers.Serializer):
    messageId = serializers.UUIDField()
    seq = serializers.IntegerField()
    status = serializers.ChoiceField(
        choices=["stored", "processing", "completed", "failed"],
        help_text="stored: kept, waiting for the Observer's threshold or an observe request; "
        "processing: an Observer run under way will cover it; completed: an observation "
        "covers it; failed: the last run over it failed.",
    )


class ExtractionStatusOut(serializers.Serializer):
    messages = ExtractionMessageOut(many=True)
    summary = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="How many messages of the conversation are in each status (all four keys).",
    )


class ObservationHistoryOut(serializers.Serializer):
    current = ObservationOut()
    versions = MemoryVersionOut(many=True)


class ReflectionHistoryOut(serializers.Serializer):
    current = ReflectionOut()
    versions = MemoryVersionOut(many=True)


class TurnLatencyOut(serializers.Serializer):
    turns = serializers.IntegerField(
        help_text="User messages answered by an assistant message in the last `days` days."
    )
    averageSeconds = serializers.FloatField(
        allow_null=True,
        help_text="Average time from a user message to the next assistant message of the "
        "same conversation, by the messages' createdAt (tool and system messages between "
        "them skipped; of several user messages in a row, from the last).",
    )
    medianSeconds = serializers.FloatField(allow_null=True)
    days = serializers.IntegerField()


class ContextReadsOut(serializers.Serializer):
    reads = serializers.IntegerField(help_text="Context reads counted (GET .../context).")
    compared = serializers.IntegerField(
        help_text="Reads that had a previous read of the same conversation and format."
    )
    stableMemoryBlock = serializers.IntegerField()
    stability = serializers.FloatField(
        allow_null=True,
        help_text="Prompt-cache stability: the share of compared reads whose memory block "
        "(pins, reflections, observations) was byte-identical to the previous read's.",
    )
    notModified = serializers.IntegerField(help_text="Reads answered 304 (If-None-Match).")
    notModifiedShare = serializers.FloatField(allow_null=True)
    bestEffort = serializers.BooleanField(
        help_text="Always true: counted in the cache only, lost when it is flushed or down."
    )


class EscalationMetricsOut(serializers.Serializer):
    open = serializers.IntegerField()
    lastDays = serializers.IntegerField(help_text="Escalations in the last 30 days.")
    perHour = serializers.FloatField(help_text="lastDays spread over its hours.")
    hourly = serializers.DictField(
        child=serializers.IntegerField(), help_text="Escalations in each of the last 48 hours."
    )


class RecallOut(serializers.Serializer):
    share = serializers.FloatField(
        allow_null=True,
        help_text="Recall estimate: the share of the ids, amounts, numbers, dates and names "
        "said by the user and the assistant that memory (pins, reflections, observations) "
        "still holds; for the workspace, the average over its most recent conversations.",
    )
    held = serializers.IntegerField(required=False)
    terms = serializers.IntegerField(required=False)
    conversations = serializers.IntegerField(required=False)
    ofMostRecent = serializers.IntegerField(required=False)


class ApprovalMetricsOut(serializers.Serializer):
    waiting = serializers.IntegerField(help_text="Reflections waiting for approval now.")
    oldestWaitingSeconds = serializers.FloatField(allow_null=True)
    approved = serializers.IntegerField(help_text="Approved in the last windowDays.")
    rejected = serializers.IntegerField(help_text="Rejected in the last windowDays.")
    windowDays = serializers.IntegerField()
    latencyP50Seconds = serializers.FloatField(
        allow_null=True, help_text="Median wait, written to decided, of those decided."
    )
    latencyP90Seconds = serializers.FloatField(allow_null=True)


class MetricsOut(serializers.Serializer):
    scope = serializers.DictField()
    messages = serializers.IntegerField()
    rawTokens = serializers.IntegerField()
    servedTokens = serializers.IntegerField()
    tokensSaved = serializers.IntegerField()
    compression = serializers.DictField()
    tiers = serializers.DictField()
    weaklyGrounded = serializers.DictField(
        help_text="Active observations and reflections below the grounding threshold."
    )
    observer = serializers.DictField()
    reflector = serializers.DictField()
    turnLatency = TurnLatencyOut()
    contextReads = ContextReadsOut()
    escalations = EscalationMetricsOut()
    approval = ApprovalMetricsOut(help_text="Staged approval: what waits, how long it waited.")
    recall = RecallOut()
    series = serializers.DictField()
