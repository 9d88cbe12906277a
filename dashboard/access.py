"""Which workspace a dashboard request acts in, with which role, the 403 that names the
role an action needs, and one ``get_<thing>_for_user`` per object type: an id from
another workspace, or one that is not an id at all, is a 404 like a missing row."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from core.actors import Actor
from core.errors import MemdeskError
from core.paging import is_ascii_digits
from core.request_ids import request_id_of
from dashboard.selectors.conversations import conversation_get, conversation_get_with_flags
from dashboard.selectors.members import membership_get
from dashboard.selectors.messages import message_get
from dashboard.selectors.runs import run_get
from dashboard.selectors.settings import api_key_get
from dashboard.selectors.users import workspaces_for_user
from governance.models import (
    AuditEvent,
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RescanRun,
    RetentionPolicy,
    RetentionSweep,
)
from governance.selectors import (
    erasure_request_get,
    legal_hold_get,
    redaction_finding_get,
    rescan_run_get,
    retention_policy_get,
    retention_sweep_get,
)
from memory import selectors as memory_selectors
from memory.models import (
    Conversation,
    Escalation,
    Message,
    Observation,
    ObserverRun,
    Pin,
    Reflection,
    ReflectorRun,
)
from tenancy.models import ApiKey, Capability, Membership, Role, Workspace, role_can, roles_with

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
    def can_manage_members(self) -> bool:
        return self.can(Capability.MANAGE_MEMBERS)

    @property
    def can_review_findings(self) -> bool:
        return self.can(Capability.REVIEW_FINDINGS)

    @property
    def can_manage_settings(self) -> bool:
        return self.can(Capability.MANAGE_SETTINGS)

    @property
    def can_manage_compliance(self) -> bool:
        return self.can(Capability.MANAGE_COMPLIANCE)

    @property
    def can_reveal_pseudonyms(self) -> bool:
        return self.can(Capability.REVEAL_PSEUDONYMS)

    def can_reveal(self) -> bool:
        return self.can(Capability.REVEAL_PII)

    def actor(self, request: HttpRequest) -> Actor:
        """The audit identity of this request: the user, their role now, request and IP."""
        return Actor(
            type=AuditEvent.ActorType.USER,
            id=str(self.user.pk),
            role=self.role,
            request_id=request_id_of(request),
            ip_address=request.META.get("REMOTE_ADDR") or None,
        )


def _choices(request: HttpRequest) -> tuple[tuple[Workspace, str], ...]:
    # Read once per request: the object lookup and the role check both need it.
    choices = getattr(request, "_dashboard_workspaces", None)
    if choices is None:
        choices = tuple(workspaces_for_user(request.user))  # type: ignore[arg-type]  # login_required: a User
        request._dashboard_workspaces = choices  # type: ignore[attr-defined]  # per-request cache
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
    access = Access(user=request.user, workspace=workspace, role=role, workspaces=choices)  # type: ignore[arg-type]  # login_required: a User
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


# --- one object of the workspace ---------------------------------------------------------------
#
# The selectors raise MemdeskError for a row that is not there (and for a malformed id);
# each helper below turns that into the same 404, so an id from another workspace reads
# exactly like a missing one.

RowT = TypeVar("RowT")


def _or_404(read: Callable[[], RowT], message: str) -> RowT:
    try:
        return read()
    except MemdeskError:
        raise Http404(message) from None


def _uuid_or_404(raw_id: object, message: str) -> uuid.UUID:
    try:
        return raw_id if isinstance(raw_id, uuid.UUID) else uuid.UUID(str(raw_id))
    except ValueError:
        raise Http404(message) from None


def get_conversation_for_user(
    request: HttpRequest,
    conversation_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
    *,
    with_flags: bool = False,
) -> tuple[Access, Conversation]:
    """The conversation if it is in one of the user's workspaces (else 404), and the
    user's access in its workspace (403 without ``capability``). Unlike the helpers
    below it starts from the request, not an ``Access``: the conversation decides the
    workspace, so a shared link switches to it."""
    message = "No such conversation in your workspaces."
    wanted = _uuid_or_404(conversation_id, message)
    lookup = conversation_get_with_flags if with_flags else conversation_get
    conversation = _or_404(
        lambda: lookup(workspace_ids=workspace_ids(request), conversation_id=wanted), message
    )
    access = access_for(request, capability, workspace_id=conversation.workspace_id)
    return access, conversation


ItemT = TypeVar("ItemT", Observation, Reflection, Pin, Message, ObserverRun, ReflectorRun)


def _get_in_conversation(
    request: HttpRequest,
    conversation_id: object,
    capability: Capability,
    *,
    noun: str,
    lookup: Callable[[Conversation], ItemT],
) -> tuple[Access, Conversation, ItemT]:
    """An item of a conversation the user may open, found by ``lookup`` (else 404)."""
    access, conversation = get_conversation_for_user(request, conversation_id, capability)
    item = _or_404(lambda: lookup(conversation), f"No such {noun} in this conversation.")
    return access, conversation, item


def get_observation_for_user(
    request: HttpRequest,
    conversation_id: object,
    observation_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
) -> tuple[Access, Conversation, Observation]:
    return _get_in_conversation(
        request,
        conversation_id,
        capability,
        noun="observation",
        lookup=lambda c: memory_selectors.observation_get(
            conversation=c, observation_id=str(observation_id)
        ),
    )


def get_reflection_for_user(
    request: HttpRequest,
    conversation_id: object,
    reflection_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
) -> tuple[Access, Conversation, Reflection]:
    return _get_in_conversation(
        request,
        conversation_id,
        capability,
        noun="reflection",
        lookup=lambda c: memory_selectors.reflection_get(
            conversation=c, reflection_id=str(reflection_id)
        ),
    )


def get_pin_for_user(
    request: HttpRequest,
    conversation_id: object,
    pin_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
) -> tuple[Access, Conversation, Pin]:
    return _get_in_conversation(
        request,
        conversation_id,
        capability,
        noun="pin",
        lookup=lambda c: memory_selectors.pin_get(conversation=c, pin_id=str(pin_id)),
    )


def get_message_for_user(
    request: HttpRequest,
    conversation_id: object,
    message_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
) -> tuple[Access, Conversation, Message]:
    return _get_in_conversation(
        request,
        conversation_id,
        capability,
        noun="message",
        lookup=lambda c: message_get(
            conversation=c,
            message_id=_uuid_or_404(message_id, "No such message in this conversation."),
        ),
    )


def get_run_for_user(
    request: HttpRequest,
    conversation_id: object,
    kind: str,
    run_id: object,
    capability: Capability = Capability.VIEW_MEMORY,
) -> tuple[Access, Conversation, ObserverRun | ReflectorRun]:
    """An Observer (``kind`` "observer") or Reflector run of the conversation."""
    access, conversation = get_conversation_for_user(request, conversation_id, capability)
    message = "No such run in this conversation."
    wanted = _uuid_or_404(run_id, message)
    run = _or_404(lambda: run_get(conversation=conversation, kind=kind, run_id=wanted), message)
    return access, conversation, run


def get_api_key_for_user(access: Access, api_key_id: object) -> ApiKey:
    message = "No such API key in this workspace."
    raw = str(api_key_id)
    if not is_ascii_digits(raw):
        raise Http404(message)
    return _or_404(lambda: api_key_get(workspace=access.workspace, api_key_id=int(raw)), message)


def get_escalation_for_user(access: Access, escalation_id: object) -> Escalation:
    return _or_404(
        lambda: memory_selectors.escalation_get(
            workspace=access.workspace, escalation_id=escalation_id
        ),
        "No escalation with this id in this workspace.",
    )


def get_membership_for_user(access: Access, membership_id: object) -> Membership:
    message = "No such member in this workspace."
    raw = str(membership_id)
    if not is_ascii_digits(raw):
        raise Http404(message)
    return _or_404(
        lambda: membership_get(workspace=access.workspace, membership_id=int(raw)), message
    )


def get_finding_for_user(access: Access, finding_id: object) -> RedactionFinding:
    return _or_404(
        lambda: redaction_finding_get(workspace_id=access.workspace.pk, finding_id=finding_id),
        "No such redaction finding in this workspace.",
    )


def get_hold_for_user(access: Access, hold_id: object) -> LegalHold:
    return _or_404(
        lambda: legal_hold_get(workspace=access.workspace, hold_id=hold_id),
        "No such legal hold in this workspace.",
    )


def get_sweep_for_user(access: Access, sweep_id: object) -> RetentionSweep:
    return _or_404(
        lambda: retention_sweep_get(workspace=access.workspace, sweep_id=sweep_id),
        "No such retention sweep in this workspace.",
    )


def get_erasure_request_for_user(access: Access, request_id: object) -> ErasureRequest:
    return _or_404(
        lambda: erasure_request_get(workspace=access.workspace, request_id=request_id),
        "No such erasure request in this workspace.",
    )


def get_rescan_for_user(access: Access, run_id: object) -> RescanRun:
    return _or_404(
        lambda: rescan_run_get(workspace=access.workspace, run_id=run_id),
        "No such re-scan in this workspace.",
    )


def get_retention_policy_for_user(access: Access, policy_id: object) -> RetentionPolicy:
    return _or_404(
        lambda: retention_policy_get(workspace=access.workspace, policy_id=policy_id),
        "No such retention policy in this workspace.",
    )
