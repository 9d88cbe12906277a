"""Dashboard forms: input validation and labels only. The rules (a reason is required,
what a revert restores) live in the memory services, which the views call. The fields
every page's forms share (``reason_field``, ``add_service_error``) are here; the
compliance pages' forms are ``dashboard.compliance.forms``.

One module for the product pages rather than one per page: its forms are short, and
several serve more than one page (``ReasonForm`` deletes notes, unpins and removes
members)."""

from __future__ import annotations

import re
from datetime import datetime, time
from typing import Any

from django import forms
from django.conf import settings
from django.forms.boundfield import BoundWidget
from django.utils import timezone

from core.errors import MemdeskError
from dashboard.selectors.conversations import DEFAULT_SORT, SORTS, ConversationFilters
from memory.engines.base import FIDELITIES
from memory.models import Observation, Priority, Reflection
from memory.services.escalations import ESCALATION_NOTE_MAX_CHARS
from memory.services.notes import NOTE_TEXT_MAX_CHARS
from tenancy.models import ApiKey, Role, Workspace

REASON_HELP = "Why this change? It is kept with the history and in the audit trail."


def reason_field(
    *, required_message: str = "Give a reason: every change to memory needs one."
) -> forms.CharField:
    # The services refuse an empty reason too; requiring it here puts the error next to
    # the field before anything is sent to them.
    return forms.CharField(
        label="Reason",
        max_length=1000,
        help_text=REASON_HELP,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        error_messages={"required": required_message},
    )


def expected_version_field() -> forms.IntegerField:
    # The note's version when the form was opened: the service refuses the change when
    # someone else's was saved since, which this form would otherwise silently undo.
    return forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


def add_service_error(
    form: forms.Form, error: MemdeskError, *, renames: dict[str, str] | None = None
) -> None:
    """Show a service's refusal next to the field it names (``renames`` maps a service
    field name to the form's, where they differ), or above the form."""
    name = re.split(r"[.\[]", error.field or "")[0]
    field = (renames or {}).get(name, name)
    form.add_error(field if field in form.fields else None, error.message)


class ConversationFilterForm(forms.Form):
    q = forms.CharField(
        label="Search",
        required=False,
        max_length=200,
        widget=forms.SearchInput(attrs={"placeholder": "Title, end user, id or message text"}),
    )
    user = forms.CharField(
        label="End user",
        required=False,
        max_length=255,
        widget=forms.TextInput(attrs={"list": "end-users", "autocomplete": "off"}),
    )
    active_from = forms.DateField(
        label="Active from", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    active_to = forms.DateField(
        label="Active to", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    pii = forms.BooleanField(label="PII found", required=False)
    hold = forms.BooleanField(label="On legal hold", required=False)
    grounding = forms.BooleanField(label="Notes to check against their sources", required=False)
    failed = forms.BooleanField(label="Latest pipeline run failed", required=False)
    retrying = forms.BooleanField(label="Pipeline run retrying", required=False)
    sort = forms.ChoiceField(
        label="Sort by",
        required=False,
        choices=[(key, label) for key, (label, _) in SORTS.items()],
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        start, end = data.get("active_from"), data.get("active_to")
        if start and end and start > end:
            self.add_error("active_to", "The end date is before the start date.")
        return data

    def filters(self) -> ConversationFilters:
        """The valid filters; a bad value is dropped (and shown next to its field)."""
        data = self.cleaned_data if self.is_bound and hasattr(self, "cleaned_data") else {}
        return ConversationFilters(
            query=(data.get("q") or "").strip(),
            end_user=(data.get("user") or "").strip(),
            active_from=data.get("active_from"),
            active_to=data.get("active_to") if "active_to" not in self.errors else None,
            pii_found=bool(data.get("pii")),
            on_hold=bool(data.get("hold")),
            weakly_grounded=bool(data.get("grounding")),
            pipeline_failed=bool(data.get("failed")),
            pipeline_retrying=bool(data.get("retrying")),
            sort=data.get("sort") or DEFAULT_SORT,
        )


class MemoryEditForm(forms.Form):
    """Edit an observation's or a reflection's text and priority."""

    text = forms.CharField(
        label="Text", max_length=NOTE_TEXT_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 3})
    )
    priority = forms.ChoiceField(label="Priority", choices=Priority.choices)
    reason = reason_field()
    expected_version = expected_version_field()

    def __init__(self, *args: Any, item: Observation | Reflection, **kwargs: Any) -> None:
        kwargs.setdefault(
            "initial",
            {"text": item.text, "priority": item.priority, "expected_version": item.version},
        )
        super().__init__(*args, **kwargs)
        self.item = item

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if (
            "text" in data
            and "priority" in data
            and data["text"].strip() == self.item.text
            and data["priority"] == self.item.priority
        ):
            raise forms.ValidationError("Nothing changed: edit the text or pick another priority.")
        return data

    def changes(self) -> dict[str, str]:
        """Only what differs, so a priority-only change is recorded as a reprioritisation."""
        data = self.cleaned_data
        changes: dict[str, str] = {}
        if data["text"].strip() != self.item.text:
            changes["text"] = data["text"]
        if data["priority"] != self.item.priority:
            changes["priority"] = data["priority"]
        return changes


class ObservationCreateForm(forms.Form):
    text = forms.CharField(
        label="Text", max_length=NOTE_TEXT_MAX_CHARS, widget=forms.Textarea(attrs={"rows": 3})
    )
    priority = forms.ChoiceField(
        label="Priority", choices=Priority.choices, initial=Priority.MEDIUM
    )
    referenced_at = forms.DateField(
        label="Event date",
        required=False,
        help_text="When the event it talks about happens or happened, if known.",
        widget=forms.DateInput(attrs={"type": "date"}),
    )
    reason = reason_field()

    def referenced_datetime(self) -> datetime | None:
        day = self.cleaned_data.get("referenced_at")
        return timezone.make_aware(datetime.combine(day, time(12))) if day else None


class ReasonForm(forms.Form):
    """Delete: only the reason."""

    reason = reason_field()


class NoteDeleteForm(ReasonForm):
    """Delete an observation or a reflection: the reason, and the version it was decided on."""

    expected_version = expected_version_field()


class ApproveForm(forms.Form):
    """Approve a waiting reflection, as written or edited first."""

    text = forms.CharField(
        label="Text (edit it to approve your words)",
        max_length=NOTE_TEXT_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    reason = reason_field(required_message="Give a reason: every approval needs one.")


class RejectForm(forms.Form):
    reason = reason_field(required_message="Give a reason: every rejection needs one.")


class EscalationResolveForm(forms.Form):
    note = forms.CharField(
        label="What was done",
        max_length=ESCALATION_NOTE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2, "autocomplete": "off"}),
        error_messages={"required": "Write a note saying what was done: it closes the case."},
    )


class PinForm(forms.Form):
    """Pin a whole message: a reason is welcome but not required (as for adding)."""

    reason = forms.CharField(
        label="Reason (optional)",
        required=False,
        max_length=1000,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )


class RevertForm(forms.Form):
    version = forms.IntegerField(min_value=1, widget=forms.HiddenInput)  # the one restored
    reason = reason_field()
    expected_version = expected_version_field()


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=100,
        help_text="Who or what uses this key, e.g. support-bot production.",
    )
    scope = forms.ChoiceField(
        label="Scope",
        choices=ApiKey.Scope.choices,
        initial=ApiKey.Scope.AGENT,
        help_text="agent: conversations, messages, context, search, observe and reflect. "
        "curator: also edits memory. compliance: also the governance routes (audit log, "
        "retention, erasure, holds, redaction). admin: everything, settings included.",
    )


FOLLOW_DEFAULT = "default"
FIDELITY_HELP = {
    FOLLOW_DEFAULT: "Follow MEMDESK_OBSERVER_FIDELITY, the level whoever runs the server "
    "chose for every workspace.",
    # Measured on LongMemEval (docs/benchmarks.md, "Fidelity"): size against what later
    # questions still find.
    "compact": "The smallest memory (about 7x smaller than the conversation): the gist, "
    "the first items of the assistant's lists. Keeps about 78% of what later questions ask.",
    "balanced": "About 5.5x smaller; keeps about 90% of what later questions ask, the "
    "names and numbers the assistant gave included. The level Memdesk ships with.",
    "detailed": "About 4x smaller; keeps about 93%: more of each answer, longer sentences.",
}


APPROVAL_HELP = {
    "off": "new reflections are served at once",
    "reflections": "every new reflection waits for a person's approval",
    "flagged": "a new reflection waits when the checks flag it: weakly grounded, dropping "
    "what a high-priority source held or a date, or made from a note with a personal-data "
    "finding awaiting review",
}


class MemorySettingsForm(forms.Form):
    fidelity = forms.ChoiceField(label="Fidelity", widget=forms.RadioSelect)
    # Not sent (an older page, a script): left as it is.
    approval = forms.ChoiceField(
        label="Staged approval",
        choices=[(mode, f"{mode}: {help}") for mode, help in APPROVAL_HELP.items()],
        required=False,
    )
    approval_by_tag = forms.CharField(
        label="By conversation tag",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "vip: reflections"}),
        help_text="One tag per line, then a colon and a mode; a tag's mode adds to the "
        "workspace's.",
    )
    reason = reason_field(
        required_message="Give a reason: every change to memory settings needs one."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        default = settings.MEMDESK_OBSERVER_FIDELITY
        self.fields["fidelity"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            (FOLLOW_DEFAULT, f"server default ({default})"),
            *[(level, level) for level in FIDELITIES],
        ]

    @classmethod
    def of(cls, workspace: Workspace) -> MemorySettingsForm:
        by_tag = "\n".join(f"{tag}: {mode}" for tag, mode in workspace.approval_by_tag.items())
        return cls(
            initial={
                "fidelity": workspace.fidelity or FOLLOW_DEFAULT,
                "approval": workspace.approval,
                "approval_by_tag": by_tag,
            }
        )

    def approval_changes(self) -> dict[str, Any]:
        """The approval settings the form sent, as ``workspace_settings_update`` takes them."""
        changes: dict[str, Any] = {}
        if self.cleaned_data.get("approval"):
            changes["approval"] = self.cleaned_data["approval"]
        if "approval_by_tag" in self.data:
            changes["approval_by_tag"] = self.cleaned_data["approval_by_tag"]
        return changes

    def clean_approval_by_tag(self) -> dict[str, str]:
        by_tag: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data["approval_by_tag"].splitlines(), 1):
            if not line.strip():
                continue
            tag, colon, mode = line.partition(":")
            if not colon or not tag.strip() or mode.strip() not in APPROVAL_HELP:
                raise forms.ValidationError(
                    f"Line {number}: write a tag, a colon and one of "
                    f"{', '.join(APPROVAL_HELP)} (vip: reflections)."
                )
            by_tag[tag.strip()] = mode.strip()
        return by_tag

    def options(self) -> list[tuple[BoundWidget, str]]:
        """Each radio button with its one-line explanation."""
        return [(radio, FIDELITY_HELP[radio.data["value"]]) for radio in self["fidelity"]]

    def chosen_fidelity(self) -> str:
        """The level chosen, or "" to follow the server's default."""
        value: str = self.cleaned_data["fidelity"]
        return "" if value == FOLLOW_DEFAULT else value


ROLE_HELP = (
    "viewer: reads conversations and memory. reviewer: also corrects memory, runs the "
    "Observer and Reflector, and works the review queue. compliance officer: also "
    "policies, holds, erasure and the audit log. admin: everything, keys, settings and "
    "roles included."
)


class MemberAddForm(forms.Form):
    username = forms.CharField(
        label="Username",
        max_length=150,
        help_text="Their login. An account that does not exist yet is created, with a "
        "password shown to you once.",
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
    )
    role = forms.ChoiceField(label="Role", choices=Role.choices, help_text=ROLE_HELP)
    reason = reason_field(required_message="Give a reason: every change of roles needs one.")


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(label="Role", choices=Role.choices)
    reason = reason_field(required_message="Give a reason: every change of roles needs one.")
