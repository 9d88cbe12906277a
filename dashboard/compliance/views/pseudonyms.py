"""The workspace's pseudonyms, and the reveal of what one stands for: it needs
``REVEAL_PSEUDONYMS`` (compliance officer and admin) and a reason."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for
from dashboard.compliance.forms import PseudonymRevealForm
from dashboard.rendering import INVALID, is_partial, render_page
from governance.redaction.reveal import PseudonymReveal, pseudonym_reveal
from governance.selectors import (
    pseudonym_list,
)
from tenancy.models import Capability

PSEUDONYMS_PER_PAGE = 50


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
