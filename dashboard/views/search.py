"""Search across the conversations of the workspace."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from dashboard.access import access_for
from dashboard.rendering import is_partial, render_page
from dashboard.selectors import search as selectors
from governance.redaction.masked_search import masked_search_record
from tenancy.models import Capability

SEARCH_RESULTS_PER_PAGE = 25


@require_GET
@login_required
def memory_search(request: HttpRequest) -> HttpResponse:
    """Messages, observations and reflections of the current workspace holding ``q``,
    one ``kind`` at a time (the first kind with hits unless asked), a window of them;
    each links to the item on its conversation page. The "more" link of a window is the
    next page without JavaScript; for htmx (``page`` asked) only the next window's hits
    come back, appended in place. Messages are matched as the role sees them:
    masked, unless the role may reveal the values; a search of theirs that marks a
    masked value is audited before the page is sent."""
    access = access_for(request, Capability.VIEW_MEMORY)
    raw_values = access.can_reveal()
    query = request.GET.get("q", "").strip()[:200]
    end_user = request.GET.get("user", "").strip()
    kind = request.GET.get("kind", "")
    context: dict[str, Any] = {
        "q": query,
        "end_user": end_user,
        "kinds": selectors.SEARCH_KINDS,
        "kind": kind,
        "raw_values": raw_values,
    }
    if query:
        results = selectors.memory_search(
            workspace=access.workspace, query=query, end_user=end_user, raw_values=raw_values
        )
        if results.masked_matches:
            masked_search_record(
                workspace_id=access.workspace.pk,
                actor=access.actor(request),
                page="search",
                query=query,
                matches=sum(results.counts.values()),
                masked_matches=results.masked_matches,
            )
        if kind not in selectors.SEARCH_KINDS:
            kind = results.first_kind_found()
        page = Paginator(results.hits[kind], SEARCH_RESULTS_PER_PAGE).get_page(
            request.GET.get("page")
        )
        hits = list(page)
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
    if is_partial(request) and query and "page" in request.GET:
        return render_page(request, f"{template}#hits", access, context)
    if is_partial(request):
        return render_page(request, f"{template}#results", access, context)
    return render_page(request, template, access, context)
