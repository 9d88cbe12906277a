"""Who may do what in the dashboard: a role per user and workspace, and the one table
that turns roles into capabilities."""

from __future__ import annotations

from enum import StrEnum

from django.conf import settings
from django.db import models
from django.utils import timezone


class Role(models.TextChoices):
    VIEWER = "viewer", "viewer"
    REVIEWER = "reviewer", "reviewer"
    COMPLIANCE = "compliance", "compliance officer"
    ADMIN = "admin", "admin"


class Capability(StrEnum):
    VIEW_MEMORY = "view_memory"
    EDIT_MEMORY = "edit_memory"
    RUN_PIPELINE = "run_pipeline"
    MANAGE_COMPLIANCE = "manage_compliance"
    # Originals kept before redaction: the design gives them to the compliance role only.
    VIEW_RESTRICTED = "view_restricted"
    # What a pseudonym (<PERSON_2>) stands for: the issue gives it to compliance and admin.
    REVEAL_PSEUDONYMS = "reveal_pseudonyms"
    # Values the scan found in messages, masked for everyone else: compliance and admin.
    REVEAL_PII = "reveal_pii"
    MANAGE_API_KEYS = "manage_api_keys"
    MANAGE_SETTINGS = "manage_settings"
    # Who may do what: granting, changing and taking away roles.
    MANAGE_MEMBERS = "manage_members"
    # Approving or dismissing what the redaction scan was unsure of.
    REVIEW_FINDINGS = "review_findings"

    @property
    def label(self) -> str:
        return CAPABILITY_LABELS[self]


CAPABILITY_LABELS = {
    Capability.VIEW_MEMORY: "view conversations and memory",
    Capability.EDIT_MEMORY: "edit memory",
    Capability.RUN_PIPELINE: "run the Observer or the Reflector",
    Capability.MANAGE_COMPLIANCE: "manage policies, holds and erasure",
    Capability.VIEW_RESTRICTED: "read restricted originals",
    Capability.REVEAL_PSEUDONYMS: "reveal what a pseudonym stands for",
    Capability.REVEAL_PII: "reveal personal data in messages",
    Capability.MANAGE_API_KEYS: "manage API keys",
    Capability.MANAGE_SETTINGS: "change memory settings",
    Capability.MANAGE_MEMBERS: "give people roles",
    Capability.REVIEW_FINDINGS: "work the redaction review queue",
}

# The only place roles become permissions. Views ask for a capability, never a role.
ROLE_CAPABILITIES: dict[str, frozenset[Capability]] = {
    Role.VIEWER: frozenset({Capability.VIEW_MEMORY}),
    Role.REVIEWER: frozenset(
        {
            Capability.VIEW_MEMORY,
            Capability.EDIT_MEMORY,
            Capability.RUN_PIPELINE,
            Capability.REVIEW_FINDINGS,
        }
    ),
    Role.COMPLIANCE: frozenset(
        {
            Capability.VIEW_MEMORY,
            Capability.EDIT_MEMORY,
            Capability.RUN_PIPELINE,
            Capability.MANAGE_COMPLIANCE,
            Capability.REVIEW_FINDINGS,
            Capability.VIEW_RESTRICTED,
            Capability.REVEAL_PSEUDONYMS,
            Capability.REVEAL_PII,
        }
    ),
    Role.ADMIN: frozenset(
        {
            Capability.VIEW_MEMORY,
            Capability.EDIT_MEMORY,
            Capability.RUN_PIPELINE,
            Capability.MANAGE_COMPLIANCE,
            Capability.REVIEW_FINDINGS,
            Capability.REVEAL_PSEUDONYMS,
            Capability.REVEAL_PII,
            Capability.MANAGE_API_KEYS,
            Capability.MANAGE_SETTINGS,
            Capability.MANAGE_MEMBERS,
        }
    ),
}


def role_can(role: str, capability: Capability) -> bool:
    return capability in ROLE_CAPABILITIES.get(role, frozenset())


def roles_with(capability: Capability) -> list[Role]:
    """The roles that hold a capability, least powerful first (for "needs the ... role")."""
    return [role for role in Role if capability in ROLE_CAPABILITIES[role]]


class Membership(models.Model):
    """A user's role in one workspace. Superusers need none: they see every workspace
    with admin rights."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    workspace = models.ForeignKey(
        "memory.Workspace", on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="membership_user_workspace")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} is {self.role} in {self.workspace_id}"

    def can(self, capability: Capability) -> bool:
        return role_can(self.role, capability)
