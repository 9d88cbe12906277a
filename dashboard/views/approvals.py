"""Memory waiting for approval: the notes a workspace's approval policy holds back, the
longest waiting first, each beside its sources (a reflection's observations, with what it
drops of them; an observation's messages, masked as the conversation page masks them); a
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
from dashboard.selectors.context import mask_values, masked_values_of
from dashboard.selectors.notes import note_authors
from memory.approval import services
from memory.approval.flags import Source, what_it_drops
from memory.approval.queue import approval_figures, messages_of, sources_of, waiting_notes
from memory.models import Message, Observation, Reflection
from tenancy.models import Capability

SHOWN = 100  # of each kind
KINDS: dict[str, type[Observation] | type[Reflection]] = {
    "observation": Observation,
    "reflection": Reflection,
}


def _ids(note_id: uuid.UUID, form: str) -> str:
    """Field ids of their own for each note's forms (the page holds many)."""
    return f"{form}-{note_id}-%s"


def _reflection_item(reflection: Reflection, sources: list[Observation]) -> dict[str, Any]:
    drops = what_it_drops(
        reflection.text,
        reflection.referenced_at,
        [Source(str(o.pk), o.text, o.priority, o.referenced_at) for o in sources],
    )
    return {
        "kind": "reflection",
        "sources": [(o, drops.high_priority.get(str(o.pk), [])) for o in sources],
        "dropped_dates": drops.dates,
    }


def _observation_item(said: list[Message], masks: list[tuple[str, str]]) -> dict[str, Any]:
    return {"kind": "observation", "said": [(m, mask_values(m.content, masks)) for m in said]}


def _queue(access: Access, failed: uuid.UUID | None = None, form: Any = None) -> dict[str, Any]:
    now = timezone.now()
    notes: list[Observation | Reflection] = [
        *waiting_notes(Reflection, workspace_id=access.workspace.pk)[:SHOWN],
        *waiting_notes(Observation, workspace_id=access.workspace.pk)[:SHOWN],
    ]
    notes.sort(key=lambda n: n.created_at)
    note_authors(notes=notes)
    sources = sources_of([n for n in notes if isinstance(n, Reflection)])
    said = messages_of([n for n in notes if isinstance(n, Observation)])
    # What the conversation page masks in these messages: one lookup for the queue.
    masks = masked_values_of(
        workspace_id=access.workspace.pk,
        message_ids=[m.pk for messages in said.values() for m in messages],
        recorder=None,
    )
    items = []
    for note in notes:
        item = (
            _reflection_item(note, sources[note.pk])
            if isinstance(note, Reflection)
            else _observation_item(said[note.pk], masks)
        )
        failing = note.pk == failed
        item.update(
            note=note,
            approve=form
            if failing and isinstance(form, ApproveForm)
            else ApproveForm(initial={"text": note.text}, auto_id=_ids(note.pk, "approve")),
            reject=form
            if failing and isinstance(form, RejectForm)
            else RejectForm(auto_id=_ids(note.pk, "reject")),
        )
        items.append(item)
    return {
        "items": items,
        # A decision refused on a note no longer in the queue (decided meanwhile).
        "errors": form.non_field_errors()
        if form is not None and failed not in {n.pk for n in notes}
        else [],
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


def _note(access: Access, kind: str, note_id: uuid.UUID) -> Observation | Reflection:
    model = KINDS.get(kind)
    note = (
        model.objects.filter(pk=note_id, conversation__workspace=access.workspace)
        .select_related("conversation")
        .first()
        if model is not None
        else None
    )
    if note is None:
        raise Http404("No such note in this workspace.")
    return note


def _decided(
    request: HttpRequest,
    access: Access,
    note: Observation | Reflection,
    form: ApproveForm | RejectForm,
) -> HttpResponse:
    if form.is_valid():
        try:
            data, actor = form.cleaned_data, access.actor(request)
            if isinstance(form, ApproveForm):
                edited = data["text"].strip() != note.text
                services.note_approve(
                    note, actor=actor, reason=data["reason"], text=data["text"] if edited else None
                )
                messages.success(request, "Approved: agents are served it from now on.")
            else:
                services.note_reject(note, actor=actor, reason=data["reason"])
                messages.success(request, "Rejected: agents will never be served it.")
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return redirect("dashboard:approval_queue")
    context = _queue(access, failed=note.pk, form=form)
    return render_page(request, "dashboard/approvals.html", access, context, status=INVALID)


FORMS: dict[str, type[ApproveForm] | type[RejectForm]] = {
    "approve": ApproveForm,
    "reject": RejectForm,
}


@require_POST
@login_required
def approval_decide(
    request: HttpRequest, kind: str, note_id: uuid.UUID, decision: str
) -> HttpResponse:
    """Approve (``decision`` "approve") or reject a waiting note."""
    access = access_for(request, Capability.EDIT_MEMORY)
    note = _note(access, kind, note_id)
    form = FORMS[decision](request.POST, auto_id=_ids(note_id, decision))
    return _decided(request, access, note, form)
