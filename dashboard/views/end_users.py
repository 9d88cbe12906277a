"""One end user: their conversations and the memory served from them."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from dashboard.access import access_for
from dashboard.rendering import render_page
from dashboard.selectors.end_users import end_user_memory
from tenancy.models import Capability


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
    memory = end_user_memory(workspace=access.workspace, end_user=end_user_id)
    if not memory.conversations:
        raise Http404("No conversation of this end user in this workspace.")
    context = {"end_user": end_user_id, "memory": memory}
    return render_page(request, "dashboard/end_user.html", access, context)
