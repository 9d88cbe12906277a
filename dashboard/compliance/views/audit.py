"""The audit log of the current workspace, with its JSON Lines export, and the reveal
of a restricted original an audit event points to.

The audit log needs ``MANAGE_COMPLIANCE`` (the compliance officer and the admin): it
shows every change to memory with its before/after values. Revealing a restricted
original needs ``VIEW_RESTRICTED``, which only the compliance officer holds. Anyone else
gets the 403 page naming the role."""

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
from django.views.decorators.http import require_GET, require_http_methods

from core.errors import MemdeskError
from dashboard.access import access_for
from dashboard.compliance.selectors import audit_actor_names, audit_originals, audit_target_urls
from dashboard.rendering import INVALID, is_partial, posted_reason, render_page
from governance.audit.filters import UNKNOWN_CONVERSATION, AuditEventFilter
from governance.audit.verify import audit_chain_verify
from governance.models import REDACTION_TARGETS, AuditEvent
from governance.redaction.review import restricted_original_read
from governance.selectors import audit_event_list, audit_export_lines
from tenancy.models import Capability

AUDIT_EVENTS_PER_PAGE = 50


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
    filters = AuditEventFilter(request.GET, workspace=access.workspace)
    query = filters.query()
    cursor = request.GET.get("cursor") or None
    try:
        events, next_cursor = audit_event_list(
            filters=filters, cursor=cursor, limit=AUDIT_EVENTS_PER_PAGE
        )
    except MemdeskError:
        # A cursor mangled in the address bar: start again from the newest event.
        cursor = None
        events, next_cursor = audit_event_list(
            filters=filters, cursor=None, limit=AUDIT_EVENTS_PER_PAGE
        )
    if filters.unknown_conversation:  # found while filtering: said beside its field
        filters.form.add_error("conversation", UNKNOWN_CONVERSATION)
    urls = audit_target_urls(workspace=access.workspace, events=events)
    originals = (
        audit_originals(workspace=access.workspace, events=events)
        if access.can(Capability.VIEW_RESTRICTED)
        else set()
    )
    actors = audit_actor_names(workspace=access.workspace, events=events)
    for event in events:
        key = (event.target_type, event.target_id)
        event.diff_lines = _diff_lines(event)  # type: ignore[attr-defined]  # for the template
        event.target_url = urls.get(key, "")  # type: ignore[attr-defined]  # for the template
        event.reveal_url = _reveal_url(event) if key in originals else ""  # type: ignore[attr-defined]  # for the template
        event.actor_name = actors.get(f"{event.actor_type}:{event.actor_id}", "")  # type: ignore[attr-defined]  # for the template
    context: dict[str, Any] = {
        "form": filters.form,
        "events": events,
        "query": query,
        "next_query": urlencode({**query, "cursor": next_cursor}) if next_cursor else "",
        "export_query": urlencode(query),
        "is_first_page": cursor is None,
    }
    template = "dashboard/compliance/audit_log.html"
    if is_partial(request):
        context["is_partial_update"] = True  # the form is not redrawn: errors go above
        return render_page(request, f"{template}#events", access, context)
    context["chain"] = audit_chain_verify(workspace_id=access.workspace.pk)
    return render_page(request, template, access, context)


@require_GET
@login_required
def audit_log_export(request: HttpRequest) -> StreamingHttpResponse:
    """The log as JSON Lines, oldest first, streamed: the same filters as the page."""
    access = access_for(request, Capability.MANAGE_COMPLIANCE)
    response = StreamingHttpResponse(
        audit_export_lines(filters=AuditEventFilter(request.GET, workspace=access.workspace)),
        content_type="application/x-ndjson",
    )
    response["Content-Disposition"] = f'attachment; filename="audit-{access.workspace.pk}.jsonl"'
    response["Cache-Control"] = "private, no-store"
    return response


def _original_target(target_type: str) -> str:
    if target_type not in REDACTION_TARGETS:
        raise Http404("No such kind of object.")
    return target_type


@require_http_methods(["GET", "POST"])
@login_required
def original_reveal(request: HttpRequest, target_type: str, target_id: uuid.UUID) -> HttpResponse:
    """GET asks for confirmation and a reason; POST reads the original text kept before
    redaction. Every read is audited by ``restricted_original_read``, with the reason,
    before the text is shown; without a reason nothing is read (422, the error by the
    field)."""
    access = access_for(request, Capability.VIEW_RESTRICTED)
    context: dict[str, Any] = {
        "target_type": _original_target(target_type),
        "target_id": target_id,
        "original": None,
    }
    template = "dashboard/compliance/original.html"
    status = 200
    if request.method == "POST":
        context["reason"] = posted_reason(request)
        try:
            context["original"] = restricted_original_read(
                workspace=access.workspace,
                target_type=target_type,
                target_id=target_id,
                actor=access.actor(request),
                reason=context["reason"],
            )
        except MemdeskError as error:
            if error.code not in ("reason_required", "reason_too_long"):
                raise Http404(error.message) from None
            context["reason_error"], status = error.message, INVALID
    response = render_page(
        request,
        f"{template}#original" if is_partial(request) else template,
        access,
        context,
        status=status,
    )
    if context["original"] is not None:
        response["Cache-Control"] = "private, no-store"
    return response
