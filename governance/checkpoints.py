"""Moved to ``governance.audit.checkpoints``. ``MEMDESK_AUDIT_CHECKPOINT_SINK`` names a
sink by dotted path and a deployment may have set it to
``governance.checkpoints.FileCheckpointSink``: that name is re-exported here."""

from __future__ import annotations

from governance.audit.checkpoints import (
    FileCheckpointSink,
)

__all__ = [
    "FileCheckpointSink",
]
