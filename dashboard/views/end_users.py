"""One end user: their conversations and the memory served from them."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Page
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from dashboard.access import access_for
from dashboard.rendering import is_partial, render_page
from dashboard.selectors.end_users import (
    end_user_conversations,
    end_user_observations,
    end_user_pins,
    end_user_reflections,
)
from tenancy.models import Capability

# Each list of the page and the query parameter that pages it ("?observations=2").
WINDOWS = {
    "conversations": end_user_conversations,
    "reflections": end_user_reflections,
    "observations": end_user_observations,
    "pins": end_user_pins,
}


@require_GET
@login_required
def end_user(request: HttpRequest, end_user_id: str = "") -> HttpResponse:
    """One end user: their conversations in this workspace and the memory served from
    them, a window of each. ``?<list>=<n>`` shows that list's window n: the whole page
    without JavaScript, only that window's rows for htmx (its "more" link appends them).
    ``?user=`` (the form) redirects to the user's own address."""
    access = access_for(request, Capability.VIEW_MEMORY)
    if not end_user_id:
        wanted = request.GET.get("user", "").strip()
        if not wanted:
            return redirect("dashboard:conversation_list")
        return redirect("dashboard:end_user", end_user_id=wanted)
    template = "dashboard/end_user.html"
    paged = next((name for name in WINDOWS if name in request.GET), None)
    # An htmx request for a list's next window gets only its rows.
    rows_of = paged if paged is not None and is_partial(request) else None
    windows: dict[str, Page] = {
        name: window(workspace=access.workspace, end_user=end_user_id, page=request.GET.get(name))
        for name, window in WINDOWS.items()
        if rows_of in (None, name)
    }
    listed = rows_of or "conversations"
    if not windows[listed].paginator.count:
        raise Http404(f"No {listed} of this end user in this workspace.")
    context = {"end_user": end_user_id, **windows}
    if rows_of:
        return render_page(request, f"{template}#{rows_of}_rows", access, context)
    return render_page(request, template, access, context)
