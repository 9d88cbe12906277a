from __future__ import annotations

from django.contrib import admin
from django.db import models
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from memory.models import ApiKey, Conversation, Message, Observation, Reflection, Workspace


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "observer_threshold", "reflector_threshold", "fidelity", "created_at"]
    # A fidelity change needs a reason and an audit event, which this form cannot give:
    # it is shown here and changed on the dashboard (or over the API).
    exclude = ["fidelity"]
    readonly_fields = ["fidelity_in_force"]
    # An LLM base URL typed without a scheme is an https one (Django 6's default too).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="Fidelity")
    def fidelity_in_force(self, workspace: Workspace) -> SafeString:
        source = "chosen for this workspace" if workspace.fidelity else "the server's default"
        return format_html(
            '{} ({}). Change it with a reason on the dashboard\'s <a href="{}">Memory '
            "settings</a> page, in this workspace: changes there are audited.",
            workspace.effective_fidelity,
            source,
            reverse("dashboard:memory_settings"),
        )


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
