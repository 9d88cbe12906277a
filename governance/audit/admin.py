"""What ``/admin/`` may change, and how it is audited.

Memory and governance records are read-only here: they change on the dashboard or over
the API, where each change takes a reason and goes through the service that audits it.
Configuration records (workspaces, API keys, role grants, accounts) may change here,
each save or deletion with a required reason and one audit event per workspace it
touches, written in the admin's transaction, so the change and its event commit
together. The bulk "delete selected" action is off: one deletion, one reason."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.core.exceptions import PermissionDenied
from django.db import models
from django.forms import BaseForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from core.actors import Actor, ActorType
from governance.audit.writer import audit_record

REASON_FIELD = "audit_reason"
REASON_HELP = "Why you are making this change. Kept in the audit trail."


def admin_actor(request: HttpRequest) -> Actor:
    """The audit identity of a ``/admin/`` request. Its role is the user's standing on
    the site, not a workspace role: only staff reach the admin."""
    user = request.user
    return Actor(
        type=ActorType.USER,
        id=str(user.pk),
        role="superuser" if user.is_superuser else "staff",
        name=user.get_username(),
        request_id=request.headers.get("X-Request-Id", "")[:100] or uuid.uuid4().hex,
        ip_address=request.META.get("REMOTE_ADDR") or None,
    )


class ReadOnlyAdmin(admin.ModelAdmin):
    """Browse only. ``read_only_notice`` tells the reader where the change is made."""

    read_only_notice = (
        "Read-only here: memory changes on the dashboard or over the API, with a reason "
        "that goes to the audit trail."
    )
    change_list_template = "admin/memdesk/read_only_change_list.html"
    change_form_template = "admin/memdesk/read_only_change_form.html"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "read_only_notice": self.read_only_notice}
        return super().changelist_view(request, extra_context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        extra_context = {**(extra_context or {}), "read_only_notice": self.read_only_notice}
        return super().change_view(request, object_id, form_url, extra_context)


class AuditedAdmin(admin.ModelAdmin):
    """Every save and deletion takes a reason and writes ``<audit_target_type>.create``,
    ``.update`` or ``.delete`` with the changed ``audit_fields`` (before and after) to
    the chain of each workspace ``audit_workspace_ids`` names. A save that changes none
    of them is not recorded. Subclasses that have a service for the change override
    ``audited_save`` / ``audited_delete`` to call it, so the event is the one every
    other door writes."""

    audit_target_type: str = ""
    audit_fields: tuple[str, ...] = ()
    delete_confirmation_template = "admin/memdesk/audited_delete_confirmation.html"

    # --- the reason ------------------------------------------------------------------

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        base = kwargs.get("form") or self._base_form(obj)
        kwargs["form"] = type(
            f"Audited{base.__name__}",
            (base,),
            {
                REASON_FIELD: forms.CharField(
                    label="Reason for this change",
                    max_length=500,
                    help_text=REASON_HELP,
                    widget=forms.TextInput(attrs={"size": 60}),
                )
            },
        )
        return super().get_form(request, obj, change=change, **kwargs)

    def _base_form(self, obj: Any) -> type[forms.ModelForm]:
        # UserAdmin has its own form for adding.
        add_form = getattr(self, "add_form", None)
        return add_form if obj is None and add_form is not None else self.form

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        named = flatten_fieldsets(fieldsets)
        if REASON_FIELD in named:
            return fieldsets
        return [*fieldsets, ("Audit", {"fields": [REASON_FIELD]})]

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    # --- what is recorded --------------------------------------------------------------

    def audit_workspace_ids(self, obj: Any) -> list[Any]:
        """The workspaces whose audit trail records a change to ``obj``."""
        return [obj.workspace_id]

    def audit_snapshot(self, obj: Any) -> dict[str, Any]:
        snapshot: dict[str, Any] = {}
        for name in self.audit_fields:
            field = obj._meta.get_field(name)
            if field.many_to_many:
                snapshot[name] = (
                    sorted(str(pk) for pk in getattr(obj, name).values_list("pk", flat=True))
                    if obj.pk
                    else []
                )
            else:
                snapshot[name] = field.value_from_object(obj)
        return snapshot

    def audit_write(
        self,
        request: HttpRequest,
        *,
        obj: Any,
        verb: str,
        workspace_ids: Iterable[Any],
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> None:
        if before is not None and after is not None:
            changed = [name for name in after if before.get(name) != after[name]]
            if not changed:
                return
            before = {name: before.get(name) for name in changed}
            after = {name: after[name] for name in changed}
        actor = admin_actor(request)
        for workspace_id in dict.fromkeys(workspace_ids):
            audit_record(
                workspace_id=workspace_id,
                actor=actor,
                action=f"{self.audit_target_type}.{verb}",
                target_type=self.audit_target_type,
                target_id=str(obj.pk),
                before=before,
                after=after,
                reason=reason,
            )

    # --- saves -----------------------------------------------------------------------------

    def save_model(self, request: HttpRequest, obj: Any, form: BaseForm, change: bool) -> None:
        # The admin's change and delete views run in a transaction: the save, its related
        # rows and the audit event commit together.
        self.audited_save(request, obj, form, change, form.cleaned_data[REASON_FIELD].strip())

    def audited_save(
        self, request: HttpRequest, obj: Any, form: BaseForm, change: bool, reason: str
    ) -> None:
        before = None
        workspaces: list[Any] = []
        if change:
            stored = type(obj)._default_manager.get(pk=obj.pk)
            before = self.audit_snapshot(stored)
            workspaces = self.audit_workspace_ids(stored)
        obj.save()
        # Written after the many-to-many fields are saved (save_related), so they show.
        request._audit_pending = (obj, before, workspaces, reason)  # type: ignore[attr-defined]  # per-request hand-over

    def save_related(
        self, request: HttpRequest, form: BaseForm, formsets: Any, change: bool
    ) -> None:
        super().save_related(request, form, formsets, change)
        pending = getattr(request, "_audit_pending", None)
        if pending is None:
            return
        obj, before, workspaces, reason = pending
        del request._audit_pending  # type: ignore[attr-defined]  # per-request hand-over
        self.audit_write(
            request,
            obj=obj,
            verb="update" if change else "create",
            workspace_ids=[*workspaces, *self.audit_workspace_ids(obj)],
            before=before,
            after=self.audit_snapshot(obj),
            reason=reason,
        )

    # --- deletions ---------------------------------------------------------------------

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        # Refused deletions stay refused (403) by the admin's own check, reason or not.
        if request.method == "POST" and self.has_delete_permission(request):
            reason = request.POST.get(REASON_FIELD, "").strip()
            if not reason:
                messages.error(request, "A reason is required to delete this; nothing changed.")
                return HttpResponseRedirect(request.get_full_path())
            request._audit_reason = reason  # type: ignore[attr-defined]  # read by delete_model
        return super().delete_view(request, object_id, extra_context)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        reason = getattr(request, "_audit_reason", "")
        if not reason:
            raise PermissionDenied("A deletion in /admin/ needs a reason.")
        self.audited_delete(request, obj, reason)

    def audited_delete(self, request: HttpRequest, obj: Any, reason: str) -> None:
        self.audit_write(
            request,
            obj=obj,
            verb="delete",
            workspace_ids=self.audit_workspace_ids(obj),
            before=self.audit_snapshot(obj),
            after=None,
            reason=reason,
        )
        obj.delete()

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet[Any]) -> None:
        # Only the bulk action calls this, and it is off: each deletion has its reason.
        raise PermissionDenied("Delete these one at a time, each with its reason.")
