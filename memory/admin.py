from __future__ import annotations

from django.contrib import admin

from governance.audit.admin import ReadOnlyAdmin
from memory.models import (
    Conversation,
    Message,
    Observation,
    ReasoningStep,
    Reflection,
    ToolCall,
)

MEMORY_NOTICE = (
    "Read-only here: memory changes on the dashboard (or over the API) with a reason, "
    "through the service that keeps its history and writes its audit event."
)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ["id", "workspace", "user_id", "title", "last_seq", "updated_at"]
    list_filter = ["workspace"]
    search_fields = ["user_id", "title"]
    read_only_notice = MEMORY_NOTICE


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ["conversation", "seq", "role", "token_count", "created_at"]
    list_select_related = ["conversation"]
    # Messages go with their conversation, by retention or by erasure, each with its
    # receipt; a change here would skip those and break the pins that quote them.
    read_only_notice = MEMORY_NOTICE


@admin.register(Observation)
class ObservationAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "priority", "status", "source", "observed_at"]
    read_only_notice = MEMORY_NOTICE


@admin.register(Reflection)
class ReflectionAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "generation", "status", "observed_at"]
    read_only_notice = MEMORY_NOTICE


@admin.register(ReasoningStep)
class ReasoningStepAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "step_number", "after_seq", "created_at"]
    list_select_related = ["conversation"]
    # Steps go with their conversation, by retention or by erasure, with receipts.
    read_only_notice = MEMORY_NOTICE


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ["id", "conversation", "tool_name", "status", "duration_ms", "created_at"]
    list_select_related = ["conversation"]
    read_only_notice = MEMORY_NOTICE
