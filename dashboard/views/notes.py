"""Correcting memory by hand, with a reason: adding an observation, and editing,
deleting and reverting an observation or a reflection, with their history. Each view
calls its memory service by name; what the two kinds of note differ in on the pages
(their names and element ids) is a ``MemoryKind``."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import trigger_client_event

from core.errors import MemdeskError
from core.paging import is_ascii_digits
from dashboard.access import (
    Access,
    get_conversation_for_user,
    get_observation_for_user,
    get_reflection_for_user,
)
from dashboard.forms import (
    MemoryEditForm,
    ObservationCreateForm,
    ReasonForm,
    RevertForm,
    add_service_error,
)
from dashboard.rendering import conversation_url, invalid_form, is_partial, render_page
from dashboard.selectors.notes import manual_authors, mark_served_in_place, observation_counts
from dashboard.selectors.users import user_labels
from memory import selectors as memory_selectors
from memory.models import Conversation, Observation, Reflection
from memory.services import observations as observation_services
from memory.services import reflections as reflection_services
from memory.services.observations import observation_create, observation_update
from memory.services.reflections import reflection_update
from tenancy.models import Capability

ADD_FORM_ID = "add_%s"
# Sent with a corrected observation: the reflections column reloads, showing the ones
# that went stale.
MEMORY_CHANGED = "memory-changed"


@dataclass(frozen=True)
class MemoryKind:
    """One tier that people correct (observations, reflections) as its pages name it."""

    name: str  # "observation"; also the item's name in the page's templates
    article: str  # "an observation", for headings
    anchor: str  # the item's element id is "<anchor>-<pk>", its panel's "<anchor>-<pk>-panel"

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


OBSERVATION = MemoryKind(name="observation", article="an observation", anchor="obs")
REFLECTION = MemoryKind(name="reflection", article="a reflection", anchor="refl")

Note = Observation | Reflection


def _memory_item(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    **extra: Any,
) -> HttpResponse:
    if isinstance(item, Observation):
        mark_served_in_place(conversation=conversation, observations=[item])
        manual_authors(workspace=conversation.workspace, observations=[item])
    context = {"conversation": conversation, kind.name: item, "item": item, "kind": kind, **extra}
    response = render_page(
        request, f"dashboard/conversation_detail.html#{kind.name}_item", access, context
    )
    if kind.name == "observation":
        trigger_client_event(response, MEMORY_CHANGED)
    return response


def _form_id(item: Note, form: str) -> str:
    # Several items' forms can be open at once: their field ids must not collide.
    return f"{form}_{item.pk.hex[:12]}_%s"


# --- adding an observation ------------------------------------------------------------------


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
            observation = observation_create(
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
                return redirect(conversation_url(conversation) + f"#obs-{observation.pk}")
            observation.is_new = True  # type: ignore[attr-defined]  # for the template
            observation.author = request.user.get_username()  # type: ignore[attr-defined]  # for the template
            context = {
                "conversation": conversation,
                "form": ObservationCreateForm(auto_id=ADD_FORM_ID),
                "observation": observation,
                "added": True,
                "observation_counts": observation_counts(conversation=conversation),
                "counts_out_of_band": True,
            }
            return render_page(request, f"{template}#form", access, context, status=201)
    context = {"conversation": conversation, "form": form}
    if request.method == "POST":
        return invalid_form(request, access, template, context, panel=None)
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


# --- editing -------------------------------------------------------------------------------


def _edit_form(request: HttpRequest, item: Note) -> MemoryEditForm:
    data = request.POST if request.method == "POST" else None
    return MemoryEditForm(data, item=item, auto_id=_form_id(item, "edit"))


def _edited(
    request: HttpRequest, access: Access, conversation: Conversation, kind: MemoryKind, item: Note
) -> HttpResponse:
    if not is_partial(request):
        return redirect(conversation_url(conversation) + f"#{kind.anchor}-{item.pk}")
    return _memory_item(request, access, conversation, kind, item)


def _edit_page(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    form: MemoryEditForm,
) -> HttpResponse:
    """The form: to fill in (GET), or back with its errors (a refused POST)."""
    template = "dashboard/memory_edit.html"
    context = {"conversation": conversation, "item": item, "kind": kind, "form": form}
    if request.method == "POST":
        return invalid_form(request, access, template, context, panel=kind.panel(item))
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


@require_http_methods(["GET", "POST"])
@login_required
def observation_edit(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _edit_form(request, observation)
    if request.method == "POST" and form.is_valid():
        changes = form.changes()
        try:
            observation = observation_update(
                observation=observation,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                text=changes.get("text"),
                priority=changes.get("priority"),
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _edited(request, access, conversation, OBSERVATION, observation)
    return _edit_page(request, access, conversation, OBSERVATION, observation, form)


@require_http_methods(["GET", "POST"])
@login_required
def reflection_edit(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, reflection = get_reflection_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _edit_form(request, reflection)
    if request.method == "POST" and form.is_valid():
        changes = form.changes()
        try:
            reflection = reflection_update(
                reflection=reflection,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                text=changes.get("text"),
                priority=changes.get("priority"),
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _edited(request, access, conversation, REFLECTION, reflection)
    return _edit_page(request, access, conversation, REFLECTION, reflection, form)


# --- deleting ------------------------------------------------------------------------------

DELETE_TEMPLATE = "dashboard/memory_delete.html"


def _delete_form(request: HttpRequest, item: Note) -> ReasonForm:
    data = request.POST if request.method == "POST" else None
    return ReasonForm(data, auto_id=_form_id(item, "delete"))


def _deleted(
    request: HttpRequest, access: Access, conversation: Conversation, kind: MemoryKind, item: Note
) -> HttpResponse:
    if not is_partial(request):
        return redirect(conversation_url(conversation) + f"#{kind.name}s")
    context: dict[str, Any] = {"conversation": conversation, "item": item, "kind": kind}
    if kind.name == "observation":
        context["observation_counts"] = observation_counts(conversation=conversation)
        context["counts_out_of_band"] = True
    response = render_page(request, f"{DELETE_TEMPLATE}#deleted", access, context)
    if kind.name == "observation":
        trigger_client_event(response, MEMORY_CHANGED)
    return response


def _delete_page(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    form: ReasonForm,
) -> HttpResponse:
    """The form: to fill in (GET), or back with its errors (a refused POST)."""
    context = {"conversation": conversation, "item": item, "kind": kind, "form": form}
    if request.method == "POST":
        return invalid_form(request, access, DELETE_TEMPLATE, context, panel=kind.panel(item))
    partial = f"{DELETE_TEMPLATE}#form" if is_partial(request) else DELETE_TEMPLATE
    return render_page(request, partial, access, context)


@require_http_methods(["GET", "POST"])
@login_required
def observation_delete(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _delete_form(request, observation)
    if request.method == "POST" and form.is_valid():
        try:
            observation_services.observation_delete(
                observation=observation,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _deleted(request, access, conversation, OBSERVATION, observation)
    return _delete_page(request, access, conversation, OBSERVATION, observation, form)


@require_http_methods(["GET", "POST"])
@login_required
def reflection_delete(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, reflection = get_reflection_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _delete_form(request, reflection)
    if request.method == "POST" and form.is_valid():
        try:
            reflection_services.reflection_delete(
                reflection=reflection,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _deleted(request, access, conversation, REFLECTION, reflection)
    return _delete_page(request, access, conversation, REFLECTION, reflection, form)


# --- history and reverting ---------------------------------------------------------------------

HISTORY_TEMPLATE = "dashboard/memory_history.html"


def _history_context(
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
    bound: RevertForm | None = None,
) -> dict[str, Any]:
    names = user_labels({change.changed_by for change in changes})
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


def _history_page(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
) -> HttpResponse:
    context = _history_context(conversation, kind, item, changes)
    partial = f"{HISTORY_TEMPLATE}#history" if is_partial(request) else HISTORY_TEMPLATE
    return render_page(request, partial, access, context)


@require_GET
@login_required
def observation_history(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(request, conversation_id, item_id)
    changes = memory_selectors.observation_history(observation=observation)
    return _history_page(request, access, conversation, OBSERVATION, observation, changes)


@require_GET
@login_required
def reflection_history(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, reflection = get_reflection_for_user(request, conversation_id, item_id)
    changes = memory_selectors.reflection_history(reflection=reflection)
    return _history_page(request, access, conversation, REFLECTION, reflection, changes)


def _revert_form(request: HttpRequest, item: Note) -> RevertForm:
    version = request.POST.get("version", "")
    version = version if is_ascii_digits(version) else ""
    return RevertForm(request.POST, auto_id=_form_id(item, f"revert{version}"))


def _reverted(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
) -> HttpResponse:
    if not is_partial(request):
        return redirect(kind.url_name("history"), conversation.pk, item.pk)
    history = _history_context(conversation, kind, item, changes)
    return _memory_item(
        request,
        access,
        conversation,
        kind,
        item,
        versions=history["versions"],
        show_history=True,
    )


def _revert_refused(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
    form: RevertForm,
) -> HttpResponse:
    context = _history_context(conversation, kind, item, changes, bound=form)
    return invalid_form(
        request, access, HISTORY_TEMPLATE, context, panel=kind.panel(item), partial="history"
    )


@require_POST
@login_required
def observation_revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, observation = get_observation_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _revert_form(request, observation)
    if form.is_valid():
        try:
            observation = observation_services.observation_revert(
                observation=observation,
                version=form.cleaned_data["version"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            changes = memory_selectors.observation_history(observation=observation)
            return _reverted(request, access, conversation, OBSERVATION, observation, changes)
    changes = memory_selectors.observation_history(observation=observation)
    return _revert_refused(request, access, conversation, OBSERVATION, observation, changes, form)


@require_POST
@login_required
def reflection_revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    access, conversation, reflection = get_reflection_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _revert_form(request, reflection)
    if form.is_valid():
        try:
            reflection = reflection_services.reflection_revert(
                reflection=reflection,
                version=form.cleaned_data["version"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            changes = memory_selectors.reflection_history(reflection=reflection)
            return _reverted(request, access, conversation, REFLECTION, reflection, changes)
    changes = memory_selectors.reflection_history(reflection=reflection)
    return _revert_refused(request, access, conversation, REFLECTION, reflection, changes, form)
