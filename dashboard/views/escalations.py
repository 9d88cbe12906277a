"""Escalations: the conversations agents handed to a person. The list shows the
workspace's open ones (or resolved, or all), newest first, each linked to its
conversation; a reviewer resolves one with a note. The reason an agent gave may hold
personal data: it is shown to the roles that may resolve (``EDIT_MEMORY``), with each
value the redaction policy finds masked as messages are, and withheld from viewers."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for, get_escalation_for_user
from dashboard.forms import EscalationResolveForm, add_service_error
from dashboard.rendering import INVALID, render_page
from dashboard.selectors.escalations import escalations_masked
from memory import selectors as memory_selectors
from memory.models import Escalation
from memory.services import escalations as escalation_services
from tenancy.models import Capability

ESCALATIONS_SHOWN = 200
STATUSES = {"open": Escalation.Status.OPEN, "resolved": Escalation.Status.RESOLVED, "all": None}


def _list_context(access: Access, status_name: str) -> dict[str, Any]:
    escalations = list(
        memory_selectors.escalation_workspace_list(
            workspace=access.workspace, status=STATUSES[status_name]
        )[:ESCALATIONS_SHOWN]
    )
    escalations_masked(escalations, workspace_id=access.workspace.pk)
    return {
        "escalations": escalations,
        "shown_max": ESCALATIONS_SHOWN,
        "status": status_name,
        "statuses": list(STATUSES),
    }


@require_GET
@login_required
def escalation_list(request: HttpRequest) -> HttpResponse:
    status_name = request.GET.get("status", "open")
    if status_name not in STATUSES:
        status_name = "open"
    access = access_for(request, Capability.VIEW_MEMORY)
    context = _list_context(access, status_name)
    context["form"] = EscalationResolveForm()
    return render_page(request, "dashboard/escalations.html", access, context)


@require_POST
@login_required
def escalation_resolve(request: HttpRequest, escalation_id: uuid.UUID) -> HttpResponse:
    """Close an escalation with a note (audited); back to the page it was resolved from."""
    access = access_for(request, Capability.EDIT_MEMORY)
    escalation = get_escalation_for_user(access, escalation_id)
    form = EscalationResolveForm(request.POST)
    if form.is_valid():
        try:
            escalation_services.escalation_resolve(
                escalation=escalation, actor=access.actor(request), note=form.cleaned_data["note"]
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            messages.success(request, "Escalation resolved.")
            if request.POST.get("back") == "conversation":
                return redirect(
                    reverse("dashboard:conversation_detail", args=[escalation.conversation_id])
                    + "#escalations"
                )
            return redirect("dashboard:escalation_list")
    context = _list_context(access, "open")
    context.update(form=form, failed=escalation.pk)
    return render_page(request, "dashboard/escalations.html", access, context, status=INVALID)
