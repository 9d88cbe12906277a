"""End-user erasure requests, their progress and receipts, and the check of what an end
user id covers that the hold and erasure forms make as it is typed. Needs
``MANAGE_COMPLIANCE``; every change goes through a governance service that audits it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import (
    Access,
    access_for,
    get_erasure_request_for_user,
)
from dashboard.compliance.forms import ErasureRequestForm
from dashboard.compliance.selectors import (
    end_user_coverage,
    erasure_receipt_event,
    open_erasures,
)
from dashboard.forms import add_service_error
from dashboard.rendering import INVALID, is_partial, render_page
from dashboard.selectors.users import user_labels
from governance.erasure import erasure_request_create
from governance.models import ErasureRequest
from governance.selectors import (
    erasure_request_list,
)
from tenancy.models import Capability

RECENT_ERASURES = 50
ERASURE_POLL_SECONDS = 2


def _erasure_response(
    request: HttpRequest, access: Access, form: ErasureRequestForm, *, status: int = 200
) -> HttpResponse:
    template = "dashboard/compliance/erasure.html"
    if is_partial(request):
        template += "#erasure"
    context = {"form": form, **_erasure_list_context(access)}
    return render_page(request, template, access, context, status=status)


def _erasure_list_context(access: Access) -> dict[str, Any]:
    return {
        "erasures": erasure_request_list(workspace=access.workspace, limit=RECENT_ERASURES),
        "erasures_open": open_erasures(workspace=access.workspace),
        "poll_seconds": ERASURE_POLL_SECONDS,
    }


@require_GET
@login_required
def erasure_page(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = ErasureRequestForm(initial={"end_user": request.GET.get("user", "")[:255]})
    return _erasure_response(request, access, form)


@require_GET
@login_required
def erasure_list(request: HttpRequest) -> HttpResponse:
    """The requests table alone: the page polls it while a request is open, so a
    finished erasure shows without a reload."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    if not is_partial(request):
        return redirect("dashboard:compliance_erasure")
    return render_page(
        request,
        "dashboard/compliance/erasure.html#requests",
        access,
        _erasure_list_context(access),
    )


@require_POST
@login_required
def erasure_create(request: HttpRequest) -> HttpResponse:
    """Record an erasure request; the service queues it, or records it as refused when a
    legal hold covers the end user (the refusal is shown next to the form). An id no
    conversation carries is most likely mistyped: the form says so, and records the
    request only when told to."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = ErasureRequestForm(request.POST)
    if form.is_valid() and not form.cleaned_data["confirm_unknown"]:
        coverage = end_user_coverage(
            workspace=access.workspace, end_user_id=form.cleaned_data["end_user"]
        )
        if not coverage.known:
            form.add_error("end_user", coverage.unknown_message)
    if form.is_valid():
        try:
            erasure = erasure_request_create(
                workspace=access.workspace,
                actor=access.actor(request),
                end_user_id=form.cleaned_data["end_user"],
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error, renames={"end_user_id": "end_user"})
        else:
            if erasure.status == ErasureRequest.Status.REFUSED:
                form.add_error(None, f"Erasure request {erasure.pk} refused: {erasure.error}")
                return _erasure_response(request, access, form, status=INVALID)
            messages.success(request, f"Erasure request {erasure.pk} queued.")
            if not is_partial(request):
                return redirect("dashboard:compliance_erasure_detail", erasure.pk)
            return _erasure_response(request, access, ErasureRequestForm(), status=201)
    return _erasure_response(request, access, form, status=INVALID)


@require_GET
@login_required
def end_user_check(request: HttpRequest) -> HttpResponse:
    """What an end user id covers, checked as it is typed into the hold and erasure
    forms: how many conversations carry it, or a warning that none does."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    end_user_id = request.GET.get("end_user", "").strip()[:255]
    coverage = (
        end_user_coverage(workspace=access.workspace, end_user_id=end_user_id)
        if end_user_id
        else None
    )
    context = {
        "coverage": coverage,
        "unknown_message": coverage.unknown_message if coverage else "",
        "check_id": request.GET.get("target", "end-user-check")[:40],
    }
    return render_page(request, "dashboard/compliance/_end_user_check.html", access, context)


@require_GET
@login_required
def erasure_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    erasure = get_erasure_request_for_user(access, request_id)
    open_statuses = (ErasureRequest.Status.PENDING, ErasureRequest.Status.RUNNING)
    context = {
        "erasure": erasure,
        "receipt": erasure_receipt_event(erasure=erasure),
        "requested_by": user_labels({erasure.requested_by})[erasure.requested_by],
        "polling": erasure.status in open_statuses,
        "poll_seconds": ERASURE_POLL_SECONDS,
    }
    template = "dashboard/compliance/erasure_detail.html"
    if is_partial(request):
        template += "#erasure_status"
    return render_page(request, template, access, context)


@require_GET
@login_required
def erasure_receipt(request: HttpRequest, request_id: int) -> HttpResponse:
    """The erasure's receipt as a JSON file: the request, what was deleted, the hash of
    the deleted ids and the audit event that closed it (with its chain hash)."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    erasure = get_erasure_request_for_user(access, request_id)
    event = erasure_receipt_event(erasure=erasure)
    after = (event.after or {}) if event else {}
    receipt = {
        "erasureRequestId": erasure.pk,
        "workspaceId": str(access.workspace.pk),
        "endUserId": erasure.end_user_id,
        "status": erasure.status,
        "reason": erasure.reason,
        "requestedBy": erasure.requested_by,
        "requestedAt": erasure.created_at,
        "completedAt": erasure.completed_at,
        "counts": erasure.counts,
        "error": erasure.error,
        "idsSha256": after.get("idsSha256"),
        "hashOf": after.get("hashOf"),
        "auditEvent": (
            {
                "id": event.pk,
                "sequence": event.sequence,
                "action": event.action,
                "hash": event.hash,
                "prevHash": event.prev_hash,
                "createdAt": event.created_at,
            }
            if event
            else None
        ),
    }
    response = JsonResponse(receipt, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="erasure-receipt-{erasure.pk}.json"'
    response["Cache-Control"] = "private, no-store"
    return response
