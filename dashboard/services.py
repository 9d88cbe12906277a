"""Role grants moved to ``tenancy.services``; re-exported here while importers move."""

from __future__ import annotations

from tenancy.services import (
    REASON_REQUIRED,
    member_add,
    membership_grant,
    membership_revoke,
    membership_role_change,
    membership_snapshot,
)

__all__ = [
    "REASON_REQUIRED",
    "member_add",
    "membership_grant",
    "membership_revoke",
    "membership_role_change",
    "membership_snapshot",
]
