"""The redaction pages of the dashboard: the review queue, where a person approves or
dismisses what the detectors were unsure of, the workspace's redaction policy with a
preview, and re-scans of the workspace's stored memory with their progress. The queue
needs ``REVIEW_FINDINGS`` (reviewers, compliance officers, admins): it shows suspected
personal data in clear to the people whose work is deciding whether it is redacted. The
policy and re-scans need ``MANAGE_COMPLIANCE``."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from core.paging import is_ascii_digits
from dashboard.access import Access, access_for, get_finding_for_user, get_rescan_for_user
from dashboard.compliance_selectors import conversation_titles, finding_counts
from dashboard.forms import (
    RedactionPolicyForm,
    RedactionPreviewForm,
    RescanForm,
    ReviewFilterForm,
    add_service_error,
)
from dashboard.models import Capability
from dashboard.rendering import INVALID, is_partial, posted_reason, render_page
from governance.models import RedactionFinding, RedactionPolicy, RescanRun
from governance.redaction_policy import redaction_policy_draft, redaction_policy_update
from governance.review import (
    redaction_finding_approve,
    redaction_finding_dismiss,
    rescan_run_request,
)
from governance.selectors import (
    redaction_finding_get,
    redaction_finding_list,
    redaction_finding_texts,
    redaction_policy_or_defaults,
    redaction_preview,
    rescan_run_list,
)

FINDINGS_PER_PAGE = 50
REASON_REQUIRED = "Give a reason: every review decision is recorded in the audit log with one."
DECISIONS = ("approve", "dismiss")
RECENT_RESCANS = 10
RESCAN_POLL_SECONDS = 2


# --- redaction review queue -------------------------------------------------------------------


def _add_texts(findings: list[RedactionFinding], workspace_id: uuid.UUID) -> None:
    """Split each finding's target text around ``[start:end]`` so the page can mark the
    value: ``text_before``, ``text_value``, ``text_after`` (all empty when the target is
    gone or its text no longer reaches the offsets)."""
    texts = redaction_finding_texts(workspace_id=workspace_id, findings=findings)
    for finding in findings:
        text = texts.get((finding.target_type, str(finding.target_id)))
        found = text is not None and finding.end <= len(text) and finding.start < finding.end
        text = text if found and text is not None else ""
        finding.text_found = found  # type: ignore[attr-defined]  # for the template
        finding.text_before = text[: finding.start]  # type: ignore[attr-defined]  # for the template
        finding.text_value = text[finding.start : finding.end]  # type: ignore[attr-defined]  # for the template
        finding.text_after = text[finding.end :]  # type: ignore[attr-defined]  # for the template


def _decide(
    finding: RedactionFinding, decision: str, access: Access, request: HttpRequest, reason: str
) -> RedactionFinding:
    actor = access.actor(request)
    if decision == "approve":
        return redaction_finding_approve(finding=finding, actor=actor, reason=reason)
    return redaction_finding_dismiss(finding=finding, actor=actor, reason=reason)


def _queue_context(
    access: Access, query: QueryDict | None = None, cursor: str | None = None
) -> dict[str, Any]:
    counts = finding_counts(workspace=access.workspace)
    form = ReviewFilterForm(query if query is not None else None, counts=counts)
    filters = form.values()
    findings, next_cursor = redaction_finding_list(
        workspace_id=access.workspace.pk,
        status=RedactionFinding.Status.PENDING_REVIEW,
        conversation_id=None,
        limit=FINDINGS_PER_PAGE,
        cursor=cursor,
        entity_type=filters.get("entity_type", ""),
        min_score=filters.get("min_score"),
        max_score=filters.get("max_score"),
    )
    _add_texts(findings, access.workspace.pk)
    _add_conversations(findings, access)
    filter_query = {name: str(value) for name, value in filters.items()}
    return {
        "filter_form": form,
        "filter_query": filter_query,
        "next_query": urlencode({**filter_query, "cursor": next_cursor}) if next_cursor else "",
        "pending_count": sum(counts.values()),
        "counts": counts,
        "findings": findings,
        "next_cursor": next_cursor,
        "is_first_page": cursor is None,
    }


def _add_conversations(findings: list[RedactionFinding], access: Access) -> None:
    """Each finding's conversation, so the link names it (title, end user)."""
    conversations = conversation_titles(
        workspace=access.workspace, ids={f.conversation_id for f in findings}
    )
    for finding in findings:
        finding.conversation_row = conversations.get(finding.conversation_id)  # type: ignore[attr-defined]  # for the template


def _filter_params(request: HttpRequest) -> QueryDict:
    """The queue's filters as they came with a decision (hidden fields of the form)."""
    params = QueryDict(mutable=True)
    for name in ("entity_type", "min_score", "max_score"):
        value = request.POST.get(name, "")
        if value:
            params[name] = value
    return params


@require_GET
@login_required
def review_queue(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.REVIEW_FINDINGS)
    try:
        context = _queue_context(access, request.GET, request.GET.get("cursor") or None)
    except MemdeskError:
        context = _queue_context(access, request.GET, None)
    template = "dashboard/compliance/review_queue.html"
    if is_partial(request):
        return render_page(request, f"{template}#queue", access, context)
    return render_page(request, template, access, context)


def _queue_redirect(request: HttpRequest) -> HttpResponse:
    params = _filter_params(request)
    url = reverse("dashboard:compliance_review")
    return redirect(f"{url}?{params.urlencode()}" if params else url)


@require_POST
@login_required
def review_decide(request: HttpRequest, finding_id: int, decision: str) -> HttpResponse:
    """Approve or dismiss one finding, with the reason the person typed (audited)."""
    if decision not in DECISIONS:
        raise Http404("No such decision.")
    access = access_for(request, Capability.REVIEW_FINDINGS)
    finding = get_finding_for_user(access, finding_id)
    reason = posted_reason(request)
    error = ""
    if not reason:
        error = REASON_REQUIRED
    else:
        try:
            finding = _decide(finding, decision, access, request, reason)
        except MemdeskError as refused:
            error = refused.message
    if not is_partial(request):
        if error:
            messages.error(request, f"Finding {finding.pk}: {error}")
        else:
            messages.success(request, f"Finding {finding.pk} {finding.get_status_display()}.")
        return _queue_redirect(request)
    _add_texts([finding], access.workspace.pk)
    _add_conversations([finding], access)
    context = {"finding": finding, "error": error}
    return render_page(
        request,
        "dashboard/compliance/review_queue.html#finding_row",
        access,
        context,
        status=INVALID if error else 200,
    )


@require_POST
@login_required
def review_bulk(request: HttpRequest) -> HttpResponse:
    """Approve or dismiss the checked findings with one reason, each in its own
    transaction: one stale finding is reported and does not undo the others."""
    access = access_for(request, Capability.REVIEW_FINDINGS)
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS:
        raise Http404("No such decision.")
    ids = [raw for raw in request.POST.getlist("finding") if is_ascii_digits(raw)]
    reason = posted_reason(request)
    decided, errors = 0, []
    if ids and reason:
        for finding_id in ids:
            try:
                finding = redaction_finding_get(
                    workspace_id=access.workspace.pk, finding_id=finding_id
                )
                _decide(finding, decision, access, request, reason)
            except MemdeskError as refused:
                errors.append(f"Finding {finding_id}: {refused.message}")
            else:
                decided += 1
    verb = "approved" if decision == "approve" else "dismissed"
    if not ids:
        messages.error(request, "Tick at least one finding first.")
    elif not reason:
        messages.error(request, REASON_REQUIRED)
    else:
        messages.success(request, f"{decided} of {len(ids)} finding{pluralize(len(ids))} {verb}.")
    for error in errors:
        messages.error(request, error)
    if not is_partial(request):
        return _queue_redirect(request)
    return render_page(
        request,
        "dashboard/compliance/review_queue.html#queue",
        access,
        _queue_context(access, _filter_params(request)),
        status=INVALID if not ids or not reason else 200,
    )


# --- redaction policy -------------------------------------------------------------------------


def _preview(access: Access, text: str, policy: RedactionPolicy | None) -> dict[str, Any] | None:
    if not text.strip():
        return None
    preview = redaction_preview(workspace_id=access.workspace.pk, text=text, policy=policy)
    findings = [
        {"finding": finding, "value": text[finding.start : finding.end]}
        for finding in preview.findings
    ]
    return {"result": preview, "findings": findings}


def _draft(access: Access, form: RedactionPolicyForm) -> tuple[RedactionPolicy | None, bool]:
    """The unsaved policy the form describes, and whether the form is valid enough to
    preview it (a bound form with errors previews nothing)."""
    if not form.is_bound:
        return None, True
    # The reason is for saving; a draft previews without one.
    valid = all(name == "reason" for name in form.errors)
    if not valid:
        return None, False
    try:
        draft = redaction_policy_draft(
            workspace_id=access.workspace.pk, values=form.policy_values()
        )
    except MemdeskError as error:
        form.add_service_error(error)
        return None, False
    return draft, True


def _preview_context(access: Access, text: str, form: RedactionPolicyForm | None) -> dict[str, Any]:
    """The text under the saved policy and, when the form holds unsaved changes, under
    the draft beside it."""
    context: dict[str, Any] = {"preview_text": text, "saved_preview": _preview(access, text, None)}
    if form is not None and form.is_bound:
        draft, valid = _draft(access, form)
        context["draft_invalid"] = not valid
        if draft is not None:
            context["draft_preview"] = _preview(access, text, draft)
    return context


def _redaction_response(
    request: HttpRequest,
    access: Access,
    form: RedactionPolicyForm,
    *,
    preview_text: str = "",
    status: int = 200,
    rescan_offer: bool = False,
) -> HttpResponse:
    template = "dashboard/compliance/redaction.html"
    if is_partial(request):
        template += "#policy"
    policy = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
    context = {
        "form": form,
        "policy": policy,
        "rescan_offer": rescan_offer and policy.version > 1,
        "rescan_form": RescanForm(
            initial={"reason": f"Redaction policy changed to version {policy.version}"}
        ),
        **_preview_context(access, preview_text, form if form.is_bound else None),
    }
    response = render_page(request, template, access, context, status=status)
    if preview_text:
        response["Cache-Control"] = "private, no-store"
    return response


@require_GET
@login_required
def redaction_policy_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    policy = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
    return _redaction_response(
        request,
        access,
        RedactionPolicyForm.of(policy),
        rescan_offer=request.GET.get("saved") == str(policy.version),
    )


@require_POST
@login_required
def redaction_policy_save(request: HttpRequest) -> HttpResponse:
    """Save the whole form through ``redaction_policy_update`` (validated, audited with
    the reason, the version bumped; a save that changes nothing is neither). Then offer
    to re-scan what is stored under the new version."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    stored = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
    form = RedactionPolicyForm(request.POST, policy=stored)
    if form.is_valid():
        try:
            policy = redaction_policy_update(
                workspace_id=access.workspace.pk,
                actor=access.actor(request),
                values=form.policy_values(),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            form.add_service_error(error)
        else:
            changed = policy.version != stored.version
            if changed:
                messages.success(request, f"Redaction policy saved: version {policy.version}.")
            else:
                messages.info(request, "Nothing changed.")
            if not is_partial(request):
                url = reverse("dashboard:compliance_redaction")
                return redirect(f"{url}?saved={policy.version}" if changed else url)
            return _redaction_response(
                request, access, RedactionPolicyForm.of(policy), rescan_offer=changed
            )
    return _redaction_response(
        request, access, form, preview_text=_preview_text(request), status=INVALID
    )


def _preview_text(request: HttpRequest) -> str:
    form = RedactionPreviewForm(request.POST)
    return form.cleaned_data["text"] if form.is_valid() else ""


@require_POST
@login_required
def redaction_policy_preview(request: HttpRequest) -> HttpResponse:
    """What the saved policy finds in a text and, when the policy form came with it,
    what the unsaved draft finds; nothing is stored."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    text = _preview_text(request)
    stored = redaction_policy_or_defaults(workspace_id=access.workspace.pk)
    has_draft = "score_threshold" in request.POST
    form = RedactionPolicyForm(request.POST, policy=stored) if has_draft else None
    if not is_partial(request):
        return _redaction_response(
            request, access, form or RedactionPolicyForm.of(stored), preview_text=text
        )
    context = {"policy": stored, **_preview_context(access, text, form)}
    response = render_page(request, "dashboard/compliance/redaction.html#preview", access, context)
    response["Cache-Control"] = "private, no-store"
    return response


# --- re-scans ----------------------------------------------------------------------------------


def _rescan_page(
    request: HttpRequest, access: Access, form: RescanForm, *, status: int = 200
) -> HttpResponse:
    context = {
        "form": form,
        "runs": rescan_run_list(workspace=access.workspace, limit=RECENT_RESCANS),
    }
    template = "dashboard/compliance/rescan.html"
    if is_partial(request):
        template += "#rescan_form"
    return render_page(request, template, access, context, status=status)


@require_GET
@login_required
def rescan_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    return _rescan_page(request, access, RescanForm())


@require_POST
@login_required
def rescan_start(request: HttpRequest) -> HttpResponse:
    """Queue a re-scan of the workspace (reason required, audited) for a worker; the
    page then polls its progress. One at a time: while one is open, the form says so."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = RescanForm(request.POST)
    if form.is_valid():
        try:
            run = rescan_run_request(
                workspace=access.workspace,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                tiers=form.cleaned_data["tiers"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect("dashboard:compliance_rescan_run", run.pk)
            return _rescan_run_response(request, access, run, status=201)
    return _rescan_page(request, access, form, status=INVALID)


def _rescan_run_response(
    request: HttpRequest, access: Access, run: RescanRun, *, status: int = 200
) -> HttpResponse:
    context = {"run": run, "polling": run.is_open, "poll_seconds": RESCAN_POLL_SECONDS}
    template = "dashboard/compliance/rescan_run.html"
    if is_partial(request):
        template += "#rescan_status"
    return render_page(request, template, access, context, status=status)


@require_GET
@login_required
def rescan_run(request: HttpRequest, run_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    return _rescan_run_response(request, access, get_rescan_for_user(access, run_id))
