"""What the dashboard shows of escalations: the agent's reason and the reviewer's note
are free text that may hold personal data, masked for display as reasoning is."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from governance.redaction.gates import texts_masked_for_display
from memory.models import Escalation


def escalations_masked(escalations: Sequence[Escalation], *, workspace_id: uuid.UUID) -> None:
    """Give each escalation ``shown_reason`` and ``shown_note``: its reason and its
    resolution note with each value the workspace's policy finds masked as its entity
    type (``<PHONE_NUMBER>``), in one pass for the whole list. The stored texts are left
    as the agent and the reviewer wrote them."""
    texts = [text for e in escalations for text in (e.reason, e.resolution_note)]
    masked = iter(texts_masked_for_display(workspace_id=workspace_id, texts=texts))
    for escalation in escalations:
        escalation.shown_reason = next(masked)  # type: ignore[attr-defined]  # for the template
        escalation.shown_note = next(masked)  # type: ignore[attr-defined]  # for the template
