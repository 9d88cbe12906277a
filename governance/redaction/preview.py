"""The redaction preview: what a workspace's policy finds in a text and what the
Reflector would read of it. Nothing is stored and nothing is numbered.

Two forms, by who asks:

- ``redaction_preview``, for any API key: the findings (entity type, offsets in the text
  sent, score, operator, status, recognizer) and the text with each value the pseudonym
  operator would replace written as its type (``<EMAIL_ADDRESS>``), as the replace
  operator writes it. It reads nothing of the workspace's pseudonym mapping: no label,
  no "known" or "new", and no finding that only the mapping accounts for (a name the
  workspace holds, found where it recurs). Its answer to a guessed value is the answer
  of a workspace that never met the value, so it tells no one which pseudonym a value
  has, nor whether the workspace knows it.
- ``redaction_preview_labelled``, for those who may reveal a pseudonym (compliance keys
  and above; the compliance officer and the admin in the dashboard): the pseudonym each
  value has, or the number a new one would get, looked up as a redaction looks it up.
  Telling which pseudonym a value has re-identifies it, so each such preview that names
  a pseudonym is audited (``redaction.preview``: counts and entity types, never the
  text, a value or a label).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from core.actors import Actor
from governance.audit.writer import audit_record
from governance.models import RedactionPolicy
from governance.redaction import presidio
from governance.redaction.pseudonyms import WorkspacePseudonyms
from governance.selectors import redaction_policy_or_defaults


@dataclass(frozen=True)
class RedactionPreview:
    text: str  # what the Reflector would read: every finding redacted
    findings: list[presidio.Finding]
    policy_version: int
    # Whether the findings and the text name pseudonyms (a labelled preview) or only
    # types (the preview any key gets).
    labelled: bool = False
    # Labelled only: the pseudonyms the text would number for the first time, in the
    # order they would be given. None in a typed preview, which does not know.
    new_pseudonyms: list[str] | None = None


class _Typed:
    """The ``Pseudonymiser`` of a typed preview: each value is written as its type. It
    numbers nothing and reads nothing."""

    def label(self, entity_type: str, value: str) -> str:
        return f"<{entity_type}>"

    def people(self, names: Iterable[str], *, speakers: bool = False) -> None:
        return None


def _preview(
    *,
    workspace_id: uuid.UUID,
    text: str,
    policy: RedactionPolicy | None,
    pseudonyms: WorkspacePseudonyms | None,
) -> RedactionPreview:
    if policy is None:
        policy = redaction_policy_or_defaults(workspace_id=workspace_id)
    spec = presidio.PolicySpec.of(policy)
    [detections] = presidio.engine().detect([text], spec=spec, known=pseudonyms)
    redacted = presidio.redact_text(text, detections, spec=spec, pseudonyms=pseudonyms or _Typed())
    findings = [
        presidio.Finding(
            entity_type=d.entity_type,
            start=d.start,
            end=d.end,
            score=round(d.score, 4),
            recognizer=d.recognizer,
            operator=d.operator,
            status=d.status,
            pseudonym=(
                pseudonyms.label(d.entity_type, text[d.start : d.end])
                if pseudonyms is not None and d.operator == presidio.PSEUDONYM
                else ""
            ),
        )
        for d in detections
    ]
    new = None
    if pseudonyms is not None:
        new = list(
            dict.fromkeys(f.pseudonym for f in findings if f.pseudonym in pseudonyms.new_labels)
        )
    return RedactionPreview(
        text=redacted.engine_text,
        findings=findings,
        policy_version=policy.version,
        labelled=pseudonyms is not None,
        new_pseudonyms=new,
    )


def redaction_preview(
    *, workspace_id: uuid.UUID, text: str, policy: RedactionPolicy | None = None
) -> RedactionPreview:
    """What the workspace's policy finds in ``text`` and what the Reflector would read of
    it, each pseudonymised value written as its type; the pseudonym mapping is not read
    (see the module docstring). Offsets refer to ``text`` as given. ``policy`` is an
    unsaved draft to preview instead of the stored one (``redaction_policy_draft``)."""
    return _preview(workspace_id=workspace_id, text=text, policy=policy, pseudonyms=None)


def redaction_preview_labelled(
    *, workspace_id: uuid.UUID, text: str, actor: Actor, policy: RedactionPolicy | None = None
) -> RedactionPreview:
    """``redaction_preview`` with the pseudonyms it would write: the stored ones of the
    values the workspace knows (found again where they recur, as a redaction finds
    them), the next free numbers for new ones. For a caller who may reveal pseudonyms
    (the caller checks). A preview that names a pseudonym is audited before it is
    returned (``redaction.preview``, against the workspace: how many findings of which
    types, how many known and new pseudonyms, the policy version, whether a draft)."""
    pseudonyms = WorkspacePseudonyms(workspace_id, allocate=False)
    preview = _preview(workspace_id=workspace_id, text=text, policy=policy, pseudonyms=pseudonyms)
    named = {f.pseudonym for f in preview.findings if f.pseudonym}
    if named:
        new = set(preview.new_pseudonyms or ())
        entities = Counter(f.entity_type for f in preview.findings)
        audit_record(
            workspace_id=workspace_id,
            actor=actor,
            action="redaction.preview",
            target_type="workspace",
            target_id=str(workspace_id),
            after={
                "findings": len(preview.findings),
                "entities": dict(sorted(entities.items())),
                "knownPseudonyms": len(named - new),
                "newPseudonyms": len(new),
                "policyVersion": preview.policy_version,
                "draft": policy is not None,
            },
        )
    return preview
