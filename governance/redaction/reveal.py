"""What a pseudonym stands for: revealed to a person with the right and a reason
(``pseudonym_reveal``, audited), or put back in the texts served to API keys where the
policy lets agents see values (``Reidentifier``). The numbering and where values are
held are ``governance.redaction.pseudonyms``'s.

Nothing here logs a value: ids, labels and counts only.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import Q

from core.actors import Actor
from core.errors import MemdeskError
from governance.audit.writer import audit_record, require_reason
from governance.models import Pseudonym
from governance.redaction.labels import LABEL, label_meant
from governance.redaction.pseudonyms import decrypt, parse_label

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PseudonymReveal:
    pseudonym: Pseudonym
    value: str | None  # None once forgotten


def pseudonym_get(*, workspace_id: Any, label: str) -> Pseudonym:
    """The workspace's pseudonym that ``label`` means (``parse_label``); 404 if none."""
    own: set[str] = set()
    if label_meant(label or "") is None:
        # Perhaps a misspelt label of a type of the workspace's own (a custom recognizer's,
        # current or removed): the types it has numbered, read only for such a label.
        types = Pseudonym.objects.filter(workspace_id=workspace_id).values_list("entity_type")
        own = {t for (t,) in types.distinct()}
    entity_type, number = parse_label(label, own)
    row = Pseudonym.objects.filter(
        workspace_id=workspace_id, entity_type=entity_type, number=number
    ).first()
    if row is None:
        raise MemdeskError(
            "not_found",
            f"No pseudonym <{entity_type}_{number}> in this workspace.",
            status_code=404,
        )
    return row


def pseudonym_reveal(
    *, workspace_id: Any, label: str, actor: Actor, reason: str
) -> PseudonymReveal:
    """What a pseudonym stands for, for a person or key with reveal rights (the caller
    checks them). Needs a reason; every reveal is audited (``redaction.pseudonym.reveal``,
    the label as target, never the value) in the same transaction, before the value is
    returned. A forgotten pseudonym reveals nothing: ``value`` is None."""
    reason = require_reason(
        reason, message="A reason is required to reveal what a pseudonym stands for."
    )
    with transaction.atomic():
        row = pseudonym_get(workspace_id=workspace_id, label=label)
        value = None
        if row.is_held:
            value = decrypt(row.value_encrypted)
            if value is None:
                raise MemdeskError(
                    "pseudonym_unreadable",
                    f"{row.label} cannot be decrypted with the configured key: "
                    "MEMDESK_PSEUDONYM_KEY (or SECRET_KEY, which it defaults to) changed "
                    "since it was stored.",
                    status_code=409,
                )
        audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action="redaction.pseudonym.reveal",
            target_type="pseudonym",
            target_id=row.label,
            after={"entityType": row.entity_type, "held": row.is_held},
            reason=reason,
        )
    return PseudonymReveal(pseudonym=row, value=value)


class Reidentifier:
    """Puts back the values of a workspace's held pseudonyms in texts served to API keys
    when the policy allows it (``agents_see_reidentified``). Forgotten and unknown labels
    stay as written. ``cache_key`` changes whenever a pseudonym is forgotten, so cached
    re-identified renders never outlive a deletion."""

    def __init__(self, workspace_id: Any, *, forgotten: int) -> None:
        self.workspace_id = workspace_id
        self.cache_key = f"reid{forgotten}"
        self._values: dict[str, str | None] = {}

    @classmethod
    def for_workspace(cls, workspace_id: Any) -> Reidentifier:
        forgotten = Pseudonym.objects.filter(
            workspace_id=workspace_id, forgotten_at__isnull=False
        ).count()
        return cls(workspace_id, forgotten=forgotten)

    def prepare(self, texts: Iterable[str]) -> None:
        """Read and decrypt, in one query, the pseudonyms these texts name."""
        wanted: dict[str, set[int]] = defaultdict(set)
        for text in texts:
            if "<" not in text:
                continue
            for match in LABEL.finditer(text):
                if match.group(0) not in self._values:
                    wanted[match.group(1)].add(int(match.group(2)))
                    self._values[match.group(0)] = None
        if not wanted:
            return
        condition = Q()
        for entity_type, numbers in wanted.items():
            condition |= Q(entity_type=entity_type, number__in=sorted(numbers))
        rows = Pseudonym.objects.filter(
            condition, workspace_id=self.workspace_id, forgotten_at__isnull=True
        ).values_list("entity_type", "number", "value_encrypted")
        unreadable = 0
        for entity_type, number, token in rows:
            value = decrypt(token)
            unreadable += value is None
            self._values[f"<{entity_type}_{number}>"] = value
        if unreadable:
            logger.warning(
                "%s pseudonym(s) of workspace %s cannot be decrypted with the configured key",
                unreadable,
                self.workspace_id,
            )

    def text(self, text: str) -> str:
        if "<" not in text:
            return text
        self.prepare([text])
        return LABEL.sub(lambda m: self._values.get(m.group(0)) or m.group(0), text)
