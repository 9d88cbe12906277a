"""The 403 page: which role an action needs, and in which workspace."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from core.errors import error_body
from dashboard.access import NoWorkspace, RoleRequired


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: say which role the action needs, and in which workspace."""
    if request.path.startswith("/v1/"):
        message = "This API key may not do this."
        return JsonResponse(error_body("forbidden", message), status=403)
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
