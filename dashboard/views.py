"""The dashboard: conversations, their three tiers side by side, inline memory edits,
metrics, API keys and memory settings.

Every view is a small function: sign-in required, one access helper resolves the
workspace and checks the capability (another workspace's object is 404, a missing
capability is a 403 page naming the role), then a selector reads or a memory service
writes. htmx requests get the page's partial (``"page.html#name"``); every link and form
also works without JavaScript.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.html import escape
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget, trigger_client_event

from core.errors import MemdeskError, error_body
from core.paging import is_ascii_digits
from dashboard import selectors
from dashboard.access import (
    Access,
    NoWorkspace,
    RoleRequired,
    access_for,
    get_api_key_for_user,
    get_conversation_for_user,
    get_observation_for_user,
    get_pin_for_user,
    get_reflection_for_user,
    switch_workspace,
)
from dashboard.forms import (
    ApiKeyCreateForm,
    ConversationFilterForm,
    MemoryEditForm,
    MemorySettingsForm,
    ObservationCreateForm,
    PinForm,
    ReasonForm,
    RevertForm,
    add_service_error,
)
from dashboard.models import Capability, roles_with
from dashboard.rendering import INVALID, int_param, is_partial, render_page, uuid_param
from governance import scan
from memory import pipeline
from memory import selectors as memory_selectors
from memory import services as memory_services
from memory import views as memory_views
from memory.context import parse_max_tokens
from memory.models import (
    PRIORITY_MARKERS,
    Conversation,
    Message,
    Observation,
    Pin,
    PipelineRun,
    Priority,
    Reflection,
)

CONVERSATIONS_PER_PAGE = 25
SEARCH_RESULTS_PER_PAGE = 25
CONVERSATION_ESCALATIONS = 50  # the newest, on the conversation page
UNOBSERVED_LISTED = 300  # links on the context page; the count says how many in all
PRIORITIES = [(p.value, PRIORITY_MARKERS[p]) for p in Priority]
RUN_KINDS = {"observe": "observer", "reflect": "reflector"}
ADD_FORM_ID = "add_%s"


def priority_param(request: HttpRequest) -> str:
    """The priority the observations column is filtered to ("" for all)."""
    priority = request.GET.get("priority", "")
    return priority if priority in Priority.values else ""


def _conversation_url(conversation: Conversation, **params: object) -> str:
    url = reverse("dashboard:conversation_detail", args=[conversation.pk])
    query = {k: v for k, v in params.items() if v not in (None, "")}
    return f"{url}?{urlencode(query)}" if query else url


# --- home, workspace, 403 --------------------------------------------------------------------


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("dashboard:conversation_list")
    return memory_views.home(request)


# Where the switcher may send the user back to: pages that belong to no one object.
SWITCH_RETURN_PAGES = {
    "dashboard:conversation_list",
    "dashboard:metrics",
    "dashboard:api_keys",
    "dashboard:memory_settings",
}


@require_POST
@login_required
def workspace_switch(request: HttpRequest) -> HttpResponse:
    if switch_workspace(request, request.POST.get("workspace", "")) is None:
        raise Http404("No such workspace among yours.")
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        try:
            match = resolve(target.split("?", 1)[0])
        except Resolver404:
            match = None
        # An object page of the old workspace would switch straight back: go to its list.
        if match and match.view_name in SWITCH_RETURN_PAGES:
            return redirect(match.view_name)
    return redirect("dashboard:conversation_list")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: say which role the action needs, and in which workspace."""
    if request.path.startswith("/v1/"):
        message = "This API key may not do this."
        return JsonResponse(error_body("forbidden", message), status=403)
    context: dict[str, Any] = {"message": str(exception) if exception else ""}
    if isinstance(exception, RoleRequired):
        context.update(
            required_roles=[role.label for role in exception.required_roles],
            your_role=exception.role,
            workspace=exception.workspace,
            capability=exception.capability.label,
            access=exception.access,
        )
    context["no_workspace"] = isinstance(exception, NoWorkspace)
    if not isinstance(exception, PermissionDenied) or not context["message"]:
        context["message"] = "You do not have permission to open this page."
    return render(request, "403.html", context, status=403)


# --- conversations -----------------------------------------------------------------------------


@require_GET
@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.VIEW_MEMORY)
    form = ConversationFilterForm(request.GET)
    form.is_valid()  # errors are shown next to their fields; valid filters still apply
    filters = form.filters()
    conversations = selectors.conversation_search(workspace=access.workspace, filters=filters)
    page = Paginator(conversations, CONVERSATIONS_PER_PAGE).get_page(request.GET.get("page"))
    selectors.add_figures(list(page))
    filtered = any(
        (
            filters.query,
            filters.end_user,
            filters.active_from,
            filters.active_to,
            filters.pii_found,
            filters.on_hold,
            filters.pipeline_failed,
            filters.pipeline_retrying,
        )
    )
    context = {"form": form, "page": page, "filtered": filtered}
    template = "dashboard/conversation_list.html"
    if is_partial(request):
        return render_page(request, f"{template}#results", access, context)
    context["end_users"] = selectors.end_users(workspace=access.workspace)
    return render_page(request, template, access, context)


def _mark(items: list[Any], ids: set[str]) -> None:
    for item in items:
        item.is_highlighted = str(item.pk) in ids


def _mark_served_in_place(conversation: Conversation, observations: list[Observation]) -> None:
    """Flag the reflected observations the agent is served while their reflection is
    re-derived, for the template."""
    in_place = (
        memory_selectors.stale_source_ids(conversation=conversation)
        if any(o.status == Observation.Status.REFLECTED for o in observations)
        else set()
    )
    for observation in observations:
        observation.served_in_place = str(observation.pk) in in_place  # type: ignore[attr-defined]


def _reflections(conversation: Conversation) -> dict[str, Any]:
    reflections = selectors.reflection_list(conversation=conversation)
    return {
        "reflections": reflections,
        "reflections_stale": any(r.status == Reflection.Status.STALE for r in reflections),
    }


def _message_window(
    request: HttpRequest, conversation: Conversation
) -> tuple[selectors.MessageWindow, Observation | None]:
    """The messages a request asks for; with ``highlight``, the observation whose sources
    are marked (the window starts at its first source unless ``at`` says otherwise)."""
    at = int_param(request, "at")
    selected = None
    highlight_id = uuid_param(request, "highlight")
    if highlight_id:
        selected = selectors.observation_in(conversation=conversation, observation_id=highlight_id)
        if selected is not None and at is None:
            at = selected.window_start_seq
    window = _masked(selectors.message_window(conversation=conversation, at=at), conversation)
    if selected is not None:
        window.highlighted = {str(i) for i in selected.source_message_ids}
    _mark(window.messages, window.highlighted)
    return window, selected


def _masked(window: selectors.MessageWindow, conversation: Conversation) -> selectors.MessageWindow:
    # Every list of messages a page shows goes through here: the values the scan found
    # are masked (the template shows only ``parts``), whoever is reading; the messages
    # served verbatim because no observation covers them yet are flagged.
    selectors.mask_messages(messages=window.messages)
    selectors.mark_unobserved(conversation=conversation, messages=window.messages)
    # The agent's reasoning steps and tool calls, in time order with the messages and
    # masked as they are.
    selectors.attach_reasoning(conversation=conversation, window=window)
    return window


def _observation_page(
    request: HttpRequest, conversation: Conversation, *, stale_shown: bool | None = None
) -> selectors.ObservationPage:
    """The observations a request asks for. ``stale_shown``: whether the reflections
    shown beside them hold a stale one; the page spares the query for the observations
    served in their place when they do not (known to the view that lists them)."""
    reflection_id = uuid_param(request, "reflection")
    reflection = (
        selectors.reflection_in(conversation=conversation, reflection_id=reflection_id)
        if reflection_id
        else None
    )
    if reflection is not None:
        obs_page = selectors.reflection_sources(conversation=conversation, reflection=reflection)
    else:
        obs_page = selectors.observation_page(
            conversation=conversation,
            offset=int_param(request, "offset") or 0,
            priority=priority_param(request),
        )
    _mark(obs_page.observations, obs_page.highlighted)
    selectors.manual_authors(workspace=conversation.workspace, observations=obs_page.observations)
    if stale_shown is not False:
        _mark_served_in_place(conversation, obs_page.observations)
    return obs_page


@require_GET
@login_required
def conversation_detail(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    access, conversation = get_conversation_for_user(request, conversation_id, with_flags=True)
    window, selected = _message_window(request, conversation)
    reflections = _reflections(conversation)
    obs_page = _observation_page(
        request, conversation, stale_shown=reflections["reflections_stale"]
    )
    if obs_page.reflection is not None:
        _mark(reflections["reflections"], {str(obs_page.reflection.pk)})
    pinned = None
    if selected is not None:
        # The selected observation is outlined; if it is older than the page shown (a
        # no-JS link), it is pinned above the list so the reader still sees it.
        shown = next((o for o in obs_page.observations if o.pk == selected.pk), None)
        if shown is None:
            pinned = selected
        (shown or selected).is_selected = True  # type: ignore[attr-defined]  # for the template
        if shown is None:
            selectors.manual_authors(workspace=conversation.workspace, observations=[selected])
    context = {
        "conversation": conversation,
        "stats": selectors.tier_stats(conversation=conversation),
        "window": window,
        "selected": selected,
        "obs_page": obs_page,
        "pinned": pinned,
        **reflections,
        "pins": _masked_pins(conversation),
        "runs": selectors.latest_runs(conversation=conversation),
        "add_form": ObservationCreateForm(auto_id=ADD_FORM_ID),
        "observation_counts": selectors.observation_counts(conversation=conversation),
        "priorities": PRIORITIES,
        "priority": priority_param(request),
    }
    template = "dashboard/conversation_detail.html"
    if is_partial(request):
        return render_page(request, f"{template}#columns", access, context)
    context["escalations"] = list(
        memory_selectors.escalation_list(conversation=conversation)[:CONVERSATION_ESCALATIONS]
    )
    return render_page(request, template, access, context)


@require_GET
@login_required
def message_list(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """More messages for the page: older (``before``), newer (``after``), or a window
    around an observation's sources (``at`` / ``highlight``)."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    before, after = int_param(request, "before"), int_param(request, "after")
    if not is_partial(request):
        # Without JavaScript the same request is a whole page starting at that point.
        at = max((before or 1) - selectors.MESSAGE_PAGE, 1) if before else after
        return redirect(
            _conversation_url(
                conversation, at=at or request.GET.get("at"), highlight=request.GET.get("highlight")
            )
        )
    template = "dashboard/conversation_detail.html"
    context: dict[str, Any] = {"conversation": conversation}
    if before is not None:
        context["window"] = _masked(
            selectors.message_window(conversation=conversation, before=before), conversation
        )
        return render_page(request, f"{template}#messages_older", access, context)
    if after is not None:
        context["window"] = _masked(
            selectors.message_window(conversation=conversation, after=after), conversation
        )
        return render_page(request, f"{template}#messages_newer", access, context)
    context["window"], context["selected"] = _message_window(request, conversation)
    return render_page(request, f"{template}#message_list", access, context)


@require_GET
@login_required
def observation_list(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Older observations (``offset``), one reflection's sources (``reflection``), or
    the newest page again."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    if not is_partial(request):
        return redirect(
            _conversation_url(
                conversation,
                reflection=request.GET.get("reflection"),
                priority=priority_param(request),
            )
            + "#observations"
        )
    obs_page = _observation_page(request, conversation)
    context = {
        "conversation": conversation,
        "obs_page": obs_page,
        "priority": priority_param(request),
    }
    template = "dashboard/conversation_detail.html"
    if obs_page.offset and obs_page.reflection is None:
        return render_page(request, f"{template}#observations_older", access, context)
    # The list is reloaded after memory changed: the column's counts come along with it.
    context["observation_counts"] = selectors.observation_counts(conversation=conversation)
    context["counts_out_of_band"] = True
    return render_page(request, f"{template}#observation_list", access, context)


@require_GET
@login_required
def conversation_context(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """What the agent is served: the context ``GET /v1/conversations/{id}/context``
    returns (the same selector and choices), masked as the conversation page masks."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    raw_budget = request.GET.get("max_tokens", "").strip()
    error = ""
    try:
        max_tokens = parse_max_tokens(raw_budget)
    except MemdeskError as failure:
        error, max_tokens = failure.message, None
    served = selectors.served_context(conversation=conversation, max_tokens=max_tokens)
    unobserved = list(
        memory_selectors.unobserved_messages(conversation=conversation).values_list(
            "seq", "token_count"
        )
    )
    context = {
        "conversation": conversation,
        "served": served,
        "unobserved_shown": unobserved[:UNOBSERVED_LISTED],
        "max_tokens": max_tokens,
        "raw_budget": raw_budget,
        "budget_error": error,
        "pins": _masked_pins(conversation),
        "unobserved": unobserved,
        "unobserved_tokens": sum(tokens for _, tokens in unobserved),
        "recall": selectors.conversation_recall(conversation=conversation),
        "served_seqs": set(
            Message.objects.filter(pk__in=served.budget.recent_message_ids).values_list(
                "seq", flat=True
            )
        ),
    }
    response = render_page(
        request,
        "dashboard/conversation_context.html",
        access,
        context,
        status=INVALID if error else 200,
    )
    response["Cache-Control"] = "private, no-store"
    return response


TRANSCRIPT_NOT_SCANNED = "  [not scanned for personal data yet: nothing in it is masked]"


def _transcript_lines(conversation: Conversation) -> Iterator[str]:
    yield f"Conversation {conversation.pk}\n"
    yield f"Workspace:  {conversation.workspace.name}\n"
    yield f"End user:   {conversation.user_id or '-'}\n"
    yield f"Title:      {conversation.title or '-'}\n"
    yield f"Started:    {conversation.created_at:%Y-%m-%d %H:%M:%S} UTC\n"
    yield "Personal data the scan found is shown as <ENTITY_TYPE>.\n\n"
    for seq, role, created_at, tool_name, content, pending in selectors.transcript_rows(
        conversation=conversation
    ):
        speaker = f"{role} ({tool_name})" if tool_name else role
        note = TRANSCRIPT_NOT_SCANNED if pending else ""
        yield f"#{seq}  {created_at:%Y-%m-%d %H:%M:%S}  {speaker}{note}\n{content}\n\n"


TRANSCRIPT_STYLE = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:1rem auto;max-width:70rem;padding:0 1rem}"
    "pre{font:13px/1.45 ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}"
    "h1{font-size:1.2rem;overflow-wrap:anywhere}"
)


def _transcript_page(conversation: Conversation, lines: Iterator[str]) -> Iterator[str]:
    title = escape(conversation.title or "untitled conversation")
    yield (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Transcript · {title} · Memdesk</title><style>{TRANSCRIPT_STYLE}</style>"
        f"</head><body><h1>Transcript: {title}</h1>"
        f'<p><a href="?format=text">Plain text</a> · '
        f'<a href="{reverse("dashboard:conversation_detail", args=[conversation.pk])}">'
        f"Back to the conversation</a></p><pre>"
    )
    for line in lines:
        yield escape(line)
    yield "</pre></body></html>"


@require_GET
@login_required
def conversation_transcript(
    request: HttpRequest, conversation_id: uuid.UUID
) -> StreamingHttpResponse:
    """The raw transcript, streamed: the fast path for urgent review (no models, no
    templates). A titled page whose long lines wrap, every character escaped and no
    script allowed to run; ``?format=text`` is the same as plain text. The values the
    scan found are masked for every role; compliance and admin reveal them per message
    on the conversation page, where each reveal is audited."""
    _, conversation = get_conversation_for_user(request, conversation_id)
    lines = _transcript_lines(conversation)
    if request.GET.get("format") == "text":
        response = StreamingHttpResponse(lines, content_type="text/plain; charset=utf-8")
    else:
        response = StreamingHttpResponse(
            _transcript_page(conversation, lines), content_type="text/html; charset=utf-8"
        )
        # Escaped, and even so: nothing in a message may load or run anything here.
        response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["Cache-Control"] = "private, no-store"
    return response


def _finding_ids(raw: str) -> list[int] | None:
    """The finding ids a reveal button posts ("12" or "12,13"); [] for none (reveal
    the whole message); None when it is not a list of ids."""
    if not raw.strip():
        return []
    pieces = [piece.strip() for piece in raw.split(",")]
    if not all(is_ascii_digits(piece) for piece in pieces) or len(pieces) > 100:
        return None
    return [int(piece) for piece in pieces]


@require_POST
@login_required
def message_reveal(
    request: HttpRequest, conversation_id: uuid.UUID, message_id: uuid.UUID
) -> HttpResponse:
    """Show the masked values of one message (all of them, or the ``finding`` posted) to
    a role that may reveal them. ``scan.message_reveal`` audits the reveal before
    anything is shown; the response is never cached."""
    access, conversation = get_conversation_for_user(
        request, conversation_id, Capability.REVEAL_PII
    )
    message = _message_in(conversation, message_id)
    finding_ids = _finding_ids(request.POST.get("finding", ""))
    if finding_ids is None:
        return HttpResponseBadRequest(
            "finding must be the ids of findings of this message, separated by commas.",
            content_type="text/plain; charset=utf-8",
        )
    try:
        revealed = scan.message_reveal(
            message=message,
            workspace_id=conversation.workspace_id,
            actor=access.actor(request),
            finding_ids=finding_ids,
        )
    except MemdeskError as error:
        raise Http404(error.message) from None
    selectors.mask_messages(messages=[message], revealed={f.pk for f in revealed})
    message.is_revealed = bool(revealed)  # type: ignore[attr-defined]  # for the template
    context = {"conversation": conversation, "message": message}
    if is_partial(request):
        template = "dashboard/conversation_detail.html#message_item"
    else:
        template = "dashboard/message_reveal.html"
    response = render_page(request, template, access, context)
    response["Cache-Control"] = "private, no-store"
    return response


# --- the pipeline on demand ---------------------------------------------------------------------


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
    run = pipeline.run_now(kind=action, conversation=conversation, wait=False)
    if not is_partial(request):
        return redirect(_conversation_url(conversation) + "#runs")
    return _run_status_response(request, access, conversation, RUN_KINDS[action], run, polled=True)


@require_GET
@login_required
def run_status(
    request: HttpRequest, conversation_id: uuid.UUID, kind: str, run_id: uuid.UUID
) -> HttpResponse:
    if kind not in RUN_KINDS.values():
        raise Http404("No such kind of run.")
    access, conversation = get_conversation_for_user(request, conversation_id)
    run = selectors.run_in(conversation=conversation, kind=kind, run_id=run_id)
    if run is None:
        raise Http404("No such run in this conversation.")
    if not is_partial(request):
        return redirect(_conversation_url(conversation) + "#runs")
    return _run_status_response(request, access, conversation, kind, run, polled=True)


@require_POST
@login_required
def run_cancel(
    request: HttpRequest, conversation_id: uuid.UUID, kind: str, run_id: uuid.UUID
) -> HttpResponse:
    if kind not in RUN_KINDS.values():
        raise Http404("No such kind of run.")
    access, conversation = get_conversation_for_user(
        request, conversation_id, Capability.RUN_PIPELINE
    )
    run = selectors.run_in(conversation=conversation, kind=kind, run_id=run_id)
    if run is None:
        raise Http404("No such run in this conversation.")
    notice = ""
    try:
        run = pipeline.run_cancel(
            run=run, actor=access.actor(request), reason="cancelled on the conversation page"
        )
    except MemdeskError as error:
        # It finished before the click arrived: the card shows how, and says so.
        run.refresh_from_db()
        notice = error.message
    if not is_partial(request):
        return redirect(_conversation_url(conversation) + "#runs")
    return _run_status_response(
        request, access, conversation, kind, run, polled=True, notice=notice
    )


# --- editing memory ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryKind:
    """One tier that people correct (observations, reflections): what the edit, delete,
    history and revert views below need to know of it."""

    name: str  # "observation"; also the item's name in the page's templates
    article: str  # "an observation", for headings
    anchor: str  # the item's element id is "<anchor>-<pk>", its panel's "<anchor>-<pk>-panel"
    get: Callable[..., tuple[Access, Conversation, Any]]
    update: Callable[..., Any]
    delete: Callable[..., None]
    revert: Callable[..., Any]
    history: Callable[..., list[memory_selectors.MemoryChange]]

    def url_name(self, action: str) -> str:
        return f"dashboard:{self.name}_{action}"

    # For the templates, which cannot call with arguments.
    @property
    def edit_url(self) -> str:
        return self.url_name("edit")

    @property
    def delete_url(self) -> str:
        return self.url_name("delete")

    @property
    def revert_url(self) -> str:
        return self.url_name("revert")

    def panel(self, item: Observation | Reflection) -> str:
        return f"#{self.anchor}-{item.pk}-panel"


KINDS = {
    "observation": MemoryKind(
        name="observation",
        article="an observation",
        anchor="obs",
        get=get_observation_for_user,
        update=lambda *, item, **kw: memory_services.observation_update(observation=item, **kw),
        delete=lambda *, item, **kw: memory_services.observation_delete(observation=item, **kw),
        revert=lambda *, item, **kw: memory_services.observation_revert(observation=item, **kw),
        history=lambda item: memory_selectors.observation_history(observation=item),
    ),
    "reflection": MemoryKind(
        name="reflection",
        article="a reflection",
        anchor="refl",
        get=get_reflection_for_user,
        update=lambda *, item, **kw: memory_services.reflection_update(reflection=item, **kw),
        delete=lambda *, item, **kw: memory_services.reflection_delete(reflection=item, **kw),
        revert=lambda *, item, **kw: memory_services.reflection_revert(reflection=item, **kw),
        history=lambda item: memory_selectors.reflection_history(reflection=item),
    ),
}
# Sent with a corrected observation: the reflections column reloads, showing the ones
# that went stale.
MEMORY_CHANGED = "memory-changed"
# Sent when the reflections column, polling while one was stale, finds none: the
# observations column reloads, its observations no longer served in their place.
MEMORY_REDERIVED = "memory-rederived"
# Sent when a run the page was polling has stored its memory: both columns reload.
RUN_FINISHED = "run-finished"


def _memory_item(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Observation | Reflection,
    **extra: Any,
) -> HttpResponse:
    if isinstance(item, Observation):
        _mark_served_in_place(conversation, [item])
        selectors.manual_authors(workspace=conversation.workspace, observations=[item])
    context = {"conversation": conversation, kind.name: item, "item": item, "kind": kind, **extra}
    response = render_page(
        request, f"dashboard/conversation_detail.html#{kind.name}_item", access, context
    )
    if kind.name == "observation":
        trigger_client_event(response, MEMORY_CHANGED)
    return response


def _invalid_form(
    request: HttpRequest,
    access: Access,
    template: str,
    context: dict[str, Any],
    *,
    panel: str | None,
    partial: str = "form",
) -> HttpResponse:
    """Re-render a form with its errors (422). An htmx form that targets the item is
    pointed back at the panel it came from, so the errors appear under its fields."""
    if not is_partial(request):
        return render_page(request, template, access, context, status=INVALID)
    response = render_page(request, f"{template}#{partial}", access, context, status=INVALID)
    if panel:
        retarget(response, panel)
        reswap(response, "innerHTML")
    return response


@require_http_methods(["GET", "POST"])
@login_required
def observation_add(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    access, conversation = get_conversation_for_user(
        request, conversation_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/observation_add.html"
    form = ObservationCreateForm(
        request.POST if request.method == "POST" else None, auto_id=ADD_FORM_ID
    )
    if request.method == "POST" and form.is_valid():
        try:
            observation = memory_services.observation_create(
                conversation=conversation,
                actor=access.actor(request),
                text=form.cleaned_data["text"],
                priority=form.cleaned_data["priority"],
                referenced_at=form.referenced_datetime(),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + f"#obs-{observation.pk}")
            observation.is_new = True  # type: ignore[attr-defined]  # for the template
            observation.author = request.user.get_username()  # type: ignore[attr-defined]  # for the template
            context = {
                "conversation": conversation,
                "form": ObservationCreateForm(auto_id=ADD_FORM_ID),
                "observation": observation,
                "added": True,
                "observation_counts": selectors.observation_counts(conversation=conversation),
                "counts_out_of_band": True,
            }
            return render_page(request, f"{template}#form", access, context, status=201)
    context = {"conversation": conversation, "form": form}
    if request.method == "POST":
        return _invalid_form(request, access, template, context, panel=None)
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


@require_http_methods(["GET", "POST"])
@login_required
def memory_edit(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID, kind: str
) -> HttpResponse:
    memory_kind = KINDS[kind]
    access, conversation, item = memory_kind.get(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/memory_edit.html"
    data = request.POST if request.method == "POST" else None
    form = MemoryEditForm(data, item=item, auto_id=_form_id(item, "edit"))
    if request.method == "POST" and form.is_valid():
        try:
            item = memory_kind.update(
                item=item,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                **form.changes(),
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(
                    _conversation_url(conversation) + f"#{memory_kind.anchor}-{item.pk}"
                )
            return _memory_item(request, access, conversation, memory_kind, item)
    context = {"conversation": conversation, "item": item, "kind": memory_kind, "form": form}
    if request.method == "POST":
        return _invalid_form(request, access, template, context, panel=memory_kind.panel(item))
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


@require_http_methods(["GET", "POST"])
@login_required
def memory_delete(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID, kind: str
) -> HttpResponse:
    memory_kind = KINDS[kind]
    access, conversation, item = memory_kind.get(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/memory_delete.html"
    form = ReasonForm(
        request.POST if request.method == "POST" else None, auto_id=_form_id(item, "delete")
    )
    if request.method == "POST" and form.is_valid():
        try:
            memory_kind.delete(
                item=item, actor=access.actor(request), reason=form.cleaned_data["reason"]
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + f"#{memory_kind.name}s")
            context: dict[str, Any] = {
                "conversation": conversation,
                "item": item,
                "kind": memory_kind,
            }
            if memory_kind.name == "observation":
                context["observation_counts"] = selectors.observation_counts(
                    conversation=conversation
                )
                context["counts_out_of_band"] = True
            response = render_page(request, f"{template}#deleted", access, context)
            if memory_kind.name == "observation":
                trigger_client_event(response, MEMORY_CHANGED)
            return response
    context = {"conversation": conversation, "item": item, "kind": memory_kind, "form": form}
    if request.method == "POST":
        return _invalid_form(request, access, template, context, panel=memory_kind.panel(item))
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


@require_GET
@login_required
def reflection_list(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """The reflections column again: after a correction made some stale, and while they
    are being re-derived (the list polls itself, saying ``stale=1``, until none is)."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    if not is_partial(request):
        return redirect(_conversation_url(conversation) + "#reflections")
    context = {"conversation": conversation, **_reflections(conversation)}
    response = render_page(
        request, "dashboard/conversation_detail.html#reflection_list", access, context
    )
    if request.GET.get("stale") and not context["reflections_stale"]:
        trigger_client_event(response, MEMORY_REDERIVED)
    return response


# --- pins -------------------------------------------------------------------------------------


def _masked_pins(conversation: Conversation) -> list[Pin]:
    pins = selectors.pin_list(conversation=conversation)
    selectors.mask_pins(pins=pins)
    return pins


def _message_in(conversation: Conversation, message_id: uuid.UUID) -> Message:
    """One message of the conversation (else 404), masked for the page."""
    message = Message.objects.filter(conversation=conversation, pk=message_id).first()
    if message is None:
        raise Http404("No such message in this conversation.")
    selectors.mask_messages(messages=[message])
    return message


def _pin_list(
    request: HttpRequest, access: Access, conversation: Conversation, *, new_pin: uuid.UUID
) -> HttpResponse:
    pins = _masked_pins(conversation)
    for pin in pins:
        pin.is_new = pin.pk == new_pin  # type: ignore[attr-defined]  # for the template
    context = {"conversation": conversation, "pins": pins}
    return render_page(
        request, "dashboard/conversation_detail.html#pin_list", access, context, status=201
    )


@require_http_methods(["GET", "POST"])
@login_required
def pin_add(
    request: HttpRequest, conversation_id: uuid.UUID, message_id: uuid.UUID
) -> HttpResponse:
    """Pin a whole message. The message's own Pin form posts here; without JavaScript a
    refused form comes back as this page."""
    access, conversation = get_conversation_for_user(
        request, conversation_id, Capability.EDIT_MEMORY
    )
    message = _message_in(conversation, message_id)
    template = "dashboard/pin_add.html"
    form = PinForm(
        request.POST if request.method == "POST" else None, auto_id=f"pin_{message.seq}_%s"
    )
    if request.method == "POST" and form.is_valid():
        try:
            pin = memory_services.pin_create(
                conversation=conversation,
                actor=access.actor(request),
                message_id=message.pk,
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + f"#pin-{pin.pk}")
            return _pin_list(request, access, conversation, new_pin=pin.pk)
    context = {"conversation": conversation, "message": message, "form": form}
    if request.method == "POST":
        return _invalid_form(request, access, template, context, panel=None)
    return render_page(request, template, access, context)


@require_http_methods(["GET", "POST"])
@login_required
def pin_delete(request: HttpRequest, conversation_id: uuid.UUID, pin_id: uuid.UUID) -> HttpResponse:
    """Unpin, with a reason: the quote leaves the agent's context at once."""
    access, conversation, pin = get_pin_for_user(
        request, conversation_id, pin_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/pin_delete.html"
    form = ReasonForm(
        request.POST if request.method == "POST" else None, auto_id=f"unpin_{pin.pk}_%s"
    )
    if request.method == "POST" and form.is_valid():
        try:
            memory_services.pin_delete(
                pin=pin, actor=access.actor(request), reason=form.cleaned_data["reason"]
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + "#pins")
            context: dict[str, Any] = {"conversation": conversation, "pin": pin}
            return render_page(request, f"{template}#deleted", access, context)
    context = {"conversation": conversation, "pin": pin, "form": form}
    if request.method == "POST":
        return _invalid_form(request, access, template, context, panel=f"#pin-{pin.pk}-panel")
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


def _form_id(item: Observation | Reflection, form: str) -> str:
    # Several items' forms can be open at once: their field ids must not collide.
    return f"{form}_{item.pk.hex[:12]}_%s"


def _history_context(
    conversation: Conversation,
    kind: MemoryKind,
    item: Observation | Reflection,
    bound: RevertForm | None = None,
) -> dict[str, Any]:
    changes = kind.history(item)
    names = selectors.user_labels({change.changed_by for change in changes})
    versions = []
    for change in changes:
        if bound is not None and bound.data.get("version") == str(change.version):
            form = bound
        else:
            form = RevertForm(
                initial={"version": change.version},
                auto_id=_form_id(item, f"revert{change.version}"),
            )
        versions.append(
            {
                "change": change,
                "changed_by": names.get(change.changed_by, change.changed_by),
                "diff_lines": change.diff.splitlines()[2:],  # drop the ---/+++ header
                "form": form,
            }
        )
    matched = bound is not None and any(v["form"] is bound for v in versions)
    return {
        "conversation": conversation,
        "kind": kind,
        "item": item,
        "versions": versions[::-1],  # newest change first
        # A refused revert to a version not listed (a stale page) is reported on top.
        "revert_errors": [message for messages in bound.errors.values() for message in messages]
        if bound is not None and not matched
        else [],
    }


@require_GET
@login_required
def memory_history(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID, kind: str
) -> HttpResponse:
    memory_kind = KINDS[kind]
    access, conversation, item = memory_kind.get(request, conversation_id, item_id)
    template = "dashboard/memory_history.html"
    context = _history_context(conversation, memory_kind, item)
    partial = f"{template}#history" if is_partial(request) else template
    return render_page(request, partial, access, context)


@require_POST
@login_required
def memory_revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID, kind: str
) -> HttpResponse:
    memory_kind = KINDS[kind]
    access, conversation, item = memory_kind.get(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    version = request.POST.get("version", "")
    version = version if is_ascii_digits(version) else ""
    form = RevertForm(request.POST, auto_id=_form_id(item, f"revert{version}"))
    if form.is_valid():
        try:
            item = memory_kind.revert(
                item=item,
                version=form.cleaned_data["version"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(memory_kind.url_name("history"), conversation.pk, item.pk)
            history = _history_context(conversation, memory_kind, item)
            return _memory_item(
                request,
                access,
                conversation,
                memory_kind,
                item,
                versions=history["versions"],
                show_history=True,
            )
    context = _history_context(conversation, memory_kind, item, bound=form)
    return _invalid_form(
        request,
        access,
        "dashboard/memory_history.html",
        context,
        panel=memory_kind.panel(item),
        partial="history",
    )


# --- search and end users ----------------------------------------------------------------------


@require_GET
@login_required
def memory_search(request: HttpRequest) -> HttpResponse:
    """Messages, observations and reflections of the current workspace holding ``q``,
    one ``kind`` at a time (the first kind with hits unless asked), paged; each links to
    the item on its conversation page."""
    access = access_for(request, Capability.VIEW_MEMORY)
    query = request.GET.get("q", "").strip()[:200]
    end_user = request.GET.get("user", "").strip()
    kind = request.GET.get("kind", "")
    context: dict[str, Any] = {
        "q": query,
        "end_user": end_user,
        "kinds": selectors.SEARCH_KINDS,
        "kind": kind,
    }
    if query:
        results = selectors.memory_search(
            workspace=access.workspace, query=query, end_user=end_user
        )
        if kind not in selectors.SEARCH_KINDS:
            kind = results.first_kind_found()
        page = Paginator(results.hits[kind], SEARCH_RESULTS_PER_PAGE).get_page(
            request.GET.get("page")
        )
        hits = [
            hit if isinstance(hit, selectors.SearchHit) else selectors.memory_hit(hit, query)
            for hit in page
        ]
        tabs = [
            {
                "key": key,
                "label": label,
                "count": results.counts[key],
                "capped": key == "messages" and results.capped,
                "current": key == kind,
            }
            for key, label in selectors.SEARCH_KINDS.items()
        ]
        context.update(kind=kind, noun=kind[:-1], results=results, page=page, hits=hits, tabs=tabs)
    template = "dashboard/search.html"
    if is_partial(request):
        return render_page(request, f"{template}#results", access, context)
    return render_page(request, template, access, context)


@require_GET
@login_required
def end_user(request: HttpRequest, end_user_id: str = "") -> HttpResponse:
    """One end user: their conversations in this workspace and the memory served from
    them. ``?user=`` (the form) redirects to the user's own address."""
    access = access_for(request, Capability.VIEW_MEMORY)
    if not end_user_id:
        wanted = request.GET.get("user", "").strip()
        if not wanted:
            return redirect("dashboard:conversation_list")
        return redirect("dashboard:end_user", end_user_id=wanted)
    memory = selectors.end_user_memory(workspace=access.workspace, end_user=end_user_id)
    if not memory.conversations:
        raise Http404("No conversation of this end user in this workspace.")
    context = {"end_user": end_user_id, "memory": memory}
    return render_page(request, "dashboard/end_user.html", access, context)


# --- metrics ----------------------------------------------------------------------------------


@require_GET
@login_required
def metrics(request: HttpRequest) -> HttpResponse:
    conversation = None
    conversation_id = request.GET.get("conversation", "")
    if conversation_id:
        access, conversation = get_conversation_for_user(request, conversation_id)
    else:
        access = access_for(request, Capability.VIEW_MEMORY)
    context: dict[str, Any] = {
        "conversation": conversation,
        "metrics": selectors.metrics_for_charts(
            workspace=access.workspace, conversation=conversation
        ),
    }
    template = "dashboard/metrics.html"
    if is_partial(request):
        return render_page(request, f"{template}#charts", access, context)
    context["recent"] = selectors.conversation_search(
        workspace=access.workspace, filters=selectors.ConversationFilters()
    ).values("pk", "title", "user_id")[:50]
    return render_page(request, template, access, context)


# --- API keys ---------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def api_keys(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_API_KEYS)
    template = "dashboard/api_keys.html"
    form = ApiKeyCreateForm(request.POST if request.method == "POST" else None)
    created = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            api_key, raw_key = memory_services.api_key_create(
                workspace=access.workspace,
                actor=access.actor(request),
                name=form.cleaned_data["name"],
                scope=form.cleaned_data["scope"],
            )
            # Shown in this one response and never again: only its hash is stored.
            created = {"api_key": api_key, "raw_key": raw_key}
            form = ApiKeyCreateForm()
            status = 201
        else:
            status = INVALID
    context = {
        "form": form,
        "created": created,
        "keys": selectors.api_keys_of(workspace=access.workspace),
    }
    response = render_page(
        request,
        f"{template}#keys" if is_partial(request) else template,
        access,
        context,
        status=status,
    )
    if created:
        response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
def api_key_revoke(request: HttpRequest, api_key_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_API_KEYS)
    api_key = get_api_key_for_user(access, api_key_id)
    api_key = memory_services.api_key_revoke(api_key=api_key, actor=access.actor(request))
    if not is_partial(request):
        return redirect("dashboard:api_keys")
    return render_page(request, "dashboard/api_keys.html#key_row", access, {"key": api_key})


# --- memory settings ----------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def memory_settings(request: HttpRequest) -> HttpResponse:
    """Everyone in the workspace sees how much detail its memory keeps; an admin changes
    it, with a reason, through ``workspace_settings_update`` as the API does."""
    capability = Capability.MANAGE_SETTINGS if request.method == "POST" else Capability.VIEW_MEMORY
    access = access_for(request, capability)
    workspace = access.workspace
    form = MemorySettingsForm.of(workspace)
    status = 200
    if request.method == "POST":
        form = MemorySettingsForm(request.POST)
        status = INVALID
        if form.is_valid():
            before = workspace.fidelity
            try:
                workspace = memory_services.workspace_settings_update(
                    workspace=workspace,
                    actor=access.actor(request),
                    fidelity=form.chosen_fidelity(),
                    reason=form.cleaned_data["reason"],
                )
            except MemdeskError as error:
                add_service_error(form, error)
            else:
                if workspace.fidelity == before:
                    messages.info(request, "Nothing changed.")
                else:
                    messages.success(
                        request,
                        f"Saved: the Observer's next runs use the {workspace.effective_fidelity} "
                        "level. Memory already written stays as it is.",
                    )
                if not is_partial(request):
                    return redirect("dashboard:memory_settings")
                form = MemorySettingsForm.of(workspace)
                status = 200
    template = "dashboard/memory_settings.html"
    context = {
        "form": form,
        "settings_workspace": workspace,
        "admin_roles": [role.label for role in roles_with(Capability.MANAGE_SETTINGS)],
    }
    return render_page(
        request,
        f"{template}#settings" if is_partial(request) else template,
        access,
        context,
        status=status,
    )
