"""The history of an observation or a reflection (each earlier version with its reason
and diff) and reverting to one. A revert form carries the note's version when the
history was opened; a revert from a page someone else's correction has made stale is
refused and the history comes back saying what changed since."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from core.paging import is_ascii_digits
from dashboard.access import Access, get_observation_for_user, get_reflection_for_user
from dashboard.forms import RevertForm, add_service_error
from dashboard.rendering import invalid_form, is_partial, render_page
from dashboard.selectors.note_changes import ChangesSince, note_changes_since
from dashboard.selectors.users import user_labels
from dashboard.views.notes import OBSERVATION, REFLECTION, MemoryKind, Note, form_id, memory_item
from memory import selectors as memory_selectors
from memory.models import Conversation
from memory.services import observations as observation_services
from memory.services import reflections as reflection_services
from memory.services.notes import NoteVersionConflict
from tenancy.models import Capability

HISTORY_TEMPLATE = "dashboard/memory_history.html"


def _history_context(
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
    bound: RevertForm | None = None,
    changed: ChangesSince | None = None,
) -> dict[str, Any]:
    names = user_labels({change.changed_by for change in changes})
    versions = []
    for change in changes:
        if bound is not None and bound.data.get("version") == str(change.version):
            form = bound
        else:
            form = RevertForm(
                initial={"version": change.version, "expected_version": item.version},
                auto_id=form_id(item, f"revert{change.version}"),
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
        "changed": changed,
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
    return RevertForm(request.POST, auto_id=form_id(item, f"revert{version}"))


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
    return memory_item(
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
    changed: ChangesSince | None = None,
) -> HttpResponse:
    context = _history_context(conversation, kind, item, changes, bound=form, changed=changed)
    return invalid_form(
        request, access, HISTORY_TEMPLATE, context, panel=kind.panel(item), partial="history"
    )


def _revert_conflict(
    request: HttpRequest,
    access: Access,
    conversation: Conversation,
    kind: MemoryKind,
    item: Note,
    changes: list[memory_selectors.MemoryChange],
    form: RevertForm,
) -> HttpResponse:
    """A revert from a history page opened before someone else's correction: nothing
    was restored. The history comes back as it now is, saying what changed since, with
    the reason given kept in the revert form, now made from the current version."""
    changed = note_changes_since(item, opened_version=form.cleaned_data["expected_version"])
    kept = RevertForm(
        {**form.cleaned_data, "expected_version": item.version},
        auto_id=form_id(item, f"revert{form.cleaned_data['version']}"),
    )
    return _revert_refused(request, access, conversation, kind, item, changes, kept, changed)


# Per kind of note: who may open it, the service that reverts it, and its history.
_REVERTS: dict[MemoryKind, tuple[Callable[..., Any], Callable[..., Note], Callable[[Any], Any]]] = {
    OBSERVATION: (
        get_observation_for_user,
        lambda item, **change: observation_services.observation_revert(observation=item, **change),
        lambda item: memory_selectors.observation_history(observation=item),
    ),
    REFLECTION: (
        get_reflection_for_user,
        lambda item, **change: reflection_services.reflection_revert(reflection=item, **change),
        lambda item: memory_selectors.reflection_history(reflection=item),
    ),
}


def _revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID, kind: MemoryKind
) -> HttpResponse:
    get_for_user, revert, history = _REVERTS[kind]
    access, conversation, item = get_for_user(
        request, conversation_id, item_id, Capability.EDIT_MEMORY
    )
    form = _revert_form(request, item)
    if form.is_valid():
        try:
            item = revert(
                item,
                version=form.cleaned_data["version"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
                expected_version=form.cleaned_data["expected_version"],
            )
        except NoteVersionConflict:
            item.refresh_from_db()
            return _revert_conflict(request, access, conversation, kind, item, history(item), form)
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            return _reverted(request, access, conversation, kind, item, history(item))
    return _revert_refused(request, access, conversation, kind, item, history(item), form)


@require_POST
@login_required
def observation_revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    return _revert(request, conversation_id, item_id, OBSERVATION)


@require_POST
@login_required
def reflection_revert(
    request: HttpRequest, conversation_id: uuid.UUID, item_id: uuid.UUID
) -> HttpResponse:
    return _revert(request, conversation_id, item_id, REFLECTION)
