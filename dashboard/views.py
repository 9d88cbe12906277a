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
from collections.abc import Iterator
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
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import reswap, retarget

from core.errors import MemdeskError
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
    switch_workspace,
)
from dashboard.forms import (
    ApiKeyCreateForm,
    ConversationFilterForm,
    MemorySettingsForm,
    ObservationCreateForm,
    ObservationEditForm,
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
from memory.models import Conversation, Message, Observation, Pin, PipelineRun

CONVERSATIONS_PER_PAGE = 25
RUN_KINDS = {"observe": "observer", "reflect": "reflector"}
ADD_FORM_ID = "add_%s"


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
    window = _masked(selectors.message_window(conversation=conversation, at=at))
    if selected is not None:
        window.highlighted = {str(i) for i in selected.source_message_ids}
    _mark(window.messages, window.highlighted)
    return window, selected


def _masked(window: selectors.MessageWindow) -> selectors.MessageWindow:
    # Every list of messages a page shows goes through here: the values the scan found
    # are masked (the template shows only ``parts``), whoever is reading.
    selectors.mask_messages(messages=window.messages)
    return window


def _observation_page(
    request: HttpRequest, conversation: Conversation
) -> selectors.ObservationPage:
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
            conversation=conversation, offset=int_param(request, "offset") or 0
        )
    _mark(obs_page.observations, obs_page.highlighted)
    return obs_page


@require_GET
@login_required
def conversation_detail(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    access, conversation = get_conversation_for_user(request, conversation_id, with_flags=True)
    window, selected = _message_window(request, conversation)
    obs_page = _observation_page(request, conversation)
    reflections = selectors.reflection_list(conversation=conversation)
    if obs_page.reflection is not None:
        _mark(reflections, {str(obs_page.reflection.pk)})
    pinned = None
    if selected is not None:
        # The selected observation is outlined; if it is older than the page shown (a
        # no-JS link), it is pinned above the list so the reader still sees it.
        shown = next((o for o in obs_page.observations if o.pk == selected.pk), None)
        if shown is None:
            pinned = selected
        (shown or selected).is_selected = True  # type: ignore[attr-defined]  # for the template
    context = {
        "conversation": conversation,
        "stats": selectors.tier_stats(conversation=conversation),
        "window": window,
        "selected": selected,
        "obs_page": obs_page,
        "pinned": pinned,
        "reflections": reflections,
        "pins": _masked_pins(conversation),
        "runs": selectors.latest_runs(conversation=conversation),
        "add_form": ObservationCreateForm(auto_id=ADD_FORM_ID),
    }
    template = "dashboard/conversation_detail.html"
    if is_partial(request):
        return render_page(request, f"{template}#columns", access, context)
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
            selectors.message_window(conversation=conversation, before=before)
        )
        return render_page(request, f"{template}#messages_older", access, context)
    if after is not None:
        context["window"] = _masked(
            selectors.message_window(conversation=conversation, after=after)
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
            _conversation_url(conversation, reflection=request.GET.get("reflection"))
            + "#observations"
        )
    obs_page = _observation_page(request, conversation)
    context = {"conversation": conversation, "obs_page": obs_page}
    template = "dashboard/conversation_detail.html"
    if obs_page.offset and obs_page.reflection is None:
        return render_page(request, f"{template}#observations_older", access, context)
    return render_page(request, f"{template}#observation_list", access, context)


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


@require_GET
@login_required
def conversation_transcript(
    request: HttpRequest, conversation_id: uuid.UUID
) -> StreamingHttpResponse:
    """The raw transcript as plain text, streamed: the fast path for urgent review (no
    models, no templates, and plain text cannot run anything a message contains). The
    values the scan found are masked for every role; compliance and admin reveal them
    per message on the conversation page, where each reveal is audited."""
    _, conversation = get_conversation_for_user(request, conversation_id)
    response = StreamingHttpResponse(
        _transcript_lines(conversation), content_type="text/plain; charset=utf-8"
    )
    response["Cache-Control"] = "private, no-store"
    return response


def _finding_ids(raw: str) -> list[int] | None:
    """The finding ids a reveal button posts ("12" or "12,13"); [] for none (reveal
    the whole message); None when it is not a list of ids."""
    if not raw.strip():
        return []
    pieces = [piece.strip() for piece in raw.split(",")]
    if not all(piece.isdigit() for piece in pieces) or len(pieces) > 100:
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
) -> HttpResponse:
    context = {"conversation": conversation, "kind": kind, "run": run, "polled": polled}
    return render_page(request, "dashboard/conversation_detail.html#run_status", access, context)


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


# --- editing memory ---------------------------------------------------------------------------


def _observation_item(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    observation: Observation,
    **extra: Any,
) -> HttpResponse:
    context = {"conversation": conversation, "observation": observation, **extra}
    return render_page(
        request, "dashboard/conversation_detail.html#observation_item", access, context
    )


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
            context = {
                "conversation": conversation,
                "form": ObservationCreateForm(auto_id=ADD_FORM_ID),
                "observation": observation,
                "added": True,
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
def observation_edit(
    request: HttpRequest, conversation_id: uuid.UUID, observation_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, observation_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/observation_edit.html"
    data = request.POST if request.method == "POST" else None
    form = ObservationEditForm(data, observation=observation, auto_id=_form_id(observation, "edit"))
    if request.method == "POST" and form.is_valid():
        try:
            observation = memory_services.observation_update(
                observation=observation,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                **form.changes(),  # type: ignore[arg-type]  # only text/priority; mypy checks every keyword
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + f"#obs-{observation.pk}")
            return _observation_item(request, access, conversation, observation)
    context = {"conversation": conversation, "observation": observation, "form": form}
    if request.method == "POST":
        return _invalid_form(
            request, access, template, context, panel=f"#obs-{observation.pk}-panel"
        )
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


@require_http_methods(["GET", "POST"])
@login_required
def observation_delete(
    request: HttpRequest, conversation_id: uuid.UUID, observation_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, observation_id, Capability.EDIT_MEMORY
    )
    template = "dashboard/observation_delete.html"
    form = ReasonForm(
        request.POST if request.method == "POST" else None,
        auto_id=_form_id(observation, "delete"),
    )
    if request.method == "POST" and form.is_valid():
        try:
            memory_services.observation_delete(
                observation=observation,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(_conversation_url(conversation) + "#observations")
            context: dict[str, Any] = {"conversation": conversation, "observation": observation}
            return render_page(request, f"{template}#deleted", access, context)
    context = {"conversation": conversation, "observation": observation, "form": form}
    if request.method == "POST":
        return _invalid_form(
            request, access, template, context, panel=f"#obs-{observation.pk}-panel"
        )
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


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


def _form_id(observation: Observation, kind: str) -> str:
    # Several items' forms can be open at once: their field ids must not collide.
    return f"{kind}_{observation.pk.hex[:12]}_%s"


def _history_context(
    conversation: Conversation,
    observation: Observation,
    bound: RevertForm | None = None,
) -> dict[str, Any]:
    changes = memory_selectors.observation_history(observation=observation)
    names = selectors.user_labels({change.changed_by for change in changes})
    versions = []
    for change in changes:
        if bound is not None and bound.data.get("version") == str(change.version):
            form = bound
        else:
            form = RevertForm(
                initial={"version": change.version},
                auto_id=_form_id(observation, f"revert{change.version}"),
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
        "observation": observation,
        "versions": versions[::-1],  # newest change first
        # A refused revert to a version not listed (a stale page) is reported on top.
        "revert_errors": [message for messages in bound.errors.values() for message in messages]
        if bound is not None and not matched
        else [],
    }


@require_GET
@login_required
def observation_history(
    request: HttpRequest, conversation_id: uuid.UUID, observation_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, observation_id
    )
    template = "dashboard/observation_history.html"
    context = _history_context(conversation, observation)
    partial = f"{template}#history" if is_partial(request) else template
    return render_page(request, partial, access, context)


@require_POST
@login_required
def observation_revert(
    request: HttpRequest, conversation_id: uuid.UUID, observation_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, observation_id, Capability.EDIT_MEMORY
    )
    version = request.POST.get("version", "")
    version = version if version.isdigit() else ""
    form = RevertForm(request.POST, auto_id=_form_id(observation, f"revert{version}"))
    if form.is_valid():
        try:
            observation = memory_services.observation_revert(
                observation=observation,
                version=form.cleaned_data["version"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect("dashboard:observation_history", conversation.pk, observation.pk)
            history = _history_context(conversation, observation)
            return _observation_item(
                request,
                access,
                conversation,
                observation,
                versions=history["versions"],
                show_history=True,
            )
    context = _history_context(conversation, observation, bound=form)
    return _invalid_form(
        request,
        access,
        "dashboard/observation_history.html",
        context,
        panel=f"#obs-{observation.pk}-panel",
        partial="history",
    )


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
