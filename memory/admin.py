from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from memory.models import ApiKey, Conversation, Message, Observation, Reflection, Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "observer_threshold", "reflector_threshold", "created_at"]


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "workspace", "scope", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "key_hash", "last_used_at", "created_at"]


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["id", "workspace", "user_id", "title", "last_seq", "updated_at"]
    list_filter = ["workspace"]
    search_fields = ["user_id", "title"]


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["conversation", "seq", "role", "token_count", "created_at"]
    list_select_related = ["conversation"]

    def has_delete_permission(self, request: HttpRequest, obj: Message | None = None) -> bool:
        # Messages go with their conversation, by retention or by erasure, each with its
        # receipt; deleting one here would skip those and break the pins that quote it.
        return False


@admin.register(Observation)
class ObservationAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "priority", "status", "source", "observed_at"]


@admin.register(Reflection)
class ReflectionAdmin(admin.ModelAdmin):
    list_display = ["id", "conversation", "generation", "status", "observed_at"]
