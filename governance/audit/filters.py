"""The audit events' filters, defined once: the compliance audit log page and its export
read them from the query string as they are named here (so a filtered view can be
bookmarked, shared and exported as it is); the API reads them under its own camelCase
names (``governance/api/audit.py``) and refuses a bad value with a 400.

Each filter means the same on both edges:

- ``action`` is a prefix (``observation.`` or ``erasure``); ``action_exact`` a whole name
  (``redaction.rescan`` must not also match ``redaction.rescan_request``).
- ``actor`` is what a person types: a user name, an API key's name, an id, or
  ``system``; ``actor_type`` and ``actor_id`` are the recorded values.
- ``since`` and ``until`` are calendar days, ``until`` inclusive (the page's date
  pickers); ``created_from`` and ``created_before`` are instants, the end exclusive (the
  API's ISO 8601 ``since`` and ``until``).
- ``conversation`` finds the events about a conversation and the items it holds; a
  conversation that is not in the workspace matches nothing.
- ``target_type`` and ``target_id`` are the recorded values.

An invalid value is left out of the filtering and reported by the form (the page shows
it beside its field; the API answers 400 naming it): the valid filters still apply."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet
from django.utils import timezone

from governance.models import AuditEvent, ContextRead
from memory.models import Conversation
from tenancy.models import ApiKey, Workspace

AUDIT_TARGET_TYPES = (
    "conversation",
    "message",
    "observation",
    "reflection",
    "pin",
    "redaction_finding",
    "redaction_policy",
    "retention_policy",
    "retention_sweep",
    "legal_hold",
    "erasure_request",
    "rescan_run",
    "pseudonym",
    "api_key",
    "workspace",
)
UNKNOWN_CONVERSATION = "No conversation with this id in this workspace."


class AuditFilterForm(forms.Form):
    """The form the filter set builds its fields on: the rule across two fields, and the
    target types the page offers as suggestions."""

    target_types = AUDIT_TARGET_TYPES

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        start, end = data.get("since"), data.get("until")
        if start and end and start > end:
            self.add_error("until", "The end date is before the start date.")
        return data


def audit_actor_q(*, workspace: Workspace, actor: str) -> Q:
    """The events of the actor a person typed: a user name, an API key's name, an id, or
    ``system``."""
    wanted = Q(actor_id=actor)
    if actor.lower() == "system":
        wanted |= Q(actor_type=AuditEvent.ActorType.SYSTEM)
    users = get_user_model().objects.filter(username__iexact=actor).values_list("pk", flat=True)
    for pk in users:
        wanted |= Q(actor_type=AuditEvent.ActorType.USER, actor_id=str(pk))
    keys = ApiKey.objects.filter(workspace=workspace, name__iexact=actor).values_list(
        "pk", flat=True
    )
    for pk in keys:
        wanted |= Q(actor_type=AuditEvent.ActorType.API_KEY, actor_id=str(pk))
    return wanted


def audit_conversation_q(*, conversation: Conversation) -> Q:
    """The events about one conversation: on the conversation itself, on the messages,
    observations and reflections it holds now, and on anything whose recorded state names
    it (a hold, a scan). Items deleted before the search are found through the events
    that name the conversation only."""
    ids = [str(conversation.pk)]
    for related in ("messages", "observations", "reflections"):
        ids += [str(pk) for pk in getattr(conversation, related).values_list("pk", flat=True)]
    cid = str(conversation.pk)
    return (
        Q(target_id__in=ids)
        | Q(after__conversationId=cid)
        | Q(before__conversationId=cid)
        | Q(after__conversation_id=cid)
    )


def _day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):  # type: ignore[misc]  # untyped base
    """An ISO 8601 instant, compared in UTC: Python reads offsets up to 23:59, PostgreSQL
    refuses those beyond 15:59 ("+21:56" was a 500)."""

    def filter(self, qs: QuerySet, value: datetime | None) -> QuerySet:
        filtered: QuerySet = super().filter(
            qs, value.astimezone(UTC) if value is not None else value
        )
        return filtered


class AuditEventFilter(django_filters.FilterSet):  # type: ignore[misc]  # untyped base
    """One workspace's audit events, filtered. Build it with the query's values (the
    page's ``request.GET``, or the API's values under these names) and the workspace;
    ``audit_event_list`` and ``audit_export_lines`` read ``qs``."""

    action = django_filters.CharFilter(
        field_name="action",
        lookup_expr="startswith",
        label="Action starts with",
        max_length=100,
        widget=forms.TextInput(attrs={"placeholder": "e.g. observation. or erasure"}),
    )
    action_exact = django_filters.CharFilter(field_name="action", label="Action")
    actor = django_filters.CharFilter(
        method="filter_actor",
        label="Actor",
        max_length=200,
        help_text="A user name, an API key's name, an id, or system.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    actor_type = django_filters.ChoiceFilter(
        field_name="actor_type", choices=AuditEvent.ActorType.choices, label="Actor type"
    )
    actor_id = django_filters.CharFilter(field_name="actor_id", label="Actor id")
    since = django_filters.DateFilter(
        method="filter_since", label="From", widget=forms.DateInput(attrs={"type": "date"})
    )
    until = django_filters.DateFilter(
        method="filter_until",
        label="To (inclusive)",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    created_from = UtcIsoDateTimeFilter(
        field_name="created_at", lookup_expr="gte", label="At or after"
    )
    created_before = UtcIsoDateTimeFilter(field_name="created_at", lookup_expr="lt", label="Before")
    conversation = django_filters.UUIDFilter(
        method="filter_conversation",
        label="Conversation id",
        error_messages={"invalid": "Paste a conversation id (a UUID) from the conversation page."},
    )
    target_type = django_filters.CharFilter(
        field_name="target_type",
        label="Target type",
        max_length=50,
        widget=forms.TextInput(attrs={"list": "audit-target-types", "autocomplete": "off"}),
    )
    target_id = django_filters.CharFilter(field_name="target_id", label="Target id", max_length=200)

    class Meta:
        model = AuditEvent
        fields: list[str] = []
        form = AuditFilterForm

    def __init__(self, data: Any, *, workspace: Workspace) -> None:
        super().__init__(data, queryset=AuditEvent.objects.filter(workspace=workspace))
        self.workspace = workspace
        # Set while filtering: the page says so beside the field.
        self.unknown_conversation = False

    def filter_actor(self, queryset: QuerySet[AuditEvent], name: str, value: str) -> QuerySet:
        return queryset.filter(audit_actor_q(workspace=self.workspace, actor=value))

    def filter_since(self, queryset: QuerySet[AuditEvent], name: str, value: date) -> QuerySet:
        return queryset.filter(created_at__gte=_day_start(value))

    def filter_until(self, queryset: QuerySet[AuditEvent], name: str, value: date) -> QuerySet:
        return queryset.filter(created_at__lt=_day_start(value + timedelta(days=1)))

    def filter_conversation(
        self, queryset: QuerySet[AuditEvent], name: str, value: uuid.UUID
    ) -> QuerySet:
        conversation = Conversation.objects.filter(pk=value, workspace=self.workspace).first()
        if conversation is None:
            # Another workspace's conversation is "not there", like one that never was.
            self.unknown_conversation = True
            return queryset.none()
        return queryset.filter(audit_conversation_q(conversation=conversation))

    def context_reads(self) -> QuerySet[ContextRead]:
        """The workspace's read ledger rows under the filters that apply to a read: the
        conversation and the days (a read has no action, actor or target), in the order
        they were served."""
        self.is_valid()
        data = self.form.cleaned_data
        reads = ContextRead.objects.filter(workspace=self.workspace)
        if data.get("conversation"):  # another workspace's matches none of its rows
            reads = reads.filter(conversation_id=data["conversation"])
        if data.get("since"):
            reads = reads.filter(served_at__gte=_day_start(data["since"]))
        if data.get("until"):
            reads = reads.filter(served_at__lt=_day_start(data["until"] + timedelta(days=1)))
        if data.get("created_from"):
            reads = reads.filter(served_at__gte=data["created_from"].astimezone(UTC))
        if data.get("created_before"):
            reads = reads.filter(served_at__lt=data["created_before"].astimezone(UTC))
        return reads.order_by("served_at", "writer", "writer_seq")

    def query(self) -> dict[str, str]:
        """The valid filters that hold a value, as the query string that repeats them
        (for the page's paging links and its export)."""
        self.is_valid()
        data = self.form.cleaned_data
        return {
            name: str(value)
            for name, value in data.items()
            if name not in self.form.errors and value not in (None, "")
        }
