"""Memory waiting for approval: the reflections a workspace's approval policy holds back,
the longest waiting first, each beside its sources with what it drops of them; a
reviewer approves one (as written, or edited first) or rejects it, with a reason."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for
from dashboard.forms import ApproveForm, RejectForm, add_service_error
from dashboard.rendering import INVALID, render_page
from dashboard.selectors.notes import note_authors
from memory.approval.flags import Source, what_it_drops
from memory.approval.queue import approval_figures, sources_of, waiting_reflections
from memory.approval.services import reflection_approve, reflection_reject
from memory.models import Reflection
from tenancy.models import Capability

SHOWN = 100


def _ids(reflection_id: uuid.UUID, form: str = "approve") -> str:
    """Field ids of their own for each reflection's forms (the page holds many)."""
    return f"{form}-{reflection_id}-%s"


def _queue(access: Access, failed: uuid.UUID | None = None, form: Any = None) -> dict[str, Any]:
    now = timezone.now()
    items = []
    reflections = list(waiting_reflections(workspace_id=access.workspace.pk)[:SHOWN])
    note_authors(notes=reflections)
    for reflection in reflections:
        sources = sources_of(reflection)
        drops = what_it_drops(
            reflection.text,
            reflection.referenced_at,
            [Source(str(o.pk), o.text, o.priority, o.referenced_at) for o in sources],
        )
        failing = reflection.pk == failed
        items.append(
            {
                "reflection": reflection,
                "sources": [(o, drops.high_priority.get(str(o.pk), [])) for o in sources],
                "dropped_dates": drops.dates,
                "waited": now - reflection.created_at,
                "approve": form
                if failing and isinstance(form, ApproveForm)
                else ApproveForm(initial={"text": reflection.text}, auto_id=_ids(reflection.pk)),
                "reject": form
                if failing and isinstance(form, RejectForm)
                else RejectForm(auto_id=_ids(reflection.pk, "reject")),
            }
        )
    shown = {r.pk for r in reflections}
    return {
        "items": items,
        # A decision refused on a reflection no longer in the queue (decided meanwhile).
        "errors": form.non_field_errors() if form is not None and failed not in shown else [],
        "shown_max": SHOWN,
        "figures": approval_figures(workspace_id=access.workspace.pk, now=now),
        "mode": access.workspace.approval,
        "by_tag": access.workspace.approval_by_tag,
    }


@require_GET
@login_required
def approval_queue(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.VIEW_MEMORY)
    return render_page(request, "dashboard/approvals.html", access, _queue(access))


def _waiting(access: Access, reflection_id: uuid.UUID) -> Reflection:
    reflection = (
        Reflection.objects.filter(pk=reflection_id, conversation__workspace=access.workspace)
        .select_related("conversation")
        .first()
    )
    if reflection is None:
        raise Http404("No such reflection in this workspace.")
    return reflection


def _decided(
    request: HttpRequest, access: Access, reflection_id: uuid.UUID, form: ApproveForm | RejectForm
) -> HttpResponse:
    reflection = _waiting(access, reflection_id)
    if form.is_valid():
        data = form.cleaned_data
        try:
            if isinstance(form, ApproveForm):
                edited = data["text"].strip() != reflection.text
                reflection_approve(
                    reflection=reflection,
                    actor=access.actor(request),
                    reason=data["reason"],
                    text=data["text"] if edited else None,
                )
                messages.success(request, "Approved: agents are served it from now on.")
            else:
                reflection_reject(
                    reflection=reflection, actor=access.actor(request), reason=data["reason"]
                )
                messages.success(request, "Rejected: agents will never be served it.")
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return redirect("dashboard:approval_queue")
    context = _queue(access, failed=reflection.pk, form=form)
    return render_page(request, "dashboard/approvals.html", access, context, status=INVALID)


@require_POST
@login_required
def approval_approve(request: HttpRequest, reflection_id: uuid.UUID) -> HttpResponse:
    access = access_for(request, Capability.EDIT_MEMORY)
    form = ApproveForm(request.POST, auto_id=_ids(reflection_id))
    return _decided(request, access, reflection_id, form)


@require_POST
@login_required
def approval_reject(request: HttpRequest, reflection_id: uuid.UUID) -> HttpResponse:
    access = access_for(request, Capability.EDIT_MEMORY)
    form = RejectForm(request.POST, auto_id=_ids(reflection_id, "reject"))
    return _decided(request, access, reflection_id, form)
