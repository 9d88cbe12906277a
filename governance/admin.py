"""Moved to ``governance.audit.admin``; re-exported for ``memory/admin.py`` and
``dashboard/admin.py``. (Django's admin autodiscovery imports this module too: it
registers nothing.)"""

from __future__ import annotations

from governance.audit.admin import (
    AuditedAdmin,
    ReadOnlyAdmin,
    admin_actor,
)

__all__ = [
    "AuditedAdmin",
    "ReadOnlyAdmin",
    "admin_actor",
]
