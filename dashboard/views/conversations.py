"""The conversation list and the conversation page: its three tiers side by side, the
columns htmx reloads, and revealing a message's masked values."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from core.errors import MemdeskError
from core.paging import is_ascii_digits
from dashboard.access import access_for, get_conversation_for_user, get_message_for_user
from dashboard.forms import ConversationFilterForm, ObservationCreateForm
from dashboard.rendering import (
    INVALID,
    conversation_url,
    int_param,
    is_partial,
    posted_reason,
    render_page,
    uuid_param,
)
from dashboard.selectors.conversations import (
    add_figures,
    conversation_search,
    end_users,
    found_only_masked_count,
)
from dashboard.selectors.escalations import escalations_masked
from dashboard.selectors.figures import ConversationFigures, conversation_figures
from dashboard.selectors.messages import (
    MESSAGE_PAGE,
    MessageWindow,
    attach_reasoning,
    mark_unobserved,
    message_window,
)
from dashboard.selectors.notes import (
    OBSERVATION_PAGE,
    OBSERVATIONS_FIRST,
    REFLECTION_PAGE,
    REFLECTIONS_FIRST,
    ObservationPage,
    mark_served_in_place,
    note_authors,
    observation_page,
    reflection_page,
    reflection_sources,
)
from dashboard.selectors.pins import PINS_SHOWN, masked_pins
from dashboard.selectors.runs import latest_runs
from dashboard.views.notes import ADD_FORM_ID
from governance.redaction import scan
from governance.redaction.masked_search import masked_search_record
from governance.redaction.masking import mask_messages
from memory import selectors as memory_selectors
from memory.models import PRIORITY_MARKERS, Conversation, Observation, Priority
from tenancy.models import Capability

CONVERSATIONS_PER_PAGE = 25
CONVERSATION_ESCALATIONS = 50  # the newest, on the conversation page
PRIORITIES = [(p.value, PRIORITY_MARKERS[p]) for p in Priority]
# Sent when the reflections column, polling while one was stale, finds none: the
# observations column reloads, its observations no longer served in their place.
MEMORY_REDERIVED = "memory-rederived"


def priority_param(request: HttpRequest) -> str:
    """The priority the observations column is filtered to ("" for all)."""
    priority = request.GET.get("priority", "")
    return priority if priority in Priority.values else ""


@require_GET
@login_required
def conversation_list(request: HttpRequest) -> HttpResponse:
    """The workspace's conversations, filtered, sorted and paged. The search matches
    messages as the role sees them: masked, unless the role may reveal the values; a
    search of theirs that lists a conversation only a masked value matches is audited
    before the page is sent."""
    access = access_for(request, Capability.VIEW_MEMORY)
    form = ConversationFilterForm(request.GET)
    form.is_valid()  # errors are shown next to their fields; valid filters still apply
    filters = form.filters()
    conversations = conversation_search(
        workspace=access.workspace, filters=filters, raw_values=access.can_reveal()
    )
    page = Paginator(conversations, CONVERSATIONS_PER_PAGE).get_page(request.GET.get("page"))
    add_figures(list(page))
    masked_matches = found_only_masked_count(conversations)
    if masked_matches:
        masked_search_record(
            workspace_id=access.workspace.pk,
            actor=access.actor(request),
            page="conversations",
            query=filters.query,
            matches=page.paginator.count,
            masked_matches=masked_matches,
        )
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
    context = {
        "form": form,
        "page": page,
        "filtered": filtered,
        "masked_matches": masked_matches,
    }
    template = "dashboard/conversation_list.html"
    if is_partial(request):
        return render_page(request, f"{template}#results", access, context)
    context["end_users"] = end_users(workspace=access.workspace)
    return render_page(request, template, access, context)


def _mark(items: list[Any], ids: set[str]) -> None:
    for item in items:
        item.is_highlighted = str(item.pk) in ids


def _reflections(request: HttpRequest, conversation: Conversation) -> dict[str, Any]:
    """The reflections a request asks for: the newest few, or a page of older ones
    (``reflection_offset``)."""
    offset = int_param(request, "reflection_offset") or 0
    page = reflection_page(
        conversation=conversation,
        offset=offset,
        limit=REFLECTION_PAGE if offset else REFLECTIONS_FIRST,
    )
    note_authors(notes=page.reflections)
    return {"reflection_page": page, "reflections": page.reflections}


def _stale(figures: ConversationFigures, conversation: Conversation) -> dict[str, bool]:
    # Of the whole conversation, not only of the reflections shown: the column polls
    # while one is re-derived (not one in a person's words, nor one whose replacement
    # waits for approval: those wait for a person), and the observations served in its
    # place are flagged.
    rederived = figures.reflections_stale > 0 and (
        memory_selectors.rederivable_reflections(conversation=conversation).exists()
    )
    return {"reflections_stale": rederived}


def _message_window(
    request: HttpRequest, conversation: Conversation
) -> tuple[MessageWindow, Observation | None]:
    """The messages a request asks for; with ``highlight``, the observation whose sources
    are marked (the window starts at its first source unless ``at`` says otherwise)."""
    at = int_param(request, "at")
    selected = None
    highlight_id = uuid_param(request, "highlight")
    if highlight_id:
        # A link to an observation since deleted shows the page without it.
        with contextlib.suppress(MemdeskError):
            selected = memory_selectors.observation_get(
                conversation=conversation, observation_id=str(highlight_id)
            )
        if selected is not None and at is None:
            at = selected.window_start_seq
    window = _masked(message_window(conversation=conversation, at=at), conversation)
    if selected is not None:
        window.highlighted = {str(i) for i in selected.source_message_ids}
    _mark(window.messages, window.highlighted)
    return window, selected


def _masked(window: MessageWindow, conversation: Conversation) -> MessageWindow:
    # Every list of messages a page shows goes through here: the values the scan found
    # are masked (the template shows only ``parts``), whoever is reading; the messages
    # served verbatim because no observation covers them yet are flagged.
    mask_messages(messages=window.messages, workspace_id=conversation.workspace_id)
    mark_unobserved(conversation=conversation, messages=window.messages)
    # The agent's reasoning steps and tool calls, in time order with the messages and
    # masked as they are.
    attach_reasoning(conversation=conversation, window=window)
    return window


def _observation_page(
    request: HttpRequest, conversation: Conversation, *, stale_shown: bool | None = None
) -> ObservationPage:
    """The observations a request asks for. ``stale_shown``: whether the reflections
    shown beside them hold a stale one; the page spares the query for the observations
    served in their place when they do not (known to the view that lists them)."""
    reflection_id = uuid_param(request, "reflection")
    reflection = None
    if reflection_id:
        with contextlib.suppress(MemdeskError):
            reflection = memory_selectors.reflection_get(
                conversation=conversation, reflection_id=str(reflection_id)
            )
    if reflection is not None:
        obs_page = reflection_sources(conversation=conversation, reflection=reflection)
    else:
        offset = int_param(request, "offset") or 0
        obs_page = observation_page(
            conversation=conversation,
            offset=offset,
            limit=OBSERVATION_PAGE if offset else OBSERVATIONS_FIRST,
            priority=priority_param(request),
        )
    _mark(obs_page.observations, obs_page.highlighted)
    note_authors(notes=obs_page.observations)
    if stale_shown is not False:
        mark_served_in_place(conversation=conversation, observations=obs_page.observations)
    return obs_page


@require_GET
@login_required
def conversation_detail(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    access, conversation = get_conversation_for_user(request, conversation_id, with_flags=True)
    figures = conversation_figures(conversation=conversation)
    window, selected = _message_window(request, conversation)
    reflections = {**_reflections(request, conversation), **_stale(figures, conversation)}
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
            note_authors(notes=[selected])
    context = {
        "conversation": conversation,
        "stats": figures.stats,
        "window": window,
        "selected": selected,
        "obs_page": obs_page,
        "pinned": pinned,
        **reflections,
        "pins": masked_pins(conversation=conversation, limit=PINS_SHOWN),
        "runs": latest_runs(conversation=conversation),
        "add_form": ObservationCreateForm(auto_id=ADD_FORM_ID),
        "observation_counts": figures.observation_counts,
        "priorities": PRIORITIES,
        "priority": priority_param(request),
    }
    template = "dashboard/conversation_detail.html"
    if is_partial(request):
        return render_page(request, f"{template}#columns", access, context)
    context["escalations"] = list(
        memory_selectors.escalation_list(conversation=conversation)[:CONVERSATION_ESCALATIONS]
    )
    escalations_masked(context["escalations"], workspace_id=conversation.workspace_id)
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
        at = max((before or 1) - MESSAGE_PAGE, 1) if before else after
        return redirect(
            conversation_url(
                conversation, at=at or request.GET.get("at"), highlight=request.GET.get("highlight")
            )
        )
    template = "dashboard/conversation_detail.html"
    context: dict[str, Any] = {"conversation": conversation}
    if before is not None:
        context["window"] = _masked(
            message_window(conversation=conversation, before=before), conversation
        )
        return render_page(request, f"{template}#messages_older", access, context)
    if after is not None:
        context["window"] = _masked(
            message_window(conversation=conversation, after=after), conversation
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
            conversation_url(
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
    context["observation_counts"] = conversation_figures(
        conversation=conversation
    ).observation_counts
    context["counts_out_of_band"] = True
    return render_page(request, f"{template}#observation_list", access, context)


@require_GET
@login_required
def reflection_list(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Older reflections (``reflection_offset``), or the reflections column again: after
    a correction made some stale, and while they are being re-derived (the list polls
    itself, saying ``stale=1``, until none is)."""
    access, conversation = get_conversation_for_user(request, conversation_id)
    if not is_partial(request):
        offset = int_param(request, "reflection_offset")
        return redirect(conversation_url(conversation, reflection_offset=offset) + "#reflections")
    context = {"conversation": conversation, **_reflections(request, conversation)}
    template = "dashboard/conversation_detail.html"
    if context["reflection_page"].offset:
        return render_page(request, f"{template}#reflections_older", access, context)
    context.update(_stale(conversation_figures(conversation=conversation), conversation))
    response = render_page(request, f"{template}#reflection_list", access, context)
    if request.GET.get("stale") and not context["reflections_stale"]:
        trigger_client_event(response, MEMORY_REDERIVED)
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
    a role that may reveal them, for the reason posted with them. ``scan.message_reveal``
    audits the reveal before anything is shown; the response is never cached. Without a
    reason nothing is revealed: the message comes back masked, the error by the field."""
    access, conversation, message = get_message_for_user(
        request, conversation_id, message_id, Capability.REVEAL_PII
    )
    finding_ids = _finding_ids(request.POST.get("finding", ""))
    if finding_ids is None:
        return HttpResponseBadRequest(
            "finding must be the ids of findings of this message, separated by commas.",
            content_type="text/plain; charset=utf-8",
        )
    reason = posted_reason(request)
    refused = ""
    try:
        revealed = scan.message_reveal(
            message=message,
            workspace_id=conversation.workspace_id,
            actor=access.actor(request),
            reason=reason,
            finding_ids=finding_ids,
        )
    except MemdeskError as error:
        if error.code not in ("reason_required", "reason_too_long"):
            raise Http404(error.message) from None
        revealed, refused = [], error.message
    mask_messages(
        messages=[message],
        workspace_id=conversation.workspace_id,
        revealed={f.pk for f in revealed},
    )
    message.is_revealed = bool(revealed)  # type: ignore[attr-defined]  # for the template
    context = {
        "conversation": conversation,
        "message": message,
        # The form comes back with the reason given, for the values still masked.
        "reveal_reason": reason,
        "reveal_error": refused,
    }
    if is_partial(request):
        template = "dashboard/conversation_detail.html#message_item"
    else:
        template = "dashboard/message_reveal.html"
    response = render_page(request, template, access, context, status=INVALID if refused else 200)
    response["Cache-Control"] = "private, no-store"
    return response
