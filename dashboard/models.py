"""Roles, capabilities and memberships moved to ``tenancy.models``; re-exported here while
importers move. The dashboard keeps no models of its own (its migrations stay: they
created ``dashboard_membership``, which tenancy's Membership still uses)."""

from __future__ import annotations

from tenancy.models import (
    CAPABILITY_LABELS,
    ROLE_CAPABILITIES,
    Capability,
    Membership,
    Role,
    role_can,
    roles_with,
)

__all__ = [
    "CAPABILITY_LABELS",
    "ROLE_CAPABILITIES",
    "Capability",
    "Membership",
    "Role",
    "role_can",
    "roles_with",
]
