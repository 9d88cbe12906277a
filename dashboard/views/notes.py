"""Correcting memory by hand, with a reason: adding an observation, and editing and
deleting an observation or a reflection (their history and reverting are
``dashboard.views.note_history``). Each view calls its memory service by name; what the
two kinds of note differ in on the pages (their names and element ids) is a
``MemoryKind``.

Each correction's form carries the note's version when it was opened. When someone
else's correction was saved since, the service refuses it (``NoteVersionConflict``)
and the form comes back saying who changed the note and how, with what the person
typed kept in it, made from the version there is now."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods
from django_htmx.http import trigger_client_event

from core.errors import MemdeskError
from dashboard.access import (
    Access,
    get_conversation_for_user,
    get_observation_for_user,
    get_reflection_for_user,
)
from dashboard.forms import MemoryEditForm, NoteDeleteForm, ObservationCreateForm, add_service_error
from dashboard.rendering import conversation_url, invalid_form, is_partial, render_page
from dashboard.selectors.note_changes import ChangesSince, note_changes_since
from dashboard.selectors.notes import mark_served_in_place, note_authors, observation_counts
from memory.models import Conversation, Observation, Reflection
from memory.services import observations as observation_services
from memory.services import reflections as reflection_services
from memory.services.notes import NoteVersionConflict
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


def memory_item(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    **extra: Any,
) -> HttpResponse:
    """The note as its column shows it, to swap in for it once it is corrected."""
    if isinstance(item, Observation):
        mark_served_in_place(conversation=conversation, observations=[item])
    note_authors(notes=[item])
    context = {"conversation": conversation, kind.name: item, "item": item, "kind": kind, **extra}
    response = render_page(
        request, f"dashboard/conversation_detail.html#{kind.name}_item", access, context
    )
    if kind.name == "observation":
        trigger_client_event(response, MEMORY_CHANGED)
    return response


def form_id(item: Note, form: str) -> str:
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
    return MemoryEditForm(data, item=item, auto_id=form_id(item, "edit"))


def _edited(
    request: HttpRequest, access: Access, conversation: Conversation, kind: MemoryKind, item: Note
) -> HttpResponse:
    if not is_partial(request):
        return redirect(conversation_url(conversation) + f"#{kind.anchor}-{item.pk}")
    return memory_item(request, access, conversation, kind, item)


def _edit_page(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    form: MemoryEditForm,
    changed: ChangesSince | None = None,
) -> HttpResponse:
    """The form: to fill in (GET), or back with its errors (a refused POST), or with
    what ``changed`` since it was opened."""
    template = "dashboard/memory_edit.html"
    context = {
        "conversation": conversation,
        "item": item,
        "kind": kind,
        "form": form,
        "changed": changed,
    }
    if request.method == "POST":
        return invalid_form(request, access, template, context, panel=kind.panel(item))
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )


def _edit_conflict(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    form: MemoryEditForm,
) -> HttpResponse:
    """A save from a form opened before someone else's correction: nothing was saved.
    The form comes back at the current version with the person's text and reason; a
    field they left as they found it follows the note, so saving again does not undo
    the other correction unless they mean to."""
    item.refresh_from_db()
    posted = form.cleaned_data
    changed = note_changes_since(item, opened_version=posted["expected_version"])
    text, priority = posted["text"], posted["priority"]
    if text.strip() == changed.opened_text:
        text = item.text
    if priority == changed.opened_priority:
        priority = item.priority
    kept = MemoryEditForm(
        item=item,
        initial={
            "text": text,
            "priority": priority,
            "reason": posted["reason"],
            "expected_version": item.version,
        },
        auto_id=form_id(item, "edit"),
    )
    return _edit_page(request, access, conversation, kind, item, kept, changed)


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
                expected_version=form.cleaned_data["expected_version"],
            )
        except NoteVersionConflict:
            return _edit_conflict(request, access, conversation, OBSERVATION, observation, form)
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
                expected_version=form.cleaned_data["expected_version"],
            )
        except NoteVersionConflict:
            return _edit_conflict(request, access, conversation, REFLECTION, reflection, form)
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _edited(request, access, conversation, REFLECTION, reflection)
    return _edit_page(request, access, conversation, REFLECTION, reflection, form)


# --- deleting ------------------------------------------------------------------------------

DELETE_TEMPLATE = "dashboard/memory_delete.html"


def _delete_form(request: HttpRequest, item: Note) -> NoteDeleteForm:
    data = request.POST if request.method == "POST" else None
    return NoteDeleteForm(
        data, initial={"expected_version": item.version}, auto_id=form_id(item, "delete")
    )


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
    form: NoteDeleteForm,
    changed: ChangesSince | None = None,
) -> HttpResponse:
    """The form: to fill in (GET), or back with its errors (a refused POST), or with
    what ``changed`` since it was opened."""
    context = {
        "conversation": conversation,
        "item": item,
        "kind": kind,
        "form": form,
        "changed": changed,
    }
    if request.method == "POST":
        return invalid_form(request, access, DELETE_TEMPLATE, context, panel=kind.panel(item))
    partial = f"{DELETE_TEMPLATE}#form" if is_partial(request) else DELETE_TEMPLATE
    return render_page(request, partial, access, context)


def _delete_conflict(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    form: NoteDeleteForm,
) -> HttpResponse:
    """A deletion decided on a version someone else has corrected since: nothing was
    deleted. The form comes back at the current version, with the reason given."""
    item.refresh_from_db()
    changed = note_changes_since(item, opened_version=form.cleaned_data["expected_version"])
    kept = NoteDeleteForm(
        initial={"reason": form.cleaned_data["reason"], "expected_version": item.version},
        auto_id=form_id(item, "delete"),
    )
    return _delete_page(request, access, conversation, kind, item, kept, changed)


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
                expected_version=form.cleaned_data["expected_version"],
            )
        except NoteVersionConflict:
            return _delete_conflict(request, access, conversation, OBSERVATION, observation, form)
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
                expected_version=form.cleaned_data["expected_version"],
            )
        except NoteVersionConflict:
            return _delete_conflict(request, access, conversation, REFLECTION, reflection, form)
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _deleted(request, access, conversation, REFLECTION, reflection)
    return _delete_page(request, access, conversation, REFLECTION, reflection, form)
