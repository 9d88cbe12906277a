"""Legal holds: placing one on a conversation or an end user, and releasing it. Needs
``MANAGE_COMPLIANCE``; every change goes through a governance service that audits it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import (
    Access,
    access_for,
    get_hold_for_user,
)
from dashboard.compliance.forms import HoldPlaceForm
from dashboard.compliance.selectors import (
    end_user_coverage,
)
from dashboard.forms import add_service_error
from dashboard.rendering import INVALID, is_partial, posted_reason, render_page
from governance.holds import legal_hold_place, legal_hold_release
from governance.selectors import (
    legal_hold_list,
)
from memory import selectors as memory_selectors
from tenancy.models import Capability


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
            try:
                conversation = memory_selectors.conversation_get(
                    workspace=access.workspace, conversation_id=str(conversation_id)
                )
            except MemdeskError:
                form.add_error("conversation", "No conversation with this id in this workspace.")
        end_user_id = form.cleaned_data["end_user"].strip()
        if form.is_valid() and end_user_id and not form.cleaned_data["confirm_unknown"]:
            coverage = end_user_coverage(workspace=access.workspace, end_user_id=end_user_id)
            if not coverage.known:
                form.add_error("end_user", coverage.unknown_message)
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
