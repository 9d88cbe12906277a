"""Accounts in ``/admin/``: every change takes a reason and is audited in each workspace
it touches (governance/audit/admin.py). Role grants are tenancy's (tenancy/admin.py).
Sign-in lockouts are shown, not changed, here."""

from __future__ import annotations

from typing import Any

from axes.models import AccessAttempt  # type: ignore[import-untyped]
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import Group

from governance.audit.admin import AuditedAdmin, ReadOnlyAdmin
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


@admin.register(AccessAttempt)
class AccessAttemptAdmin(ReadOnlyAdmin):
    """The failed sign-ins django-axes counts (config/settings/base.py, "Sign-in
    throttling"), in place of axes' own admin (AXES_ENABLE_ADMIN), whose rows a deletion
    would remove unaudited."""

    read_only_notice = (
        "Read-only here. To lift a lockout before its cool-off: manage.py "
        "axes_reset_username NAME, axes_reset_ip ADDRESS, or axes_reset for all."
    )
    list_display = ("attempt_time", "username", "ip_address", "failures_since_start", "path_info")
    list_filter = ("path_info",)
    search_fields = ("username", "ip_address")
    ordering = ("-attempt_time",)
    fields = ("attempt_time", "username", "ip_address", "failures_since_start", "path_info")
