"""What the agent saw: a read of the ledger, its body rendered again from the manifest
of its memory version and the notes' histories (memory/context/rebuild.py), checked
against the digest the ledger recorded, and what memory serves differently since."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date, timedelta

from dashboard.selectors.context import (
    RecordingReidentifier,
    chat_masked,
    mask_values,
    masked_values_of,
)
from dashboard.selectors.users import actor_labels
from governance.models import ContextRead
from governance.redaction.gates import reidentifier_for_api
from governance.selectors import context_manifest_of
from memory.context.caches import RENDER_VERSION
from memory.context.rebuild import (
    Changes,
    Correction,
    Manifest,
    Rebuilt,
    changes_since,
    context_rebuilt,
)
from memory.context.recalled import recalled_reserve
from memory.models import Conversation

# A read served in the first minute of a day may have been rendered in the last of the
# day before (the day is read when the render starts, the time when it is recorded).
_MIDNIGHT_SLACK = timedelta(minutes=1)


@dataclass(frozen=True)
class SeenAgain:
    """A ledger row's body rendered again, as a person may read it."""

    read: ContextRead
    # None: the memory version's manifest was not noted (lost with a worker's crash, or a
    # read older than manifests), so nothing can be rendered.
    rebuilt: Rebuilt | None
    # The rebuilt body equals what was served, byte for byte (its SHA-256 is the
    # ledger's); with a query, the body before its recalled section.
    matches: bool
    shown: str  # the body, masked as the conversation page masks, JSON indented
    masked_values: int
    why_not: tuple[str, ...]  # why it does not match, in words, when it does not
    changes: Changes | None
    # Each correction since, with who made it as people know them (a username).
    corrections: tuple[tuple[Correction, str], ...] = ()


def _days(read: ContextRead) -> list[date]:
    served = read.served_at
    days = [served.date()]
    if served - _MIDNIGHT_SLACK < served.replace(hour=0, minute=0, second=0, microsecond=0):
        days.append(days[0] - timedelta(days=1))
    return days


def _shown(body: bytes, fmt: str, replacements: list[tuple[str, str]]) -> str:
    if fmt == "text":
        return mask_values(body.decode(), replacements)
    payload = json.loads(body)
    if fmt == "messages":
        payload["messages"] = chat_masked(payload["messages"], replacements)
        return json.dumps(payload, ensure_ascii=False, indent=2)
    return mask_values(json.dumps(payload, ensure_ascii=False, indent=2), replacements)


def seen_again(*, conversation: Conversation, read: ContextRead) -> SeenAgain:
    """``read``'s body rendered again and checked against its digest."""
    data = context_manifest_of(read=read)
    if data is None:
        return SeenAgain(
            read,
            None,
            matches=False,
            shown="",
            masked_values=0,
            why_not=(
                "What memory served at this version was not recorded (a worker stopped "
                "before writing it), so the body cannot be rendered again.",
            ),
            changes=None,
        )
    manifest = Manifest.from_json(data)
    reidentifier = (
        reidentifier_for_api(workspace_id=conversation.workspace_id, allowed=True)
        if read.reidentified
        else None
    )
    recorder = RecordingReidentifier(reidentifier) if reidentifier is not None else None
    max_tokens = read.max_tokens
    expected = read.body_sha256
    if read.query_digest:
        max_tokens = None if max_tokens is None else max_tokens - recalled_reserve(max_tokens)
        expected = read.base_sha256
    rebuilt: Rebuilt | None = None
    for day in _days(read):
        rebuilt = context_rebuilt(
            conversation,
            manifest,
            fmt=read.format,
            max_tokens=max_tokens,
            last_seq=read.last_seq,
            today=day,
            reidentifier=recorder,
        )
        if rebuilt.rendered.digest == expected:
            break
    assert rebuilt is not None
    matches = rebuilt.rendered.digest == expected
    why_not: list[str] = []
    if not matches:
        why_not.extend(rebuilt.gaps)
        if read.render_version != RENDER_VERSION:
            why_not.append(
                f"It was served in an earlier shape of the context (version "
                f"{read.render_version}); it is rendered here in today's ({RENDER_VERSION})."
            )
        if not why_not:
            why_not.append(
                "A text it was rendered from was changed without a new version since "
                "(a redaction of stored text, or a pseudonym forgotten)."
            )
    replacements = masked_values_of(
        workspace_id=conversation.workspace_id,
        message_ids=rebuilt.message_ids,
        recorder=recorder,
    )
    changes = changes_since(
        conversation, manifest, served_at=read.served_at, last_seq=read.last_seq
    )
    names = actor_labels({c.changed_by for c in changes.corrections})
    return SeenAgain(
        read,
        rebuilt,
        matches=matches,
        shown=_shown(rebuilt.rendered.body, read.format, replacements),
        masked_values=len(replacements),
        why_not=tuple(why_not),
        changes=changes,
        corrections=tuple((c, names.get(c.changed_by, c.changed_by)) for c in changes.corrections),
    )
