"""The compliance pages' forms: input validation and labels only. The rules (what a
redaction policy may hold, how long retention may keep) live in the governance
services, which the views call."""

from __future__ import annotations

from typing import Any

from django import forms

from core.errors import MemdeskError
from dashboard.forms import add_service_error, reason_field
from governance.models import RedactionPolicy, RetentionPolicy
from governance.redaction.policy import POLICY_FIELDS, POLICY_LIST_LIMIT, POLICY_VALUE_MAX_CHARS
from governance.redaction.presidio import DENY_LIST_ENTITY, OPERATORS, SUPPORTED_ENTITIES
from governance.redaction.review import RESCAN_TIERS
from governance.retention.common import MAX_DAYS

PREVIEW_MAX_CHARS = 5000
# The policy service names fields as the API does (``scoreThreshold``,
# ``operators.EMAIL``); the form uses the model's names.


def _days_field(label: str) -> forms.IntegerField:
    return forms.IntegerField(
        label=label,
        required=False,
        min_value=1,
        max_value=MAX_DAYS,
        help_text="Empty: keep forever.",
        error_messages={
            "min_value": "Keep it at least 1 day, or leave it empty to keep it forever.",
            "max_value": f"At most {MAX_DAYS} days (100 years); leave it empty to keep it forever.",
            "invalid": "Write a whole number of days.",
        },
    )


class RetentionPolicyForm(forms.Form):
    name = forms.CharField(label="Name", max_length=100)
    conversation_tag = forms.CharField(
        label="Conversation tag",
        required=False,
        max_length=100,
        help_text="Only conversations with this tag. Empty: the default policy, for every "
        "conversation no tag policy governs.",
    )
    message_days = _days_field("Keep messages (days)")
    observation_days = _days_field("Keep observations (days)")
    reflection_days = _days_field("Keep reflections (days)")
    context_read_days = _days_field("Keep the read ledger (days)")
    enabled = forms.BooleanField(label="Enabled (sweeps apply it)", required=False, initial=True)
    reason = reason_field(
        required_message="Give a reason: every change to a retention policy is audited with one."
    )

    # The service names its fields as the model does; the same names are used here.
    FIELDS = (
        "name",
        "conversation_tag",
        "message_days",
        "observation_days",
        "reflection_days",
        "context_read_days",
    )

    @classmethod
    def of(cls, policy: RetentionPolicy) -> RetentionPolicyForm:
        initial = {name: getattr(policy, name) for name in (*cls.FIELDS, "enabled")}
        return cls(initial=initial)

    def values(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in (*self.FIELDS, "enabled")}


class ReviewFilterForm(forms.Form):
    entity_type = forms.ChoiceField(label="Entity type", required=False)
    min_score = forms.FloatField(
        label="Score from",
        required=False,
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
    )
    max_score = forms.FloatField(
        label="Score below",
        required=False,
        min_value=0,
        max_value=1,
        widget=forms.NumberInput(attrs={"step": "0.05"}),
    )

    def __init__(self, *args: Any, counts: dict[str, int], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["entity_type"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            ("", "every type"),
            *[(entity, f"{entity} ({n})") for entity, n in counts.items()],
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        low, high = self.cleaned_data.get("min_score"), self.cleaned_data.get("max_score")
        if low is not None and high is not None and low >= high:
            self.add_error("max_score", "Must be above “Score from”.")
        return self.cleaned_data

    def values(self) -> dict[str, Any]:
        """The valid filters; an invalid one is left out (and shown next to its field)."""
        if not self.is_bound:
            return {}
        self.is_valid()
        return {
            name: value
            for name, value in self.cleaned_data.items()
            if name not in self.errors and value not in (None, "")
        }


class HoldPlaceForm(forms.Form):
    conversation = forms.UUIDField(
        label="Conversation id",
        required=False,
        help_text="Hold one conversation…",
        error_messages={"invalid": "Paste a conversation id (a UUID) from the conversation page."},
    )
    end_user = forms.CharField(
        label="End user id",
        required=False,
        max_length=255,
        help_text="…or every conversation of one end user, present and future.",
    )
    confirm_unknown = forms.BooleanField(
        label="Hold this end user id anyway: it covers the conversations created under it later",
        required=False,
    )
    reason = forms.CharField(
        label="Reason", max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if (
            not data.get("conversation")
            and not (data.get("end_user") or "").strip()
            and "conversation" not in self.errors
        ):
            self.add_error(None, "Give a conversation id or an end user id to hold.")
        if data.get("conversation") and (data.get("end_user") or "").strip():
            self.add_error(
                "end_user", "Hold one thing at a time: clear the conversation id or this field."
            )
        return data


class ErasureRequestForm(forms.Form):
    end_user = forms.CharField(
        label="End user id",
        max_length=255,
        help_text="Every conversation of this end user is deleted, with all its memory.",
        error_messages={"required": "Give the end user id to erase."},
    )
    confirm_unknown = forms.BooleanField(
        label="Record the request anyway (nothing is stored under this id now)",
        required=False,
    )
    reason = forms.CharField(
        label="Reason",
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason: every erasure is audited with one."},
    )


class RescanForm(forms.Form):
    tiers = forms.MultipleChoiceField(
        label="Tiers",
        choices=[(tier, tier) for tier in RESCAN_TIERS],
        initial=list(RESCAN_TIERS),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one tier to scan."},
        help_text="Messages are scanned for masking and the PII found flag (their text is "
        "kept, unless the policy redacts at ingest); observations and reflections are "
        "redacted under the current policy.",
    )
    reason = reason_field(required_message="Give a reason: every re-scan is audited with one.")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


# What the policy service calls a field on the wire, in the words of the form: a refusal
# the form did not catch first is shown as the person reads the page.
POLICY_WIRE_LABELS = {
    "scoreThreshold": "Score threshold",
    "defaultOperator": "Default operator",
    "allowList": "Allow list",
    "denyList": "Deny list",
    "reviewMinScore": "Review from score",
    "reviewMaxScore": "Review below score",
    "entities": "Entity types",
    "operators": "Per-entity operators",
}


class RedactionPolicyForm(forms.Form):
    entities = forms.MultipleChoiceField(
        label="Entity types",
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The types the detectors look for. None ticked: the default set.",
    )
    score_threshold = forms.FloatField(
        label="Score threshold",
        min_value=0,
        max_value=1,
        error_messages={
            "min_value": "Must be between 0 and 1.",
            "max_value": "Must be between 0 and 1.",
            "invalid": "Write a number between 0 and 1, e.g. 0.5.",
            "required": "Give a score threshold between 0 and 1.",
        },
    )
    default_operator = forms.ChoiceField(
        label="Default operator",
        choices=RedactionPolicy.Operator.choices,
        error_messages={"invalid_choice": "Choose one of the operators in the list."},
    )
    operators = forms.CharField(
        label="Per-entity operators",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One ENTITY=operator a line, e.g. EMAIL_ADDRESS=mask. Operators: "
        + ", ".join(OPERATORS)
        + ".",
    )
    allow_list = forms.CharField(
        label="Allow list",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Values never redacted, one a line.",
    )
    deny_list = forms.CharField(
        label="Deny list",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Values always redacted, one a line.",
    )
    review_min_score = forms.FloatField(
        label="Review from score",
        min_value=0,
        max_value=1,
        error_messages={
            "min_value": "Must be between 0 and 1.",
            "max_value": "Must be between 0 and 1.",
            "invalid": "Write a number between 0 and 1.",
        },
    )
    review_max_score = forms.FloatField(
        label="Review below score",
        min_value=0,
        max_value=1,
        help_text="Findings scoring in this band wait for a person in the review queue.",
        error_messages={
            "min_value": "Must be between 0 and 1.",
            "max_value": "Must be between 0 and 1.",
            "invalid": "Write a number between 0 and 1.",
        },
    )
    redact_at_ingest = forms.BooleanField(
        label="Redact at ingest (messages are stored with their personal data replaced)",
        required=False,
    )
    redact_before_observation = forms.BooleanField(
        label="Redact before observation (the Observer reads messages with their personal "
        "data replaced; the stored messages keep it, masked in the dashboard)",
        required=False,
    )
    reflection_waits_for_review = forms.BooleanField(
        label="Reflection waits for review", required=False
    )
    keep_originals = forms.BooleanField(label="Keep originals (restricted)", required=False)
    agents_see_reidentified = forms.BooleanField(
        label="Agents see re-identified memory",
        required=False,
        help_text="API keys read memory with pseudonyms replaced by the values they stand "
        "for. Off, they read the pseudonyms.",
    )
    reason = reason_field(
        required_message="Give a reason: every change to the redaction policy is audited with one."
    )

    # Fields the policy service takes (the reason goes to the audit trail).
    POLICY_NAMES = (
        "entities",
        "score_threshold",
        "default_operator",
        "operators",
        "allow_list",
        "deny_list",
        "review_min_score",
        "review_max_score",
        "redact_at_ingest",
        "redact_before_observation",
        "reflection_waits_for_review",
        "keep_originals",
        "agents_see_reidentified",
    )

    def __init__(self, *args: Any, policy: RedactionPolicy | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        custom = {c["entity"] for c in (policy.custom_recognizers if policy else [])}
        chosen = set(policy.entities) if policy else set()
        self.known_entities = SUPPORTED_ENTITIES | custom | {DENY_LIST_ENTITY}
        self.fields["entities"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            (entity, entity) for entity in sorted(SUPPORTED_ENTITIES | custom | chosen)
        ]

    @classmethod
    def of(cls, policy: RedactionPolicy) -> RedactionPolicyForm:
        initial = {name: getattr(policy, name) for name in POLICY_FIELDS}
        initial["entities"] = list(policy.entities)
        initial["operators"] = "\n".join(f"{e}={op}" for e, op in policy.operators.items())
        initial["allow_list"] = "\n".join(policy.allow_list)
        initial["deny_list"] = "\n".join(policy.deny_list)
        return cls(initial=initial, policy=policy)

    def clean_operators(self) -> dict[str, str]:
        operators, problems = {}, []
        for line in _lines(self.cleaned_data["operators"]):
            entity, sep, operator = (part.strip() for part in line.partition("="))
            if not sep or not entity or not operator:
                problems.append(f"Write ENTITY=operator, e.g. EMAIL_ADDRESS=mask; got “{line}”.")
            elif entity not in self.known_entities:
                problems.append(f"{entity} is not an entity type this engine detects.")
            elif operator not in OPERATORS:
                problems.append(
                    f"{operator} is not an operator; use one of {', '.join(OPERATORS)}."
                )
            else:
                operators[entity] = operator
        if problems:
            raise forms.ValidationError(problems)
        return operators

    def clean_allow_list(self) -> list[str]:
        return _checked_lines(self.cleaned_data["allow_list"])

    def clean_deny_list(self) -> list[str]:
        return _checked_lines(self.cleaned_data["deny_list"])

    def clean(self) -> dict[str, Any]:
        super().clean()
        low = self.cleaned_data.get("review_min_score")
        high = self.cleaned_data.get("review_max_score")
        if low is not None and high is not None and low > high:
            self.add_error("review_min_score", "Must not be above “Review below score”.")
        return self.cleaned_data

    def policy_values(self) -> dict[str, Any]:
        return {name: self.cleaned_data[name] for name in self.POLICY_NAMES}

    def add_service_error(self, error: MemdeskError) -> None:
        """Show the policy service's refusal next to the field it names, in the form's
        words."""
        message = error.message
        for wire, label in POLICY_WIRE_LABELS.items():
            message = message.replace(f"{wire}:", f"{label}:").replace(wire, f"“{label}”")
        add_service_error(
            self,
            MemdeskError(error.code, message, field=error.field, status_code=error.status_code),
        )

    def error_summary(self) -> list[tuple[str, str, str]]:
        """Every error of the form as (field id, label, message), in the form's order."""
        summary = [
            (self[name].id_for_label, str(field.label or name), str(message))
            for name, field in self.fields.items()
            for message in self.errors.get(name, [])
        ]
        summary += [("", "", str(message)) for message in self.non_field_errors()]
        return summary


def _checked_lines(text: str) -> list[str]:
    lines = _lines(text)
    if len(lines) > POLICY_LIST_LIMIT:
        raise forms.ValidationError(f"At most {POLICY_LIST_LIMIT} lines; this has {len(lines)}.")
    too_long = [n for n, line in enumerate(lines, 1) if len(line) > POLICY_VALUE_MAX_CHARS]
    if too_long:
        raise forms.ValidationError(
            f"Each line must be at most {POLICY_VALUE_MAX_CHARS} characters; line "
            f"{too_long[0]} is longer."
        )
    return lines


class PseudonymRevealForm(forms.Form):
    label = forms.CharField(
        label="Pseudonym",
        max_length=70,
        help_text="As memory holds it: <PERSON_2>, PERSON_2, or a misspelling in older "
        "notes such as <PERSON2>.",
        widget=forms.TextInput(attrs={"placeholder": "<PERSON_2>", "autocomplete": "off"}),
    )
    reason = forms.CharField(
        label="Reason", max_length=1000, widget=forms.Textarea(attrs={"rows": 2})
    )

    def add_service_error(self, error: MemdeskError) -> None:
        add_service_error(self, error)


class RedactionPreviewForm(forms.Form):
    text = forms.CharField(
        label="Try a text",
        required=False,
        max_length=PREVIEW_MAX_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Type or paste a message"}),
    )
