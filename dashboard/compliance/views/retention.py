"""Retention: the workspace's policies, a dry run, a queued sweep and its progress. Needs
``MANAGE_COMPLIANCE``; every change goes through a governance service that audits it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard.access import (
    Access,
    access_for,
    get_retention_policy_for_user,
    get_sweep_for_user,
)
from dashboard.compliance.forms import RetentionPolicyForm
from dashboard.compliance.selectors import (
    conversation_titles,
)
from dashboard.forms import add_service_error
from dashboard.rendering import INVALID, is_partial, render_page
from governance.models import RetentionPolicy, RetentionSweep
from governance.retention import plan as retention_plan
from governance.retention.plan import retention_due_preview, retention_sweep_request
from governance.retention.policies import retention_policy_create, retention_policy_update
from governance.selectors import (
    retention_policy_list,
    retention_sweep_list,
)
from tenancy.models import Capability

RECENT_SWEEPS = 10
SWEEP_POLL_SECONDS = 2
DRY_RUN_CONVERSATIONS = 200


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
            return retention_policy_create(
                workspace=access.workspace, actor=actor, reason=reason, **form.values()
            )
        return retention_policy_update(policy=policy, actor=actor, reason=reason, **form.values())
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
    sweep = retention_plan.retention_dry_run(
        workspace=access.workspace, actor=access.actor(request)
    )
    if not is_partial(request):
        return redirect("dashboard:compliance_sweep", sweep.pk)
    return _sweep_response(request, access, sweep)


@require_POST
@login_required
def retention_run(request: HttpRequest) -> HttpResponse:
    """Queue a sweep of the workspace for a worker; the page then polls its progress."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    try:
        sweep = retention_sweep_request(workspace=access.workspace, actor=access.actor(request))
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
        due = retention_due_preview(
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
