from __future__ import annotations

from django.contrib import admin

from dashboard.models import Membership


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["workspace", "role"]
    list_select_related = ["user", "workspace"]
    search_fields = ["user__username", "workspace__name"]
