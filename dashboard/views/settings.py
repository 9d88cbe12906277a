"""The workspace's settings: switching workspace, API keys and memory settings."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import Resolver404, resolve
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard.access import access_for, get_api_key_for_user, switch_workspace
from dashboard.forms import ApiKeyCreateForm, MemorySettingsForm, add_service_error
from dashboard.rendering import INVALID, is_partial, render_page
from dashboard.selectors.settings import api_keys_of
from memory.services.workspace_settings import (
    workspace_settings_snapshot,
    workspace_settings_update,
)
from tenancy import services as tenancy_services
from tenancy.models import Capability, roles_with
from tenancy.services import api_key_create

# Where the switcher may send the user back to: pages that belong to no one object.
SWITCH_RETURN_PAGES = {
    "dashboard:conversation_list",
    "dashboard:metrics",
    "dashboard:api_keys",
    "dashboard:memory_settings",
}


@require_POST
@login_required
def workspace_switch(request: HttpRequest) -> HttpResponse:
    if switch_workspace(request, request.POST.get("workspace", "")) is None:
        raise Http404("No such workspace among yours.")
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        try:
            match = resolve(target.split("?", 1)[0])
        except Resolver404:
            match = None
        # An object page of the old workspace would switch straight back: go to its list.
        if match and match.view_name in SWITCH_RETURN_PAGES:
            return redirect(match.view_name)
    return redirect("dashboard:conversation_list")


# --- API keys -----------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def api_keys(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_API_KEYS)
    template = "dashboard/api_keys.html"
    form = ApiKeyCreateForm(request.POST if request.method == "POST" else None)
    created = None
    status = 200
    if request.method == "POST":
        if form.is_valid():
            api_key, raw_key = api_key_create(
                workspace=access.workspace,
                actor=access.actor(request),
                name=form.cleaned_data["name"],
                scope=form.cleaned_data["scope"],
            )
            # Shown in this one response and never again: only its hash is stored.
            created = {"api_key": api_key, "raw_key": raw_key}
            form = ApiKeyCreateForm()
            status = 201
        else:
            status = INVALID
    context = {
        "form": form,
        "created": created,
        "keys": api_keys_of(workspace=access.workspace),
    }
    response = render_page(
        request,
        f"{template}#keys" if is_partial(request) else template,
        access,
        context,
        status=status,
    )
    if created:
        response["Cache-Control"] = "no-store"
    return response


@require_POST
@login_required
def api_key_revoke(request: HttpRequest, api_key_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_API_KEYS)
    api_key = get_api_key_for_user(access, api_key_id)
    api_key = tenancy_services.api_key_revoke(api_key=api_key, actor=access.actor(request))
    if not is_partial(request):
        return redirect("dashboard:api_keys")
    return render_page(request, "dashboard/api_keys.html#key_row", access, {"key": api_key})


# --- memory settings ----------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
def memory_settings(request: HttpRequest) -> HttpResponse:
    """Everyone in the workspace sees how much detail its memory keeps; an admin changes
    it, with a reason, through ``workspace_settings_update`` as the API does."""
    capability = Capability.MANAGE_SETTINGS if request.method == "POST" else Capability.VIEW_MEMORY
    access = access_for(request, capability)
    workspace = access.workspace
    form = MemorySettingsForm.of(workspace)
    status = 200
    if request.method == "POST":
        form = MemorySettingsForm(request.POST)
        status = INVALID
        if form.is_valid():
            before = workspace_settings_snapshot(workspace)
            try:
                workspace = workspace_settings_update(
                    workspace=workspace,
                    actor=access.actor(request),
                    fidelity=form.chosen_fidelity(),
                    **form.approval_changes(),
                    reason=form.cleaned_data["reason"],
                )
            except MemdeskError as error:
                add_service_error(form, error)
            else:
                after = workspace_settings_snapshot(workspace)
                if after == before:
                    messages.info(request, "Nothing changed.")
                elif after["fidelity"] != before["fidelity"]:
                    messages.success(
                        request,
                        f"Saved: the Observer's next runs use the {workspace.effective_fidelity} "
                        "level. Memory already written stays as it is.",
                    )
                else:
                    messages.success(
                        request,
                        f"Saved: staged approval is {workspace.approval} from the Reflector's "
                        "next run on.",
                    )
                if not is_partial(request):
                    return redirect("dashboard:memory_settings")
                form = MemorySettingsForm.of(workspace)
                status = 200
    template = "dashboard/memory_settings.html"
    context = {
        "form": form,
        "settings_workspace": workspace,
        "admin_roles": [role.label for role in roles_with(Capability.MANAGE_SETTINGS)],
    }
    return render_page(
        request,
        f"{template}#settings" if is_partial(request) else template,
        access,
        context,
        status=status,
    )
