"""Members: who has which role in the workspace, given and taken by its admins, each
change with a reason and audited (tenancy/services.py)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import MemdeskError
from dashboard.access import Access, access_for, get_membership_for_user
from dashboard.forms import MemberAddForm, MemberRoleForm, ReasonForm, add_service_error
from dashboard.rendering import INVALID, is_partial, render_page
from dashboard.selectors.members import membership_list
from tenancy.models import Capability, Role
from tenancy.services import member_add, membership_revoke, membership_role_change

TEMPLATE = "dashboard/members.html"


def _page(request: HttpRequest, access: Access, status: int = 200, **context: Any) -> HttpResponse:
    context.setdefault("form", MemberAddForm())
    failed_role = context.pop("failed_role", None)
    failed_remove = context.pop("failed_remove", None)
    members = membership_list(workspace=access.workspace)
    for member in members:  # each row's two forms; the one that failed keeps its errors
        member.role_form = (  # type: ignore[attr-defined]
            failed_role[1]
            if failed_role and failed_role[0] == member.pk
            else MemberRoleForm(initial={"role": member.role}, prefix=f"m{member.pk}")
        )
        member.remove_form = (  # type: ignore[attr-defined]
            failed_remove[1]
            if failed_remove and failed_remove[0] == member.pk
            else ReasonForm(prefix=f"r{member.pk}")
        )
    context["members"] = members
    context["admins"] = sum(1 for member in members if member.role == Role.ADMIN)
    name = f"{TEMPLATE}#members" if is_partial(request) else TEMPLATE
    response = render_page(request, name, access, context, status=status)
    if (context.get("added") or {}).get("password"):
        response["Cache-Control"] = "no-store"  # a one-time password is on it
    return response


@require_http_methods(["GET", "POST"])
@login_required
def members(request: HttpRequest) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_MEMBERS)
    if request.method == "GET":
        return _page(request, access)
    form = MemberAddForm(request.POST)
    if not form.is_valid():
        return _page(request, access, INVALID, form=form)
    try:
        membership, created, password = member_add(
            workspace=access.workspace,
            username=form.cleaned_data["username"],
            role=form.cleaned_data["role"],
            actor=access.actor(request),
            reason=form.cleaned_data["reason"],
        )
    except MemdeskError as error:
        add_service_error(form, error)
        return _page(request, access, INVALID, form=form)
    added = {"membership": membership, "created": created, "password": password}
    return _page(request, access, 201 if created else 200, added=added)


@require_POST
@login_required
def member_role(request: HttpRequest, membership_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_MEMBERS)
    membership = get_membership_for_user(access, membership_id)
    form = MemberRoleForm(request.POST, prefix=f"m{membership.pk}")
    if form.is_valid():
        try:
            membership_role_change(
                membership=membership,
                role=form.cleaned_data["role"],
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error)
    if form.errors:
        return _page(request, access, INVALID, failed_role=(membership.pk, form))
    if not is_partial(request):
        return redirect("dashboard:members")
    return _page(request, access, changed=membership.pk)


@require_POST
@login_required
def member_remove(request: HttpRequest, membership_id: int) -> HttpResponse:
    access = access_for(request, Capability.MANAGE_MEMBERS)
    membership = get_membership_for_user(access, membership_id)
    form = ReasonForm(request.POST, prefix=f"r{membership.pk}")
    if form.is_valid():
        try:
            membership_revoke(
                membership=membership,
                actor=access.actor(request),
                reason=form.cleaned_data["reason"],
            )
        except MemdeskError as error:
            add_service_error(form, error, renames={"role": "reason"})
    if form.errors:
        return _page(request, access, INVALID, failed_remove=(membership.pk, form))
    if not is_partial(request):
        return redirect("dashboard:members")
    return _page(request, access, removed=membership.user.get_username())
