"""The workspace's redaction policy with a preview, and re-scans of the workspace's
stored memory with their progress. Both need ``MANAGE_COMPLIANCE``, which the roles that
may reveal pseudonyms hold: the preview shows the pseudonym each value has or would get,
and is audited when it names one (``redaction_preview_labelled``)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for, get_rescan_for_user
from dashboard.compliance.forms import (
    RedactionPolicyForm,
    RedactionPreviewForm,
    RescanForm,
)
from dashboard.forms import add_service_error
from dashboard.rendering import INVALID, is_partial, render_page
from governance.models import RedactionPolicy, RescanRun
from governance.redaction.policy import redaction_policy_draft, redaction_policy_update
from governance.redaction.preview import redaction_preview_labelled
from governance.redaction.review import rescan_run_request
from governance.selectors import (
    redaction_policy_or_defaults,
    rescan_run_list,
)
from tenancy.models import Capability

RECENT_RESCANS = 10
RESCAN_POLL_SECONDS = 2


def _preview(
    request: HttpRequest, access: Access, text: str, policy: RedactionPolicy | None
) -> dict[str, Any] | None:
    if not text.strip():
        return None
    preview = redaction_preview_labelled(
        workspace_id=access.workspace.pk, text=text, actor=access.actor(request), policy=policy
    )
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


def _preview_context(
    request: HttpRequest, access: Access, text: str, form: RedactionPolicyForm | None
) -> dict[str, Any]:
    """The text under the saved policy and, when the form holds unsaved changes, under
    the draft beside it."""
    context: dict[str, Any] = {
        "preview_text": text,
        "saved_preview": _preview(request, access, text, None),
    }
    if form is not None and form.is_bound:
        draft, valid = _draft(access, form)
        context["draft_invalid"] = not valid
        if draft is not None:
            context["draft_preview"] = _preview(request, access, text, draft)
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
        **_preview_context(request, access, preview_text, form if form.is_bound else None),
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
    context = {"policy": stored, **_preview_context(request, access, text, form)}
    response = render_page(request, "dashboard/compliance/redaction.html#preview", access, context)
    response["Cache-Control"] = "private, no-store"
    return response


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
