"""Who is who: workspaces (the tenants), the API keys agents use, and people's roles in
each workspace with the one table that turns roles into capabilities.

The tables keep the names they had in the apps these models came from (``memory_*``,
``dashboard_membership``): the move changed where the code lives, not the schema."""

from __future__ import annotations

import hashlib
import uuid
from enum import StrEnum

from django.conf import settings
from django.db import models
from django.utils import timezone

from memory.engines.base import FIDELITIES

# A new workspace's context budget, in tokens: room for the memory the pipeline keeps in
# steady state (reflections, observations, the newest raw messages) in the windows of
# current models, with the agent's own prompt and answer beside it.
DEFAULT_CONTEXT_MAX_TOKENS = 32_000


# What staged approval holds back (Workspace.approval): nothing, every new reflection, or
# the reflections memory/approval/flags.py flags.
APPROVAL_MODES = ("off", "reflections", "flagged")


class Workspace(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.SlugField(max_length=100, unique=True)
    observer_threshold = models.PositiveIntegerField(null=True, blank=True)
    reflector_threshold = models.PositiveIntegerField(null=True, blank=True)
    # How much detail the Observer keeps (memory.engines.base.FIDELITIES); blank means
    # MEMDESK_OBSERVER_FIDELITY.
    fidelity = models.CharField(
        max_length=20, blank=True, default="", choices=[(f, f) for f in FIDELITIES]
    )
    # Engine choice and LLM endpoint per workspace; blank means "use the settings".
    engine = models.CharField(max_length=20, blank=True, default="")
    llm_base_url = models.URLField(blank=True, default="")
    llm_model = models.CharField(max_length=200, blank=True, default="")
    llm_api_key = models.CharField(max_length=500, blank=True, default="")
    # The token budget of a served context when a request names none; null: no budget.
    # New workspaces start with DEFAULT_CONTEXT_MAX_TOKENS: without one a context grew to
    # megabytes when the pipeline fell behind, in every prompt and every read.
    context_max_tokens = models.PositiveIntegerField(
        null=True, blank=True, default=DEFAULT_CONTEXT_MAX_TOKENS
    )
    # Staged approval (memory/approval/): which new notes wait for a person before agents
    # are served them: "off", "reflections" (every new reflection), "flagged" (a
    # reflection the checks flag); per conversation tag as well (a tag's mode adds to
    # the workspace's).
    approval = models.CharField(
        max_length=12, default="off", choices=[(m, m) for m in APPROVAL_MODES]
    )
    approval_by_tag = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "memory_workspace"

    def __str__(self) -> str:
        return self.name

    @property
    def effective_engine(self) -> str:
        return self.engine or settings.MEMDESK_ENGINE

    @property
    def effective_observer_threshold(self) -> int:
        return self.observer_threshold or settings.MEMDESK_OBSERVER_THRESHOLD

    @property
    def effective_fidelity(self) -> str:
        return self.fidelity or settings.MEMDESK_OBSERVER_FIDELITY

    @property
    def effective_reflector_threshold(self) -> int:
        return self.reflector_threshold or settings.MEMDESK_REFLECTOR_THRESHOLD


class ApiKey(models.Model):
    """An agent's credential. Only a SHA-256 of the raw key is stored.

    The raw key is 256 bits of randomness, so a fast hash is enough: there is nothing
    to brute-force that a slow password hash would protect.
    """

    class Scope(models.TextChoices):
        # In order of rights: each scope may do everything the ones before it may.
        AGENT = "agent", "agent"
        CURATOR = "curator", "curator"
        COMPLIANCE = "compliance", "compliance"
        ADMIN = "admin", "admin"

    PREFIX_LENGTH = 11  # "md_" + 8 characters, shown in lists to tell keys apart

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=PREFIX_LENGTH)
    key_hash = models.CharField(max_length=64, unique=True)
    scope = models.CharField(max_length=10, choices=Scope.choices, default=Scope.AGENT)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "memory_apikey"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.workspace.name})"

    @staticmethod
    def hash_raw_key(raw_key: str) -> str:
        return hashlib.sha256(raw_key.encode()).hexdigest()

    @staticmethod
    def cache_key_of(key_hash: str) -> str:
        """Where authentication keeps the key for a few seconds (``tenancy.auth``)."""
        return f"memdesk:apikey:{key_hash}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    def grants(self, scope: str) -> bool:
        """Whether this key may do what ``scope`` may: scopes are ordered, each one
        including the rights of those before it."""
        order = list(ApiKey.Scope.values)
        return order.index(self.scope) >= order.index(scope)

    # DRF's IsAuthenticated asks the request's principal; for the agent API it is the key.
    is_authenticated = True


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
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "dashboard_membership"
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="membership_user_workspace")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} is {self.role} in {self.workspace_id}"

    def can(self, capability: Capability) -> bool:
        return role_can(self.role, capability)
