"""OpenAPI declarations of the response shapes built in ``memory/wire.py`` (camelCase,
as on the wire).

These serializers only describe; responses are built by the wire functions, and
tests/memory/test_openapi.py validates real responses against this schema.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer
from rest_framework import serializers

from memory.engines.base import FIDELITIES
from memory.wire import NAMS_ROLES


class ConversationOut(serializers.Serializer):
    id = serializers.UUIDField()
    userId = serializers.CharField(allow_null=True)
    workspaceId = serializers.UUIDField()
    title = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    messageCount = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()
    piiFound = serializers.BooleanField(
        help_text="Personal data was detected in this conversation (in any tier, redacted "
        "or not): the scan of its messages, or the redaction of its memory."
    )


class ConversationPageOut(serializers.Serializer):
    conversations = ConversationOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class MessageOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool"])
    content = serializers.CharField()
    createdAt = serializers.DateTimeField()
    tokenCount = serializers.IntegerField()
    metadata = serializers.DictField()
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


class EscalationOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    reason = serializers.CharField()
    metadata = serializers.DictField()
    status = serializers.ChoiceField(choices=["open", "resolved"])
    createdBy = serializers.CharField(help_text="'api_key:<id>' or 'user:<id>'.")
    createdAt = serializers.DateTimeField()
    resolvedBy = serializers.CharField(allow_null=True)
    resolvedAt = serializers.DateTimeField(allow_null=True)
    resolutionNote = serializers.CharField(
        allow_null=True, help_text="What the person who resolved it wrote."
    )


class EscalationListOut(serializers.Serializer):
    escalations = EscalationOut(many=True)


class TrimmedOut(serializers.Serializer):
    recentMessages = serializers.IntegerField()
    observations = serializers.IntegerField()
    reflections = serializers.IntegerField()


class ContextOut(serializers.Serializer):
    conversationId = serializers.UUIDField()
    pins = PinOut(many=True, help_text="Served verbatim, first, never trimmed by max_tokens.")
    reflections = ReflectionOut(many=True)
    observations = ObservationOut(many=True)
    recentMessages = RecentMessageOut(many=True)
    maxTokens = serializers.IntegerField(required=False)
    tokenCount = serializers.IntegerField(required=False)
    trimmed = TrimmedOut(required=False)


class ChatMessageOut(serializers.Serializer):
    role = serializers.ChoiceField(choices=["user", "assistant", "system", "tool"])
    content = serializers.CharField()
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


class MemoryVersionOut(serializers.Serializer):
    version = serializers.IntegerField()
    text = serializers.CharField()
    priority = serializers.CharField()
    change = serializers.CharField()
    reason = serializers.CharField()
    changedBy = serializers.CharField()
    changedAt = serializers.DateTimeField()
    diff = serializers.CharField(help_text="Unified diff to the next version's text.")


class ObservationHistoryOut(serializers.Serializer):
    current = ObservationOut()
    versions = MemoryVersionOut(many=True)


class ReflectionHistoryOut(serializers.Serializer):
    current = ReflectionOut()
    versions = MemoryVersionOut(many=True)


class RunOut(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["observer", "reflector"])
    conversationId = serializers.UUIDField()
    status = serializers.ChoiceField(
        choices=["queued", "running", "retrying", "succeeded", "failed", "cancelled"],
        help_text="queued: waiting for a worker; running; retrying: an attempt failed with "
        "a retryable error (error says how) and the next is at nextAttemptAt; then "
        "succeeded, failed (after the last attempt, or at once for an error a retry "
        "cannot fix) or cancelled.",
    )
    trigger = serializers.ChoiceField(choices=["threshold", "manual", "sweeper", "correction"])
    engine = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    promptVersion = serializers.CharField(allow_null=True)
    tokensIn = serializers.IntegerField()
    tokensOut = serializers.IntegerField()
    itemsIn = serializers.IntegerField()
    itemsOut = serializers.IntegerField()
    durationMs = serializers.IntegerField(allow_null=True)
    attempts = serializers.IntegerField(help_text="Attempts started so far.")
    maxAttempts = serializers.IntegerField(help_text="Attempts before a run fails.")
    nextAttemptAt = serializers.DateTimeField(
        allow_null=True, help_text="When a retrying run is tried again."
    )
    error = serializers.CharField(
        allow_null=True,
        help_text="The last error in words (a status code, a timeout, a rule the output "
        "broke), never the content.",
    )
    createdAt = serializers.DateTimeField()
    startedAt = serializers.DateTimeField(allow_null=True)
    finishedAt = serializers.DateTimeField(allow_null=True)
    windowStartSeq = serializers.IntegerField(required=False, allow_null=True)
    windowEndSeq = serializers.IntegerField(required=False, allow_null=True)
    currentTask = serializers.CharField(required=False, allow_null=True)
    suggestedResponse = serializers.CharField(required=False, allow_null=True)
    generation = serializers.IntegerField(required=False, allow_null=True)


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
    recall = RecallOut()
    series = serializers.DictField()


class WorkspaceSettingsOut(serializers.Serializer):
    workspaceId = serializers.UUIDField()
    fidelity = serializers.ChoiceField(
        choices=FIDELITIES,
        help_text="How much detail the Observer keeps, in force now: compact (the smallest "
        "memory, the gist), balanced, or detailed (more of what was said, the assistant's "
        "answers included; a bigger memory).",
    )
    fidelitySource = serializers.ChoiceField(
        choices=["workspace", "default"],
        help_text="workspace: chosen for this workspace; default: follows fidelityDefault.",
    )
    fidelityDefault = serializers.ChoiceField(
        choices=FIDELITIES, help_text="The server's default (MEMDESK_OBSERVER_FIDELITY)."
    )
    fidelityLevels = serializers.ListField(
        child=serializers.ChoiceField(choices=FIDELITIES),
        help_text="Every level, from the smallest memory to the most detailed.",
    )
    observerThreshold = serializers.IntegerField(
        help_text="Unobserved message tokens that trigger the Observer, in force now."
    )
    reflectorThreshold = serializers.IntegerField(
        help_text="Active observation tokens that trigger the Reflector, in force now."
    )
    engine = serializers.CharField(help_text="The Observer and Reflector engine in force.")
    contextMaxTokens = serializers.IntegerField(
        allow_null=True,
        help_text="The token budget of a context read that names no max_tokens; null: none.",
    )


class ReasoningStepOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    stepNumber = serializers.IntegerField(help_text="1 for the conversation's first step.")
    reasoning = serializers.CharField(allow_blank=True)
    actionTaken = serializers.CharField(allow_blank=True)
    result = serializers.CharField(allow_null=True)
    afterSeq = serializers.IntegerField(
        help_text="The seq of the last message before the step (0: before any message)."
    )
    metadata = serializers.DictField()
    createdAt = serializers.DateTimeField()


class ReasoningStepListOut(serializers.Serializer):
    steps = ReasoningStepOut(many=True)


class ToolCallOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    stepId = serializers.UUIDField(allow_null=True)
    toolName = serializers.CharField()
    input = serializers.CharField(allow_blank=True, help_text="As sent: JSON text or plain text.")
    output = serializers.CharField(allow_null=True, help_text="As sent: JSON text or plain text.")
    status = serializers.ChoiceField(
        choices=["pending", "success", "failure", "error", "timeout", "cancelled"]
    )
    durationMs = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    afterSeq = serializers.IntegerField(
        help_text="The seq of the last message before the call (0: before any message)."
    )
    metadata = serializers.DictField()
    createdAt = serializers.DateTimeField()


class ReasoningTraceOut(serializers.Serializer):
    conversationId = serializers.UUIDField()
    steps = ReasoningStepOut(many=True)
    toolCalls = ToolCallOut(many=True)
