"""OpenAPI declarations of the response shapes built in ``memory/wire.py`` (camelCase,
as on the wire).

These serializers only describe; responses are built by the wire functions, and
tests/memory/test_openapi.py validates real responses against this schema.
"""

from __future__ import annotations

from rest_framework import serializers


class ErrorOut(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code, e.g. invalid_limit, not_found.")
    message = serializers.CharField(help_text="What is wrong, in one sentence.")
    field = serializers.CharField(required=False, help_text="The offending field, if one.")


class ConversationOut(serializers.Serializer):
    id = serializers.UUIDField()
    userId = serializers.CharField(allow_null=True)
    workspaceId = serializers.UUIDField()
    title = serializers.CharField(allow_null=True)
    metadata = serializers.DictField()
    messageCount = serializers.IntegerField()
    createdAt = serializers.DateTimeField()
    updatedAt = serializers.DateTimeField()


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


class MessageListOut(serializers.Serializer):
    messages = MessageOut(many=True)


class SearchOut(serializers.Serializer):
    messages = MessageOut(many=True)
    searchType = serializers.CharField()


class WindowOut(serializers.Serializer):
    seq = serializers.IntegerField()
    at = serializers.DateTimeField(allow_null=True)


class _MemoryItemOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField()
    content = serializers.CharField(help_text="The line as it goes into a prompt.")
    text = serializers.CharField()
    priority = serializers.ChoiceField(choices=["high", "medium", "low", "completed"])
    marker = serializers.CharField()
    status = serializers.CharField()
    observedAt = serializers.DateTimeField()
    referencedAt = serializers.DateTimeField(allow_null=True)
    relativeDate = serializers.CharField(help_text="Computed when read, never stored.")
    windowStart = WindowOut(allow_null=True)
    windowEnd = WindowOut(allow_null=True)
    source = serializers.CharField()
    engine = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    tags = serializers.ListField(child=serializers.CharField())
    topics = serializers.ListField(child=serializers.CharField())
    tokenCount = serializers.IntegerField()
    version = serializers.IntegerField()


class ObservationOut(_MemoryItemOut):
    sourceMessageIds = serializers.ListField(child=serializers.UUIDField())
    ticketId = serializers.CharField(allow_null=True)
    reflectionId = serializers.UUIDField(allow_null=True)


class ReflectionOut(_MemoryItemOut):
    generation = serializers.IntegerField()
    sourceObservationIds = serializers.ListField(child=serializers.UUIDField())


class ObservationListOut(serializers.Serializer):
    observations = ObservationOut(many=True)


class ReflectionListOut(serializers.Serializer):
    reflections = ReflectionOut(many=True)


class TrimmedOut(serializers.Serializer):
    recentMessages = serializers.IntegerField()
    observations = serializers.IntegerField()
    reflections = serializers.IntegerField()


class ContextOut(serializers.Serializer):
    conversationId = serializers.UUIDField()
    reflections = ReflectionOut(many=True)
    observations = ObservationOut(many=True)
    recentMessages = MessageOut(many=True)
    maxTokens = serializers.IntegerField(required=False)
    tokenCount = serializers.IntegerField(required=False)
    trimmed = TrimmedOut(required=False)


class ExtractionMessageOut(serializers.Serializer):
    messageId = serializers.UUIDField()
    seq = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["pending", "completed", "failed"])


class ExtractionStatusOut(serializers.Serializer):
    messages = ExtractionMessageOut(many=True)
    summary = serializers.DictField(child=serializers.IntegerField())


class ObservationVersionOut(serializers.Serializer):
    version = serializers.IntegerField()
    text = serializers.CharField()
    priority = serializers.CharField()
    change = serializers.CharField()
    reason = serializers.CharField()
    changedBy = serializers.CharField()
    changedAt = serializers.DateTimeField()


class ObservationHistoryOut(serializers.Serializer):
    current = ObservationOut()
    versions = ObservationVersionOut(many=True)
