"""Which workspace a dashboard request acts in, with which role, and the 403 that names
the role an action needs."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from core.actors import Actor
from dashboard.models import Capability, Role, role_can, roles_with
from dashboard.selectors import workspaces_for_user
from governance.models import AuditEvent
from memory.models import Workspace

SESSION_WORKSPACE = "dashboard_workspace_id"


class RoleRequired(PermissionDenied):
    """The user is in the workspace but their role lacks the capability."""

    def __init__(
        self,
        *,
        capability: Capability,
        workspace: Workspace,
        role: str,
        access: Access | None = None,
    ) -> None:
        self.access = access  # lets the 403 page keep the navigation and the switcher
        self.capability = capability
        self.workspace = workspace
        self.role = role
        self.required_roles = roles_with(capability)
        names = " or ".join(r.label for r in self.required_roles)
        super().__init__(f"To {capability.label} in {workspace.name} you need the {names} role.")


class NoWorkspace(PermissionDenied):
    """Signed in, but a member of no workspace yet."""


@dataclass(frozen=True)
class Access:
    """The signed-in user acting in one workspace with one role."""

    user: AbstractBaseUser
    workspace: Workspace
    role: str
    workspaces: tuple[tuple[Workspace, str], ...]  # every workspace they may switch to

    @property
    def role_label(self) -> str:
        return Role(self.role).label

    def can(self, capability: Capability | str) -> bool:
        return role_can(self.role, Capability(capability))

    def require(self, capability: Capability) -> None:
        if not self.can(capability):
            raise RoleRequired(
                capability=capability, workspace=self.workspace, role=self.role, access=self
            )

    # Template shortcuts: {% if access.can_edit %}.
    @property
    def can_edit(self) -> bool:
        return self.can(Capability.EDIT_MEMORY)

    @property
    def can_run(self) -> bool:
        return self.can(Capability.RUN_PIPELINE)

    @property
    def can_manage_keys(self) -> bool:
        return self.can(Capability.MANAGE_API_KEYS)

    @property
    def can_manage_compliance(self) -> bool:
        return self.can(Capability.MANAGE_COMPLIANCE)

    def actor(self, request: HttpRequest) -> Actor:
        """The audit identity of this request: the user, their role now, request and IP."""
        return Actor(
            type=AuditEvent.ActorType.USER,
            id=str(self.user.pk),
            role=self.role,
            request_id=request.headers.get("X-Request-Id", "")[:100] or uuid.uuid4().hex,
            ip_address=request.META.get("REMOTE_ADDR") or None,
        )


def _choices(request: HttpRequest) -> tuple[tuple[Workspace, str], ...]:
    # Read once per request: the object lookup and the role check both need it.
    choices = getattr(request, "_dashboard_workspaces", None)
    if choices is None:
        choices = tuple(workspaces_for_user(request.user))  # type: ignore[arg-type]
        request._dashboard_workspaces = choices  # type: ignore[attr-defined]
    if not choices:
        raise NoWorkspace(
            "You are signed in but have no role in any workspace yet: ask an admin to add you."
        )
    return choices


def access_for(
    request: HttpRequest, capability: Capability, *, workspace_id: uuid.UUID | None = None
) -> Access:
    """The request's workspace (``workspace_id`` when an object fixes it, else the one
    chosen in the switcher, else the first) and role; 403 without ``capability``.
    Opening another workspace's object the user belongs to switches to that workspace,
    so a shared link lands in the right place."""
    choices = _choices(request)
    by_id = {w.pk: (w, role) for w, role in choices}
    wanted = workspace_id
    if wanted is None:
        try:
            wanted = uuid.UUID(str(request.session.get(SESSION_WORKSPACE, "")))
        except ValueError:
            wanted = None
    workspace, role = by_id.get(wanted, choices[0]) if wanted else choices[0]
    if request.session.get(SESSION_WORKSPACE) != str(workspace.pk):
        request.session[SESSION_WORKSPACE] = str(workspace.pk)
    access = Access(user=request.user, workspace=workspace, role=role, workspaces=choices)  # type: ignore[arg-type]
    access.require(capability)
    return access


def workspace_ids(request: HttpRequest) -> list[uuid.UUID]:
    return [w.pk for w, _ in _choices(request)]


def switch_workspace(request: HttpRequest, workspace_id: str) -> Workspace | None:
    """Make ``workspace_id`` the session's workspace if the user may open it."""
    try:
        wanted = uuid.UUID(workspace_id)
    except ValueError:
        return None
    for workspace, _ in _choices(request):
        if workspace.pk == wanted:
            request.session[SESSION_WORKSPACE] = str(workspace.pk)
            return workspace
    return None
