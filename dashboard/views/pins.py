"""Pinning a message and unpinning it, with a reason."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from core.errors import MemdeskError
from dashboard.access import Access, get_message_for_user, get_pin_for_user
from dashboard.forms import PinForm, ReasonForm, add_service_error
from dashboard.rendering import conversation_url, invalid_form, is_partial, render_page
from dashboard.selectors.pins import masked_pins
from governance.redaction.masking import mask_messages
from memory.models import Conversation
from memory.services import pins as pin_services
from memory.services.pins import pin_create
from tenancy.models import Capability


def _pin_list(
    request: HttpRequest, access: Access, conversation: Conversation, *, new_pin: uuid.UUID
) -> HttpResponse:
    pins = masked_pins(conversation=conversation)
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
    access, conversation, message = get_message_for_user(
        request, conversation_id, message_id, Capability.EDIT_MEMORY
    )
    mask_messages(messages=[message], workspace_id=conversation.workspace_id)
    template = "dashboard/pin_add.html"
    form = PinForm(
        request.POST if request.method == "POST" else None, auto_id=f"pin_{message.seq}_%s"
    )
    if request.method == "POST" and form.is_valid():
        try:
            pin = pin_create(
                conversation=conversation,
                actor=access.actor(request),
                message_id=message.pk,
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(conversation_url(conversation) + f"#pin-{pin.pk}")
            return _pin_list(request, access, conversation, new_pin=pin.pk)
    context = {"conversation": conversation, "message": message, "form": form}
    if request.method == "POST":
        return invalid_form(request, access, template, context, panel=None)
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
            pin_services.pin_delete(
                pin=pin, actor=access.actor(request), reason=form.cleaned_data["reason"]
            )
        except MemdeskError as error:
            add_service_error(form, error)
        else:
            if not is_partial(request):
                return redirect(conversation_url(conversation) + "#pins")
            context: dict[str, Any] = {"conversation": conversation, "pin": pin}
            return render_page(request, f"{template}#deleted", access, context)
    context = {"conversation": conversation, "pin": pin, "form": form}
    if request.method == "POST":
        return invalid_form(request, access, template, context, panel=f"#pin-{pin.pk}-panel")
    return render_page(
        request, f"{template}#form" if is_partial(request) else template, access, context
    )
