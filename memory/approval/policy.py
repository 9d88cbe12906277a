"""Which approval modes hold a conversation's new reflections: the workspace's, and those
of the conversation's tags (``Workspace.approval``, ``approval_by_tag``)."""

from __future__ import annotations

from memory.models import Conversation

REFLECTIONS = "reflections"  # every new reflection waits
FLAGGED = "flagged"  # a reflection the checks flag waits (memory/approval/flags.py)


def approval_modes(conversation: Conversation) -> frozenset[str]:
    """The modes in force for ``conversation``: a tag's mode adds to the workspace's, so a
    tag can hold more back, never less. Empty: nothing waits."""
    workspace = conversation.workspace
    by_tag = workspace.approval_by_tag or {}
    modes = {workspace.approval, *(by_tag[t] for t in conversation.tags if t in by_tag)}
    return frozenset(modes - {"off"})
