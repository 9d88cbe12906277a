"""The compliance pages of the dashboard: the audit log of the current workspace, the
redaction review queue, legal holds, retention, and the reveal of a restricted original.

Who may open them: all but the reveal need ``MANAGE_COMPLIANCE`` (the compliance officer and
the admin): the audit log shows every change to memory with its before/after values, and
the review queue shows suspected personal data in clear and decides whether it is
redacted. Revealing a restricted original needs ``VIEW_RESTRICTED``, which only the
compliance officer holds; anyone else gets the 403 page naming the role. The views only
parse input, call a governance selector or service, and render.
"""

from __future__ import annotations

import difflib
import json
import uuid
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard import selectors as dashboard_selectors
from dashboard.access import Access, access_for
from dashboard.forms import add_service_error
from dashboard.models import Capability
from governance import gates, redaction_policy, retention, review
from governance.erasure import erasure_request_create
from governance.holds import legal_hold_place, legal_hold_release
from governance.models import (
    AuditEvent,
    ErasureRequest,
    RedactionFinding,
    RedactionPolicy,
    RetentionSweep,
)
from governance.selectors import (
    audit_chain_verify,
    audit_event_list,
    audit_export_lines,
    erasure_request_get,
    erasure_request_list,
    legal_hold_get,
    legal_hold_list,
    redaction_finding_get,
    redaction_finding_list,
    redaction_policy_or_defaults,
    redaction_preview,
    retention_policy_list,
    retention_sweep_get,
    retention_sweep_list,
)

AUDIT_EVENTS_PER_PAGE = 50
FILTER_MAX_LENGTH = 100
FINDINGS_PER_PAGE = 50
REASON_MAX_LENGTH = 1000
DECISIONS = ("approve", "dismiss")
RECENT_SWEEPS = 10
SWEEP_POLL_SECONDS = 2
INVALID = 422  # htmx swaps 422 in (see base.html); used for a refused decision


def _is_partial(request: HttpRequest) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted


def _page(
    request: HttpRequest,
    template: str,
    access: Access,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> HttpResponse:
    return render(request, template, {"access": access, **context}, status=status)


# --- audit log --------------------------------------------------------------------------------


def _audit_filters(request: HttpRequest) -> dict[str, str]:
    """The filters a request asks for, as ``audit_event_list`` lookups."""
    filters = {}
    for param, lookup in (("action", "action"), ("target_type", "target_type")):
        value = request.GET.get(param, "").strip()[:FILTER_MAX_LENGTH]
        if value:
            filters[lookup] = value
    return filters


def _pretty(value: dict[str, Any] | None) -> list[str]:
    if value is None:
        return []
    return json.dumps(value, indent=2, sort_keys=True, cls=DjangoJSONEncoder).splitlines()


def _diff_lines(event: AuditEvent) -> list[tuple[str, str]]:
    """The event's before and after values as a unified diff: (kind, line) pairs, kind
    one of ``add``, ``del``, ``ctx``; the ---/+++ header is dropped."""
    lines = difflib.unified_diff(
        _pretty(event.before), _pretty(event.after), "before", "after", n=3, lineterm=""
    )
    diff = []
    for line in list(lines)[2:]:
        if line.startswith("@@"):
            diff.append(("hunk", line))
        elif line.startswith("+"):
            diff.append(("add", line))
        elif line.startswith("-"):
            diff.append(("del", line))
        else:
            diff.append(("ctx", line))
    return diff


def _reveal_url(event: AuditEvent) -> str:
    """Where to reveal the original of the message, observation or reflection an event
    is about; empty for other targets."""
    if event.target_type not in gates.REDACTION_TARGETS:
        return ""
    try:
        target_id = uuid.UUID(event.target_id)
    except ValueError:
        return ""
    return reverse("dashboard:compliance_original", args=[event.target_type, target_id])


@require_GET
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    filters = _audit_filters(request)
    cursor = request.GET.get("cursor") or None
    try:
        events, next_cursor = audit_event_list(
            workspace=access.workspace,
            filters=dict(filters),
            cursor=cursor,
            limit=AUDIT_EVENTS_PER_PAGE,
        )
    except MemdeskError:
        # A cursor mangled in the address bar: start again from the newest event.
        cursor = None
        events, next_cursor = audit_event_list(
            workspace=access.workspace,
            filters=dict(filters),
            cursor=None,
            limit=AUDIT_EVENTS_PER_PAGE,
        )
    can_reveal = access.can(Capability.VIEW_RESTRICTED)
    for event in events:
        event.diff_lines = _diff_lines(event)  # type: ignore[attr-defined]
        event.reveal_url = _reveal_url(event) if can_reveal else ""  # type: ignore[attr-defined]
    query = {
        "action": request.GET.get("action", ""),
        "target_type": request.GET.get("target_type", ""),
    }
    query = {k: v.strip() for k, v in query.items() if v.strip()}
    context: dict[str, Any] = {
        "events": events,
        "query": query,
        "next_query": urlencode({**query, "cursor": next_cursor}) if next_cursor else "",
        "export_query": urlencode(query),
        "is_first_page": cursor is None,
    }
    template = "dashboard/compliance/audit_log.html"
    if _is_partial(request):
        return _page(request, f"{template}#events", access, context)
    context["chain"] = audit_chain_verify(workspace_id=access.workspace.pk)
    return _page(request, template, access, context)


@require_GET
@login_required
def audit_log_export(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered log as JSON Lines, oldest first, streamed."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    response = StreamingHttpResponse(
        audit_export_lines(workspace=access.workspace, filters=_audit_filters(request)),
        content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="audit-{access.workspace.pk}.jsonl"'
    response["Cache-Control"] = "private, no-store"
    return response


# --- redaction review queue -------------------------------------------------------------------


def _add_texts(findings: list[RedactionFinding], workspace_id: object) -> None:
    """Split each finding's target text around ``[start:end]`` so the page can mark the
    value: ``text_before``, ``text_value``, ``text_after`` (all empty when the target is
    gone or its text no longer reaches the offsets)."""
    # governance has no selector for the texts findings point at (services keeps its
    # lookup private); read them here in one query per target type.
    wanted: dict[str, set[object]] = {}
    for finding in findings:
        wanted.setdefault(finding.target_type, set()).add(finding.target_id)
    texts: dict[tuple[str, str], str] = {}
    for target_type, ids in wanted.items():
        model, field = gates.REDACTION_TARGETS[target_type]
        rows = model.objects.filter(pk__in=ids, conversation__workspace_id=workspace_id)
        for pk, text in rows.values_list("pk", field):
            texts[(target_type, str(pk))] = text
    for finding in findings:
        text = texts.get((finding.target_type, str(finding.target_id)))
        found = text is not None and finding.end <= len(text) and finding.start < finding.end
        finding.text_found = found  # type: ignore[attr-defined]
        finding.text_before = text[: finding.start] if found else ""  # type: ignore[attr-defined,index]
        finding.text_value = text[finding.start : finding.end] if found else ""  # type: ignore[attr-defined,index]
        finding.text_after = text[finding.end :] if found else ""  # type: ignore[attr-defined,index]


def _get_finding_for_user(request: HttpRequest, finding_id: int) -> tuple[Access, RedactionFinding]:
    """A finding of the current workspace (else 404), for a user who may manage compliance."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        finding = redaction_finding_get(workspace_id=access.workspace.pk, finding_id=finding_id)
    except MemdeskError:
        raise Http404("No such redaction finding in this workspace.") from None
    return access, finding


def _decide(
    finding: RedactionFinding, decision: str, access: Access, request: HttpRequest, reason: str
) -> RedactionFinding:
    actor = access.actor(request)
    if decision == "approve":
        return review.redaction_finding_approve(
            finding=finding, actor=actor, reason=reason
        )
    return review.redaction_finding_dismiss(
        finding=finding, actor=actor, reason=reason
    )


def _reason(request: HttpRequest) -> str:
    return request.POST.get("reason", "").strip()[:REASON_MAX_LENGTH]


def _queue_context(access: Access, cursor: str | None = None) -> dict[str, Any]:
    findings, next_cursor = redaction_finding_list(
        workspace_id=access.workspace.pk,
        status=RedactionFinding.Status.PENDING_REVIEW,
        conversation_id=None,
        limit=FINDINGS_PER_PAGE,
        cursor=cursor,
    )
    _add_texts(findings, access.workspace.pk)
    return {"findings": findings, "next_cursor": next_cursor, "is_first_page": cursor is None}


@require_GET
@login_required
def review_queue(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        context = _queue_context(access, request.GET.get("cursor") or None)
    except MemdeskError:
        context = _queue_context(access, None)
    template = "dashboard/compliance/review_queue.html"
    if _is_partial(request):
        return _page(request, f"{template}#queue", access, context)
    return _page(request, template, access, context)


@require_POST
@login_required
def review_decide(request: HttpRequest, finding_id: int, decision: str) -> HttpResponse:
    if decision not in DECISIONS:
        raise Http404("No such decision.")
    access, finding = _get_finding_for_user(request, finding_id)
    error = ""
    try:
        finding = _decide(finding, decision, access, request, _reason(request))
    except MemdeskError as refused:
        error = refused.message
    if not _is_partial(request):
        if error:
            messages.error(request, f"Finding {finding.pk}: {error}")
        else:
            messages.success(request, f"Finding {finding.pk} {finding.get_status_display()}.")
        return redirect("dashboard:compliance_review")
    _add_texts([finding], access.workspace.pk)
    context = {"finding": finding, "error": error}
    return _page(
        request,
        "dashboard/compliance/review_queue.html#finding_row",
        access,
        context,
        status=INVALID if error else 200,
    )


@require_POST
@login_required
def review_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or dismiss the checked findings, each in its own transaction: one stale
    finding is reported and does not undo the others."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS:
        raise Http404("No such decision.")
    ids = [raw for raw in request.POST.getlist("finding") if raw.isdigit()]
    reason = _reason(request)
    decided, errors = 0, []
    for finding_id in ids:
        try:
            finding = redaction_finding_get(workspace_id=access.workspace.pk, finding_id=finding_id)
            _decide(finding, decision, access, request, reason)
        except MemdeskError as refused:
            errors.append(f"Finding {finding_id}: {refused.message}")
        else:
            decided += 1
    verb = "approved" if decision == "approve" else "dismissed"
    if not ids:
        messages.error(request, "Tick at least one finding first.")
    else:
        messages.success(request, f"{decided} finding{'s' if decided != 1 else ''} {verb}.")
    for error in errors:
        messages.error(request, error)
    if not _is_partial(request):
        return redirect("dashboard:compliance_review")
    return _page(
        request, "dashboard/compliance/review_queue.html#queue", access, _queue_context(access)
    )


# --- legal holds ------------------------------------------------------------------------------


class HoldPlaceForm(forms.Form):
    conversation = forms.UUIDField(
        label="Conversation id",
        required=False,
        help_text="Hold one conversation…",
    )
    end_user = forms.CharField(
        label="End user id",
        required=False,
        max_length=255,
        help_text="…or every conversation of one end user, present and future.",
    )
    reason = forms.CharField(
        label="Reason", max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )


def _holds_context(access: Access, form: HoldPlaceForm) -> dict[str, Any]:
    return {"form": form, "holds": legal_hold_list(workspace=access.workspace, active=True)}


def _holds_response(
    request: HttpRequest, access: Access, form: HoldPlaceForm, *, status: int = 200
) -> HttpResponse:
    template = "dashboard/compliance/holds.html"
    if _is_partial(request):
        template += "#holds"
    return _page(request, template, access, _holds_context(access, form), status=status)


@require_GET
@login_required
def holds(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = HoldPlaceForm(initial={"conversation": request.GET.get("conversation", "")})
    return _holds_response(request, access, form)


@require_POST
@login_required
def hold_place(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = HoldPlaceForm(request.POST)
    if form.is_valid():
        conversation = None
        conversation_id = form.cleaned_data["conversation"]
        if conversation_id is not None:
            conversation = dashboard_selectors.conversation_in(
                workspace_ids=[access.workspace.pk], conversation_id=conversation_id
            )
            if conversation is None:
                form.add_error("conversation", "No conversation with this id in this workspace.")
        if form.is_valid():
            try:
                hold = legal_hold_place(
                    workspace=access.workspace,
                    actor=access.actor(request),
                    reason=form.cleaned_data["reason"],
                    conversation=conversation,
                    end_user_id=form.cleaned_data["end_user"],
                )
            except MemdeskError as error:
                add_service_error(form, error)
            else:
                messages.success(request, f"Legal hold {hold.pk} placed.")
                if not _is_partial(request):
                    return redirect("dashboard:compliance_holds")
                return _holds_response(request, access, HoldPlaceForm(), status=201)
    return _holds_response(request, access, form, status=INVALID)


@require_POST
@login_required
def hold_release(request: HttpRequest, hold_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        hold = legal_hold_get(workspace=access.workspace, hold_id=hold_id)
    except MemdeskError:
        raise Http404("No such legal hold in this workspace.") from None
    error = ""
    try:
        hold = legal_hold_release(
            hold=hold, actor=access.actor(request), reason=_reason(request)
        )
    except MemdeskError as refused:
        error = refused.message
    if not _is_partial(request):
        if error:
            messages.error(request, f"Legal hold {hold.pk}: {error}")
        else:
            messages.success(request, f"Legal hold {hold.pk} released.")
        return redirect("dashboard:compliance_holds")
    context = {"hold": hold, "error": error}
    return _page(
        request,
        "dashboard/compliance/holds.html#hold_row",
        access,
        context,
        status=INVALID if error else 200,
    )


# --- restricted originals ---------------------------------------------------------------------


def _original_target(target_type: str) -> str:
    if target_type not in gates.REDACTION_TARGETS:
        raise Http404("No such kind of object.")
    return target_type


@require_http_methods(["GET", "POST"])
@login_required
def original_reveal(request: HttpRequest, target_type: str, target_id: uuid.UUID) -> HttpResponse:
    """GET asks for confirmation; POST reads the original text kept before redaction.
    Every read is audited by ``restricted_original_read`` before the text is shown."""
    access = access_for(request, Capability.VIEW_RESTRICTED)
    context: dict[str, Any] = {
        "target_type": _original_target(target_type),
        "target_id": target_id,
        "original": None,
    }
    template = "dashboard/compliance/original.html"
    if request.method == "POST":
        try:
            context["original"] = review.restricted_original_read(
                workspace=access.workspace,
                target_type=target_type,
                target_id=target_id,
                actor=access.actor(request),
            )
        except MemdeskError as error:
            raise Http404(error.message) from None
    response = _page(
        request, f"{template}#original" if _is_partial(request) else template, access, context
    )
    if context["original"] is not None:
        response["Cache-Control"] = "private, no-store"
    return response


# --- retention --------------------------------------------------------------------------------


def _retention_context(access: Access) -> dict[str, Any]:
    return {
        "policies": retention_policy_list(workspace=access.workspace),
        "sweeps": retention_sweep_list(workspace=access.workspace, limit=RECENT_SWEEPS),
    }


@require_GET
@login_required
def retention_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    template = "dashboard/compliance/retention.html"
    if _is_partial(request):
        template += "#sweeps"
    return _page(request, template, access, _retention_context(access))


@require_POST
@login_required
def retention_dry_run(request: HttpRequest) -> HttpResponse:
    """Count what a sweep would delete now; nothing is deleted."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    sweep = retention.retention_dry_run(workspace=access.workspace, actor=access.actor(request))
    if not _is_partial(request):
        return redirect("dashboard:compliance_sweep", sweep.pk)
    return _sweep_response(request, access, sweep)


@require_POST
@login_required
def retention_run(request: HttpRequest) -> HttpResponse:
    """Queue a sweep of the workspace for a worker; the page then polls its progress."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        sweep = retention.retention_sweep_request(
            workspace=access.workspace, actor=access.actor(request)
        )
    except MemdeskError as refused:
        if not _is_partial(request):
            messages.error(request, refused.message)
            return redirect("dashboard:compliance_retention")
        context = {"refused": refused.message}
        return _page(
            request, "dashboard/compliance/retention.html#refused", access, context, status=INVALID
        )
    if not _is_partial(request):
        return redirect("dashboard:compliance_sweep", sweep.pk)
    return _sweep_response(request, access, sweep, status=201)


def _sweep_response(
    request: HttpRequest, access: Access, sweep: RetentionSweep, *, status: int = 200
) -> HttpResponse:
    open_statuses = (RetentionSweep.Status.PENDING, RetentionSweep.Status.RUNNING)
    context = {
        "sweep": sweep,
        "polling": sweep.status in open_statuses,
        "poll_seconds": SWEEP_POLL_SECONDS,
    }
    template = "dashboard/compliance/sweep.html"
    if _is_partial(request):
        template += "#sweep_status"
    return _page(request, template, access, context, status=status)


@require_GET
@login_required
def retention_sweep_status(request: HttpRequest, sweep_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        sweep = retention_sweep_get(workspace=access.workspace, sweep_id=sweep_id)
    except MemdeskError:
        raise Http404("No such retention sweep in this workspace.") from None
    return _sweep_response(request, access, sweep)


# --- erasure ----------------------------------------------------------------------------------

RECENT_ERASURES = 50
ERASURE_POLL_SECONDS = 2


class ErasureRequestForm(forms.Form):
    end_user = forms.CharField(
        label="End user id",
        max_length=255,
        help_text="Every conversation of this end user is deleted, with all its memory.",
    )
    reason = forms.CharField(
        label="Reason", max_length=2000, widget=forms.Textarea(attrs={"rows": 2})
    )


def _erasure_response(
    request: HttpRequest, access: Access, form: ErasureRequestForm, *, status: int = 200
) -> HttpResponse:
    template = "dashboard/compliance/erasure.html"
    if _is_partial(request):
        template += "#erasure"
    context = {
        "form": form,
        "erasures": erasure_request_list(workspace=access.workspace, limit=RECENT_ERASURES),
    }
    return _page(request, template, access, context, status=status)


@require_GET
@login_required
def erasure_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    return _erasure_response(request, access, ErasureRequestForm())


@require_POST
@login_required
def erasure_create(request: HttpRequest) -> HttpResponse:
    """Record an erasure request; the service queues it, or records it as refused when a
    legal hold covers the end user (the refusal is shown next to the form)."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = ErasureRequestForm(request.POST)
    if form.is_valid():
        try:
            erasure = erasure_request_create(
                workspace=access.workspace,
                actor=access.actor(request),
                end_user_id=form.cleaned_data["end_user"],
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            if error.field == "userId":
                form.add_error("end_user", error.message)
            else:
                add_service_error(form, error)
        else:
            if erasure.status == ErasureRequest.Status.REFUSED:
                form.add_error(None, f"Erasure request {erasure.pk} refused: {erasure.error}")
                return _erasure_response(request, access, form, status=INVALID)
            messages.success(request, f"Erasure request {erasure.pk} queued.")
            if not _is_partial(request):
                return redirect("dashboard:compliance_erasure_detail", erasure.pk)
            return _erasure_response(request, access, ErasureRequestForm(), status=201)
    return _erasure_response(request, access, form, status=INVALID)


@require_GET
@login_required
def erasure_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        erasure = erasure_request_get(workspace=access.workspace, request_id=request_id)
    except MemdeskError:
        raise Http404("No such erasure request in this workspace.") from None
    open_statuses = (ErasureRequest.Status.PENDING, ErasureRequest.Status.RUNNING)
    context = {
        "erasure": erasure,
        "polling": erasure.status in open_statuses,
        "poll_seconds": ERASURE_POLL_SECONDS,
    }
    template = "dashboard/compliance/erasure_detail.html"
    if _is_partial(request):
        template += "#erasure_status"
    return _page(request, template, access, context)


# --- redaction policy -------------------------------------------------------------------------

PREVIEW_MAX_CHARS = 5000
POLICY_BOOLEANS = (
    "redact_at_ingest",
    "redact_before_observation",
    "reflection_waits_for_review",
    "keep_originals",
)
# The service names fields as the API does (``scoreThreshold``, ``operators.EMAIL``);
# the form uses the model's names.
WIRE_TO_FIELD = {wire: name for name, wire in redaction_policy.POLICY_FIELDS.items()}


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class RedactionPolicyForm(forms.Form):
    entities = forms.CharField(
        label="Entity types",
        required=False,
        widget=forms.TextInput(attrs={"autocomplete": "off"}),
        help_text="Comma separated, e.g. EMAIL_ADDRESS, PHONE_NUMBER. Empty: the default set.",
    )
    score_threshold = forms.FloatField(label="Score threshold", min_value=0, max_value=1)
    default_operator = forms.ChoiceField(
        label="Default operator", choices=RedactionPolicy.Operator.choices
    )
    operators = forms.CharField(
        label="Per-entity operators",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One ENTITY=operator a line, e.g. EMAIL_ADDRESS=mask.",
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
    review_min_score = forms.FloatField(label="Review from score", min_value=0, max_value=1)
    review_max_score = forms.FloatField(
        label="Review below score",
        min_value=0,
        max_value=1,
        help_text="Findings scoring in this band wait for a person in the review queue.",
    )
    redact_at_ingest = forms.BooleanField(label="Redact at ingest", required=False)
    redact_before_observation = forms.BooleanField(
        label="Redact before observation", required=False
    )
    reflection_waits_for_review = forms.BooleanField(
        label="Reflection waits for review", required=False
    )
    keep_originals = forms.BooleanField(label="Keep originals (restricted)", required=False)

    @classmethod
    def of(cls, policy: RedactionPolicy) -> RedactionPolicyForm:
        initial = {name: getattr(policy, name) for name in redaction_policy.POLICY_FIELDS}
        initial["entities"] = ", ".join(policy.entities)
        initial["operators"] = "\n".join(f"{e}={op}" for e, op in policy.operators.items())
        initial["allow_list"] = "\n".join(policy.allow_list)
        initial["deny_list"] = "\n".join(policy.deny_list)
        return cls(initial=initial)

    def clean_entities(self) -> list[str]:
        return [e.strip() for e in self.cleaned_data["entities"].split(",") if e.strip()]

    def clean_operators(self) -> dict[str, str]:
        operators = {}
        for line in _lines(self.cleaned_data["operators"]):
            entity, sep, operator = line.partition("=")
            if not sep or not entity.strip() or not operator.strip():
                raise forms.ValidationError(f"Write ENTITY=operator; got {line!r}.")
            operators[entity.strip()] = operator.strip()
        return operators

    def clean_allow_list(self) -> list[str]:
        return _lines(self.cleaned_data["allow_list"])

    def clean_deny_list(self) -> list[str]:
        return _lines(self.cleaned_data["deny_list"])


class RedactionPreviewForm(forms.Form):
    text = forms.CharField(
        label="Try a text",
        required=False,
        max_length=PREVIEW_MAX_CHARS,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "Type or paste a message"}),
    )


def _add_policy_error(form: RedactionPolicyForm, error: MemdeskError) -> None:
    wire = (error.field or "").split(".")[0].split("[")[0]
    field = WIRE_TO_FIELD.get(wire)
    form.add_error(field if field in form.fields else None, error.message)


def _preview_context(access: Access, text: str) -> dict[str, Any]:
    if not text.strip():
        return {"preview": None, "preview_text": text}
    preview = redaction_preview(workspace_id=access.workspace.pk, text=text)
    findings = [
        {"finding": finding, "value": text[finding.start : finding.end]}
        for finding in preview.findings
    ]
    return {"preview": preview, "preview_findings": findings, "preview_text": text}


def _redaction_response(
    request: HttpRequest,
    access: Access,
    form: RedactionPolicyForm,
    *,
    preview_text: str = "",
    status: int = 200,
) -> HttpResponse:
    template = "dashboard/compliance/redaction.html"
    if _is_partial(request):
        template += "#policy"
    context = {
        "form": form,
        "policy": redaction_policy_or_defaults(workspace_id=access.workspace.pk),
        "preview_form": RedactionPreviewForm(initial={"text": preview_text}),
        **_preview_context(access, preview_text),
    }
    return _page(request, template, access, context, status=status)


@require_GET
@login_required
def redaction_policy_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    policy = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
    return _redaction_response(request, access, RedactionPolicyForm.of(policy))


@require_POST
@login_required
def redaction_policy_save(request: HttpRequest) -> HttpResponse:
    """Save the whole form through ``redaction_policy_update`` (validated, audited, the
    version bumped; a save that changes nothing is neither)."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = RedactionPolicyForm(request.POST)
    if form.is_valid():
        values = {name: form.cleaned_data[name] for name in form.fields}
        try:
            before = redaction_policy_or_defaults(workspace_id=access.workspace.pk).version
            policy = redaction_policy.redaction_policy_update(
                workspace_id=access.workspace.pk, actor=access.actor(request), values=values
            )
        except MemdeskError as error:
            _add_policy_error(form, error)
        else:
            if policy.version == before:
                messages.info(request, "Nothing changed.")
            else:
                messages.success(request, f"Redaction policy saved: version {policy.version}.")
            if not _is_partial(request):
                return redirect("dashboard:compliance_redaction")
            return _redaction_response(request, access, RedactionPolicyForm.of(policy))
    return _redaction_response(request, access, form, status=INVALID)


@require_POST
@login_required
def redaction_policy_preview(request: HttpRequest) -> HttpResponse:
    """What the stored policy finds in a text and what it leaves; nothing is stored."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = RedactionPreviewForm(request.POST)
    text = form.cleaned_data["text"] if form.is_valid() else ""
    if not _is_partial(request):
        policy = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
        return _redaction_response(
            request, access, RedactionPolicyForm.of(policy), preview_text=text
        )
    context = {"preview_form": form, **_preview_context(access, text)}
    response = _page(request, "dashboard/compliance/redaction.html#preview", access, context)
    response["Cache-Control"] = "private, no-store"
    return response
