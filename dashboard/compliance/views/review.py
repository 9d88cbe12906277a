"""The review queue, where a person approves or dismisses what the detectors were unsure
of. It needs ``REVIEW_FINDINGS`` (reviewers, compliance officers, admins): it shows
suspected personal data in clear to the people whose work is deciding whether it is
redacted."""

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
from dashboard.access import Access, access_for, get_finding_for_user
from dashboard.compliance.forms import (
    ReviewFilterForm,
)
from dashboard.compliance.selectors import (
    conversation_titles,
    finding_counts,
    unscanned_messages,
)
from dashboard.rendering import INVALID, is_partial, posted_reason, render_page
from governance.models import RedactionFinding
from governance.redaction.review import redaction_finding_approve, redaction_finding_dismiss
from governance.selectors import (
    redaction_finding_get,
    redaction_finding_list,
    redaction_finding_texts,
)
from tenancy.models import Capability

FINDINGS_PER_PAGE = 50
REASON_REQUIRED = "Give a reason: every review decision is recorded in the audit log with one."
DECISIONS = ("approve", "dismiss")


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
        "unscanned": unscanned_messages(workspace=access.workspace),
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
