"""The audit-trail pages of the dashboard: the audit log of the current workspace (with
its JSON Lines export), the reveal of a restricted original and of a pseudonym.

The audit log needs ``MANAGE_COMPLIANCE`` (the compliance officer and the admin): it
shows every change to memory with its before/after values. Revealing a restricted
original needs ``VIEW_RESTRICTED``, which only the compliance officer holds; revealing
what a pseudonym stands for needs ``REVEAL_PSEUDONYMS`` (compliance officer and admin)
and a reason. Anyone else gets the 403 page naming the role. The review queue and
redaction policy are in ``review_views``; legal holds, retention and erasure in
``retention_views``.
"""

from __future__ import annotations

import difflib
import json
import uuid
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for
from dashboard.forms import PseudonymRevealForm
from dashboard.models import Capability
from dashboard.rendering import INVALID, is_partial, render_page
from governance.models import REDACTION_TARGETS, AuditEvent
from governance.pseudonyms import PseudonymReveal, pseudonym_reveal
from governance.review import restricted_original_read
from governance.selectors import (
    audit_chain_verify,
    audit_event_list,
    audit_export_lines,
    pseudonym_list,
)

AUDIT_EVENTS_PER_PAGE = 50
PSEUDONYMS_PER_PAGE = 50
FILTER_MAX_LENGTH = 100


# --- audit log --------------------------------------------------------------------------------


def _audit_filters(request: HttpRequest) -> dict[str, str]:
    """The filters a request asks for, as ``audit_event_list`` lookups."""
    filters = {}
    for param, lookup in (("action", "action"), ("target_type", "target_type")):
        value = request.GET.get(param, "").strip()[:FILTER_MAX_LENGTH]
        if value:
            filters[lookup] = value
    return filters


def _pretty(value: dict[str, Any] | None) -> list[str]:
    if value is None:
        return []
    return json.dumps(value, indent=2, sort_keys=True, cls=DjangoJSONEncoder).splitlines()


def _diff_lines(event: AuditEvent) -> list[tuple[str, str]]:
    """The event's before and after values as a unified diff: (kind, line) pairs, kind
    one of ``add``, ``del``, ``ctx``; the ---/+++ header is dropped."""
    lines = difflib.unified_diff(
        _pretty(event.before), _pretty(event.after), "before", "after", n=3, lineterm=""
    )
    diff = []
    for line in list(lines)[2:]:
        if line.startswith("@@"):
            diff.append(("hunk", line))
        elif line.startswith("+"):
            diff.append(("add", line))
        elif line.startswith("-"):
            diff.append(("del", line))
        else:
            diff.append(("ctx", line))
    return diff


def _reveal_url(event: AuditEvent) -> str:
    """Where to reveal the original of the message, observation or reflection an event
    is about; empty for other targets."""
    if event.target_type not in REDACTION_TARGETS:
        return ""
    try:
        target_id = uuid.UUID(event.target_id)
    except ValueError:
        return ""
    return reverse("dashboard:compliance_original", args=[event.target_type, target_id])


@require_GET
@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    filters = _audit_filters(request)
    cursor = request.GET.get("cursor") or None
    try:
        events, next_cursor = audit_event_list(
            workspace=access.workspace,
            filters=dict(filters),
            cursor=cursor,
            limit=AUDIT_EVENTS_PER_PAGE,
        )
    except MemdeskError:
        # A cursor mangled in the address bar: start again from the newest event.
        cursor = None
        events, next_cursor = audit_event_list(
            workspace=access.workspace,
            filters=dict(filters),
            cursor=None,
            limit=AUDIT_EVENTS_PER_PAGE,
        )
    can_reveal = access.can(Capability.VIEW_RESTRICTED)
    for event in events:
        event.diff_lines = _diff_lines(event)  # type: ignore[attr-defined]  # for the template
        event.reveal_url = _reveal_url(event) if can_reveal else ""  # type: ignore[attr-defined]  # for the template
    query = {
        "action": request.GET.get("action", ""),
        "target_type": request.GET.get("target_type", ""),
    }
    query = {k: v.strip() for k, v in query.items() if v.strip()}
    context: dict[str, Any] = {
        "events": events,
        "query": query,
        "next_query": urlencode({**query, "cursor": next_cursor}) if next_cursor else "",
        "export_query": urlencode(query),
        "is_first_page": cursor is None,
    }
    template = "dashboard/compliance/audit_log.html"
    if is_partial(request):
        return render_page(request, f"{template}#events", access, context)
    context["chain"] = audit_chain_verify(workspace_id=access.workspace.pk)
    return render_page(request, template, access, context)


@require_GET
@login_required
def audit_log_export(request: HttpRequest) -> StreamingHttpResponse:
    """The filtered log as JSON Lines, oldest first, streamed."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    response = StreamingHttpResponse(
        audit_export_lines(workspace=access.workspace, filters=_audit_filters(request)),
        content_type="application/x-ndjson",
    )
    response["Content-Disposition"] = f'attachment; filename="audit-{access.workspace.pk}.jsonl"'
    response["Cache-Control"] = "private, no-store"
    return response


# --- restricted originals ---------------------------------------------------------------------


def _original_target(target_type: str) -> str:
    if target_type not in REDACTION_TARGETS:
        raise Http404("No such kind of object.")
    return target_type


@require_http_methods(["GET", "POST"])
@login_required
def original_reveal(request: HttpRequest, target_type: str, target_id: uuid.UUID) -> HttpResponse:
    """GET asks for confirmation; POST reads the original text kept before redaction.
    Every read is audited by ``restricted_original_read`` before the text is shown."""
    access = access_for(request, Capability.VIEW_RESTRICTED)
    context: dict[str, Any] = {
        "target_type": _original_target(target_type),
        "target_id": target_id,
        "original": None,
    }
    template = "dashboard/compliance/original.html"
    if request.method == "POST":
        try:
            context["original"] = restricted_original_read(
                workspace=access.workspace,
                target_type=target_type,
                target_id=target_id,
                actor=access.actor(request),
            )
        except MemdeskError as error:
            raise Http404(error.message) from None
    response = render_page(
        request, f"{template}#original" if is_partial(request) else template, access, context
    )
    if context["original"] is not None:
        response["Cache-Control"] = "private, no-store"
    return response


# --- pseudonyms -------------------------------------------------------------------------------


def _pseudonyms_context(
    access: Access, form: PseudonymRevealForm, revealed: PseudonymReveal | None
) -> dict[str, Any]:
    return {
        "form": form,
        "revealed": revealed,
        "pseudonyms": pseudonym_list(workspace_id=access.workspace.pk, limit=PSEUDONYMS_PER_PAGE),
    }


@require_GET
@login_required
def pseudonyms(request: HttpRequest) -> HttpResponse:
    """The workspace's pseudonyms (labels, never values) and the form that reveals one."""
    access = access_for(request, Capability.REVEAL_PSEUDONYMS)
    form = PseudonymRevealForm(initial={"label": request.GET.get("label", "")[:70]})
    return render_page(
        request,
        "dashboard/compliance/pseudonyms.html",
        access,
        _pseudonyms_context(access, form, None),
    )


@require_POST
@login_required
def pseudonym_reveal_view(request: HttpRequest) -> HttpResponse:
    """Reveal what a pseudonym stands for: with a reason, audited by ``pseudonym_reveal``
    before the value is shown. A pseudonym no message holds any more reveals nothing."""
    access = access_for(request, Capability.REVEAL_PSEUDONYMS)
    form = PseudonymRevealForm(request.POST)
    revealed = None
    if form.is_valid():
        try:
            revealed = pseudonym_reveal(
                workspace_id=access.workspace.pk,
                label=form.cleaned_data["label"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            form.add_service_error(error)
    template = "dashboard/compliance/pseudonyms.html"
    context = _pseudonyms_context(access, form, revealed)
    response = render_page(
        request,
        f"{template}#reveal" if is_partial(request) else template,
        access,
        context,
        status=200 if revealed is not None else INVALID,
    )
    response["Cache-Control"] = "private, no-store"
    return response
