"""Accounts in ``/admin/``: every change takes a reason and is audited in each workspace
it touches (governance/audit/admin.py). Role grants are tenancy's (tenancy/admin.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group

from governance.audit.admin import AuditedAdmin
from tenancy.models import Membership, Workspace

User = get_user_model()


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
