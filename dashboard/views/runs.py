"""The pipeline on demand: start an Observer or Reflector run, follow it, cancel it."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from core.errors import MemdeskError
from dashboard.access import Access, get_conversation_for_user, get_run_for_user
from dashboard.rendering import conversation_url, is_partial, render_page
from memory.models import Conversation, PipelineRun
from memory.pipeline import runs as pipeline_runs
from memory.pipeline.on_demand import run_now
from tenancy.models import Capability

RUN_KINDS = {"observe": "observer", "reflect": "reflector"}
# Sent when a run the page was polling has stored its memory: both columns reload.
RUN_FINISHED = "run-finished"


def _run_status_response(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: str,
    run: PipelineRun | None,
    *,
    polled: bool,
    notice: str = "",
) -> HttpResponse:
    context = {
        "conversation": conversation,
        "kind": kind,
        "run": run,
        "polled": polled,
        "notice": notice,
    }
    response = render_page(
        request, "dashboard/conversation_detail.html#run_status", access, context
    )
    if polled and run is not None and run.status == PipelineRun.Status.SUCCEEDED:
        # The run the page was following has stored its memory: the columns reload.
        trigger_client_event(response, RUN_FINISHED)
    return response


@require_POST
@login_required
def run_start(request: HttpRequest, conversation_id: uuid.UUID, action: str) -> HttpResponse:
    if action not in RUN_KINDS:
        raise Http404("No such pipeline action.")
    access, conversation = get_conversation_for_user(
        request, conversation_id, Capability.RUN_PIPELINE
    )
    # Queued for the Celery worker (never run inside the request): the page polls it.
    run = run_now(kind=action, conversation=conversation, wait=False)
    if not is_partial(request):
        return redirect(conversation_url(conversation) + "#runs")
    return _run_status_response(request, access, conversation, RUN_KINDS[action], run, polled=True)


@require_GET
@login_required
def run_status(
    request: HttpRequest, conversation_id: uuid.UUID, kind: str, run_id: uuid.UUID
) -> HttpResponse:
    if kind not in RUN_KINDS.values():
        raise Http404("No such kind of run.")
    access, conversation, run = get_run_for_user(request, conversation_id, kind, run_id)
    if not is_partial(request):
        return redirect(conversation_url(conversation) + "#runs")
    return _run_status_response(request, access, conversation, kind, run, polled=True)


@require_POST
@login_required
def run_cancel(
    request: HttpRequest, conversation_id: uuid.UUID, kind: str, run_id: uuid.UUID
) -> HttpResponse:
    if kind not in RUN_KINDS.values():
        raise Http404("No such kind of run.")
    access, conversation, run = get_run_for_user(
        request, conversation_id, kind, run_id, Capability.RUN_PIPELINE
    )
    notice = ""
    try:
        run = pipeline_runs.run_cancel(
            run=run, actor=access.actor(request), reason="cancelled on the conversation page"
        )
    except MemdeskError as error:
        # It finished before the click arrived: the card shows how, and says so.
        run.refresh_from_db()
        notice = error.message
    if not is_partial(request):
        return redirect(conversation_url(conversation) + "#runs")
    return _run_status_response(
        request, access, conversation, kind, run, polled=True, notice=notice
    )
