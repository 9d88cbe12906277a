"""Role grants and accounts in ``/admin/``: every change takes a reason and is audited
in each workspace it touches (governance/admin.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group
from django.forms import BaseForm
from django.http import HttpRequest

from dashboard.models import Membership
from dashboard.services import membership_grant, membership_revoke, membership_role_change
from governance.admin import AuditedAdmin, admin_actor
from memory.models import Workspace

User = get_user_model()


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


# Memdesk's roles are memberships; groups would only grant admin-site permissions,
# which the User form already holds (and audits).
admin.site.unregister(Group)
admin.site.unregister(User)


@admin.register(User)
class AuditedUserAdmin(AuditedAdmin, UserAdmin):
    """Accounts. A change is recorded in every workspace the account has a role in,
    and, when it is or becomes a superuser (admin in every workspace), in every
    workspace. An account with no role and no superuser flag reaches no memory: its
    creation is recorded when it is given a role (a membership)."""

    audit_target_type = "user"
    audit_fields = ("username", "is_active", "is_staff", "is_superuser", "user_permissions")

    def audit_workspace_ids(self, obj: Any) -> list[Any]:
        if obj.is_superuser:
            return list(Workspace.objects.order_by("created_at").values_list("pk", flat=True))
        return list(
            Membership.objects.filter(user_id=obj.pk)
            .order_by("created_at")
            .values_list("workspace_id", flat=True)
        )
