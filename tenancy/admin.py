"""Workspaces, API keys and role grants in ``/admin/``: every change takes a reason and is
audited in the workspace it touches (governance/audit/admin.py). Keys are created and revoked,
and the fidelity is changed, on the dashboard, where those changes are audited too."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.forms import BaseForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.crypto import salted_hmac
from django.utils.html import format_html
from django.utils.safestring import SafeString

from governance.audit.admin import AuditedAdmin, admin_actor
from tenancy.models import ApiKey, Membership, Workspace
from tenancy.services import membership_grant, membership_revoke, membership_role_change


def _secret_fingerprint(value: str) -> str:
    # The trail shows that a secret changed, never the secret.
    if not value:
        return ""
    return salted_hmac("memdesk.audit.secret", value, algorithm="sha256").hexdigest()[:12]


@admin.register(Workspace)
class WorkspaceAdmin(AuditedAdmin):
    list_display = ["name", "observer_threshold", "reflector_threshold", "fidelity", "created_at"]
    # A fidelity or context budget change needs a reason and an audit event, which this
    # form cannot give: the fidelity is shown here and changed on the dashboard (or over
    # the API), the budget and staged approval over the API (approval on the dashboard too).
    exclude = ["fidelity", "context_max_tokens", "approval", "approval_by_tag"]
    readonly_fields = ["fidelity_in_force"]
    # An LLM base URL typed without a scheme is an https one (Django 6's default too).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    audit_target_type = "workspace"
    audit_fields = (
        "name",
        "observer_threshold",
        "reflector_threshold",
        "engine",
        "llm_base_url",
        "llm_model",
        "llm_api_key",
    )

    def audit_workspace_ids(self, obj: Workspace) -> list[Any]:
        return [obj.pk]

    def audit_snapshot(self, obj: Workspace) -> dict[str, Any]:
        snapshot = super().audit_snapshot(obj)
        snapshot["llm_api_key"] = _secret_fingerprint(snapshot["llm_api_key"])
        return snapshot

    def has_delete_permission(self, request: HttpRequest, obj: Workspace | None = None) -> bool:
        # A workspace's audit trail outlives what it audits (and protects the row).
        return False

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
class ApiKeyAdmin(AuditedAdmin):
    list_display = ["prefix", "name", "workspace", "scope", "last_used_at", "revoked_at"]
    readonly_fields = ["workspace", "prefix", "key_hash", "last_used_at", "created_at", "revoked"]
    exclude = ["revoked_at"]
    audit_target_type = "api_key"
    audit_fields = ("name", "scope")

    @admin.display(description="Revoked")
    def revoked(self, api_key: ApiKey) -> SafeString:
        return format_html(
            "{}. Keys are created (the raw key is shown once) and revoked on the dashboard's "
            '<a href="{}">API keys</a> page or with <code>manage.py create_api_key</code>.',
            api_key.revoked_at or "No",
            reverse("dashboard:api_keys"),
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ApiKey | None = None) -> bool:
        # Revoke instead: the audit trail names keys by id, and their events stay.
        return False


@admin.register(Membership)
class MembershipAdmin(AuditedAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["workspace", "role"]
    list_select_related = ["user", "workspace"]
    search_fields = ["user__username", "workspace__name"]
    audit_target_type = "membership"

    def get_readonly_fields(self, request: HttpRequest, obj: Membership | None = None) -> Any:
        # A grant is for one user in one workspace; another pair is another grant.
        return ["user", "workspace", "created_at"] if obj else ["created_at"]

    def audited_save(
        self, request: HttpRequest, obj: Membership, form: BaseForm, change: bool, reason: str
    ) -> None:
        # The same services, and so the same events, as every other door.
        actor = admin_actor(request)
        if change:
            saved = membership_role_change(
                membership=obj, role=obj.role, actor=actor, reason=reason
            )
        else:
            saved = membership_grant(
                user=obj.user, workspace=obj.workspace, role=obj.role, actor=actor, reason=reason
            )
        obj.pk = saved.pk

    def audited_delete(self, request: HttpRequest, obj: Membership, reason: str) -> None:
        membership_revoke(membership=obj, actor=admin_actor(request), reason=reason)
