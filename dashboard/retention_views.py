"""The retention pages of the dashboard: legal holds, retention sweeps (a dry run, a
queued run and its progress) and end-user erasure requests. All need
``MANAGE_COMPLIANCE``; every change goes through a governance service that audits it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard import selectors as dashboard_selectors
from dashboard.access import (
    Access,
    access_for,
    get_erasure_request_for_user,
    get_hold_for_user,
    get_retention_policy_for_user,
    get_sweep_for_user,
)
from dashboard.compliance_selectors import (
    EndUserCoverage,
    conversation_titles,
    end_user_coverage,
    erasure_receipt_event,
    open_erasures,
)
from dashboard.forms import (
    ErasureRequestForm,
    HoldPlaceForm,
    RetentionPolicyForm,
    add_service_error,
)
from dashboard.models import Capability
from dashboard.rendering import INVALID, is_partial, posted_reason, render_page
from governance import retention
from governance.erasure import erasure_request_create
from governance.holds import legal_hold_place, legal_hold_release
from governance.models import ErasureRequest, RetentionPolicy, RetentionSweep
from governance.selectors import (
    erasure_request_list,
    legal_hold_list,
    retention_policy_list,
    retention_sweep_list,
)

RECENT_SWEEPS = 10
SWEEP_POLL_SECONDS = 2
RECENT_ERASURES = 50
ERASURE_POLL_SECONDS = 2
DRY_RUN_CONVERSATIONS = 200


# --- legal holds ------------------------------------------------------------------------------


def _holds_context(access: Access, form: HoldPlaceForm) -> dict[str, Any]:
    return {"form": form, "holds": legal_hold_list(workspace=access.workspace, active=True)}


def _holds_response(
    request: HttpRequest, access: Access, form: HoldPlaceForm, *, status: int = 200
) -> HttpResponse:
    template = "dashboard/compliance/holds.html"
    if is_partial(request):
        template += "#holds"
    return render_page(request, template, access, _holds_context(access, form), status=status)


@require_GET
@login_required
def holds(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    form = HoldPlaceForm(
        initial={
            "conversation": request.GET.get("conversation", "")[:36],
            "end_user": request.GET.get("user", "")[:255],
        }
    )
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
        end_user_id = form.cleaned_data["end_user"].strip()
        if form.is_valid() and end_user_id and not form.cleaned_data["confirm_unknown"]:
            coverage = end_user_coverage(workspace=access.workspace, end_user_id=end_user_id)
            if not coverage.known:
                form.add_error("end_user", _unknown_user_message(coverage))
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
                add_service_error(
                    form,
                    error,
                    renames={"end_user_id": "end_user", "conversation_id": "conversation"},
                )
            else:
                messages.success(request, f"Legal hold {hold.pk} placed.")
                if not is_partial(request):
                    return redirect("dashboard:compliance_holds")
                return _holds_response(request, access, HoldPlaceForm(), status=201)
    return _holds_response(request, access, form, status=INVALID)


@require_POST
@login_required
def hold_release(request: HttpRequest, hold_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    hold = get_hold_for_user(access, hold_id)
    error = ""
    try:
        hold = legal_hold_release(
            hold=hold, actor=access.actor(request), reason=posted_reason(request)
        )
    except MemdeskError as refused:
        error = refused.message
    if not is_partial(request):
        if error:
            messages.error(request, f"Legal hold {hold.pk}: {error}")
        else:
            messages.success(request, f"Legal hold {hold.pk} released.")
        return redirect("dashboard:compliance_holds")
    context = {"hold": hold, "error": error}
    return render_page(
        request,
        "dashboard/compliance/holds.html#hold_row",
        access,
        context,
        status=INVALID if error else 200,
    )


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
    if is_partial(request):
        template += "#sweeps"
    return render_page(request, template, access, _retention_context(access))


def _policy_form_response(
    request: HttpRequest,
    access: Access,
    form: RetentionPolicyForm,
    policy: RetentionPolicy | None,
    *,
    status: int = 200,
) -> HttpResponse:
    context = {"form": form, "policy": policy}
    return render_page(
        request, "dashboard/compliance/retention_policy.html", access, context, status=status
    )


def _policy_save(
    request: HttpRequest, access: Access, form: RetentionPolicyForm, policy: RetentionPolicy | None
) -> RetentionPolicy | None:
    """Create or update through the retention services (validated, audited with the
    reason); a refusal is shown next to the field it names."""
    if not form.is_valid():
        return None
    actor, reason = access.actor(request), form.cleaned_data["reason"]
    try:
        if policy is None:
            return retention.retention_policy_create(
                workspace=access.workspace, actor=actor, reason=reason, **form.values()
            )
        return retention.retention_policy_update(
            policy=policy, actor=actor, reason=reason, **form.values()
        )
    except MemdeskError as error:
        add_service_error(form, error)
        return None


@require_http_methods(["GET", "POST"])
@login_required
def retention_policy_new(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    if request.method == "GET":
        return _policy_form_response(request, access, RetentionPolicyForm(), None)
    form = RetentionPolicyForm(request.POST)
    saved = _policy_save(request, access, form, None)
    if saved is None:
        return _policy_form_response(request, access, form, None, status=INVALID)
    messages.success(request, f"Retention policy {saved.name!r} created.")
    return redirect("dashboard:compliance_retention")


@require_http_methods(["GET", "POST"])
@login_required
def retention_policy_edit(request: HttpRequest, policy_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    policy = get_retention_policy_for_user(access, policy_id)
    if request.method == "GET":
        return _policy_form_response(request, access, RetentionPolicyForm.of(policy), policy)
    form = RetentionPolicyForm(request.POST)
    saved = _policy_save(request, access, form, policy)
    if saved is None:
        return _policy_form_response(request, access, form, policy, status=INVALID)
    messages.success(request, f"Retention policy {saved.name!r} saved.")
    return redirect("dashboard:compliance_retention")


@require_POST
@login_required
def retention_dry_run(request: HttpRequest) -> HttpResponse:
    """Count what a sweep would delete now; nothing is deleted."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    sweep = retention.retention_dry_run(workspace=access.workspace, actor=access.actor(request))
    if not is_partial(request):
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
        if not is_partial(request):
            messages.error(request, refused.message)
            return redirect("dashboard:compliance_retention")
        context = {"refused": refused.message}
        return render_page(
            request, "dashboard/compliance/retention.html#refused", access, context, status=INVALID
        )
    if not is_partial(request):
        return redirect("dashboard:compliance_sweep", sweep.pk)
    return _sweep_response(request, access, sweep, status=201)


def _sweep_response(
    request: HttpRequest, access: Access, sweep: RetentionSweep, *, status: int = 200
) -> HttpResponse:
    open_statuses = (RetentionSweep.Status.PENDING, RetentionSweep.Status.RUNNING)
    context: dict[str, Any] = {
        "sweep": sweep,
        "polling": sweep.status in open_statuses,
        "poll_seconds": SWEEP_POLL_SECONDS,
    }
    if sweep.dry_run:
        context.update(_dry_run_conversations(access, sweep))
    template = "dashboard/compliance/sweep.html"
    if is_partial(request):
        template += "#sweep_status"
    return render_page(request, template, access, context, status=status)


def _dry_run_conversations(access: Access, sweep: RetentionSweep) -> dict[str, Any]:
    """The conversations the dry run's sweep would touch, worked out again for the
    moment it ran (same cutoffs; rows deleted since are no longer counted)."""
    try:
        due = retention.retention_due_preview(
            workspace=access.workspace, now=sweep.created_at, policy=sweep.policy
        )
    except MemdeskError:
        return {}
    ids = {uuid.UUID(pk) for pk in due.by_conversation} | {
        uuid.UUID(pk) for pk in due.held_conversations
    }
    titles = conversation_titles(workspace=access.workspace, ids=ids)
    rows = sorted(
        (
            (titles[uuid.UUID(pk)], counts)
            for pk, counts in due.by_conversation.items()
            if uuid.UUID(pk) in titles
        ),
        key=lambda row: -sum(row[1].values()),
    )
    held = [titles[uuid.UUID(pk)] for pk in due.held_conversations if uuid.UUID(pk) in titles]
    return {
        "due_conversations": rows[:DRY_RUN_CONVERSATIONS],
        "due_conversation_count": len(rows),
        "held_conversations": held[:DRY_RUN_CONVERSATIONS],
        "held_conversation_count": len(held),
        "due_listed": True,
    }


@require_GET
@login_required
def retention_sweep_status(request: HttpRequest, sweep_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    sweep = get_sweep_for_user(access, sweep_id)
    return _sweep_response(request, access, sweep)


# --- erasure ----------------------------------------------------------------------------------


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
            form.add_error("end_user", _unknown_user_message(coverage))
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


def _unknown_user_message(coverage: EndUserCoverage) -> str:
    message = (
        f"No conversation in this workspace has the end user id “{coverage.end_user_id}”: "
        "check the spelling."
    )
    if coverage.similar:
        message += " Did you mean " + " or ".join(f"“{s}”" for s in coverage.similar) + "?"
    return message


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
        "unknown_message": _unknown_user_message(coverage) if coverage else "",
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
        "requested_by": dashboard_selectors.user_labels({erasure.requested_by})[
            erasure.requested_by
        ],
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
