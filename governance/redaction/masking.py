"""Personal data in messages, masked for people: what a page shows of a message or a
pin (its text split around the values the scan found, each value as its type unless
revealed), and the transcript's rows masked the same way. The agent API is not masked
here; what agents are served is redacted by the gates."""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from governance.models import MessageScan, RedactionFinding, RedactionPolicy
from governance.redaction.presidio import PolicySpec
from governance.redaction.scan import MASKED_STATUSES, content_digest
from governance.redaction.speakers import people_of, speaker_masked
from memory.models import Conversation, Message, Pin


@dataclass(frozen=True)
class TextPart:
    """A stretch of a message as a page shows it: plain text, or the value of one or
    more overlapping findings (``entity_type`` set), masked unless revealed."""

    text: str
    entity_type: str = ""
    finding_ids: str = ""  # comma-separated: what the part's reveal button asks for
    revealed: bool = False

    @property
    def masked(self) -> bool:
        return bool(self.entity_type) and not self.revealed

    @property
    def label(self) -> str:
        # The type of value, not a part of it: the last digits of a card number or the
        # domain of an address still say whose they are.
        return f"<{self.entity_type}>"


Span = tuple[int, int, str, int]  # start, end, entity type, finding id


def mask_parts(text: str, spans: Sequence[Span], revealed: Collection[int] = ()) -> list[TextPart]:
    """``text`` split around ``spans``; overlapping spans are one part covering all of
    them (shown only when every one of them is revealed). Spans outside the text are
    ignored."""
    inside = sorted(
        (span for span in spans if 0 <= span[0] < span[1] <= len(text)),
        key=lambda span: (span[0], -span[1]),
    )
    groups: list[list[Span]] = []
    for span in inside:
        if groups and span[0] < max(member[1] for member in groups[-1]):
            groups[-1].append(span)
        else:
            groups.append([span])
    parts: list[TextPart] = []
    cursor = 0
    for group in groups:
        start, end = group[0][0], max(member[1] for member in group)
        if start > cursor:
            parts.append(TextPart(text[cursor:start]))
        ids = [member[3] for member in group]
        parts.append(
            TextPart(
                text[start:end],
                entity_type="/".join(dict.fromkeys(member[2] for member in group)),
                finding_ids=",".join(str(i) for i in ids),
                revealed=all(i in revealed for i in ids),
            )
        )
        cursor = end
    if cursor < len(text) or not parts:
        parts.append(TextPart(text[cursor:]))
    return parts


def masked_text(parts: Sequence[TextPart]) -> str:
    return "".join(part.label if part.masked else part.text for part in parts)


def masked_spans(message_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, list[Span]]:
    """The findings whose values are still in these messages' texts, by message."""
    spans: dict[uuid.UUID, list[Span]] = defaultdict(list)
    rows = (
        RedactionFinding.objects.filter(
            target_type=RedactionFinding.TargetType.MESSAGE,
            target_id__in=message_ids,
            status__in=MASKED_STATUSES,
        )
        .exclude(operator="keep")
        .values_list("target_id", "start", "end", "entity_type", "pk")
    )
    for message_id, start, end, entity_type, pk in rows:
        spans[message_id].append((start, end, entity_type, pk))
    return spans


def _scanned_digests(message_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, str]:
    return dict(
        MessageScan.objects.filter(message_id__in=message_ids).values_list(
            "message_id", "content_digest"
        )
    )


def mask_messages(
    *, messages: Sequence[Message], workspace_id: uuid.UUID, revealed: Collection[int] = ()
) -> None:
    """Give each message what the page shows of it: ``masked_name`` (its speaker's name,
    each person in it masked), ``parts`` (its text split around
    the values of its findings, masked unless their id is in ``revealed``),
    ``masked_text`` (the text with each value as ``<ENTITY_TYPE>``) and ``scan_pending``
    (no scan has read its current content yet, so nothing in it is masked). Two queries
    for the whole list, and one for the workspace's policy when a message has a name."""
    ids = [m.pk for m in messages]
    spans = masked_spans(ids)
    digests = _scanned_digests(ids)
    speaker = _speakers_masked(workspace_id)
    for message in messages:
        message.masked_name = speaker(message.name)  # type: ignore[attr-defined]  # for the template
        parts = mask_parts(message.content, spans.get(message.pk, []), revealed)
        message.parts = parts  # type: ignore[attr-defined]  # for the template
        message.masked_text = masked_text(parts)  # type: ignore[attr-defined]  # for the template
        message.has_masked = any(part.masked for part in parts)  # type: ignore[attr-defined]  # for the template
        message.scan_pending = digests.get(message.pk) != content_digest(message.content)  # type: ignore[attr-defined]  # for the template


def mask_pins(*, pins: Sequence[Pin]) -> None:
    """Give each pin ``parts`` and ``masked_text`` as ``mask_messages`` does, from its
    message's findings. A quote that is not the stretch of its message it says it is
    (it should always be) is masked whole."""
    spans = masked_spans({pin.message_id for pin in pins})
    contents = dict(
        Message.objects.filter(pk__in={pin.message_id for pin in pins}).values_list("pk", "content")
    )
    for pin in pins:
        content = contents.get(pin.message_id, "")
        start = 0 if pin.start is None else pin.start
        end = len(content) if pin.end is None else pin.end
        if content[start:end] == pin.text:
            inside = [
                (max(s, start) - start, min(e, end) - start, entity, pk)
                for s, e, entity, pk in spans.get(pin.message_id, [])
                if s < end and start < e
            ]
            parts = mask_parts(pin.text, inside)
        else:
            parts = [TextPart(pin.text, entity_type="QUOTE", finding_ids="")]
        pin.parts = parts  # type: ignore[attr-defined]  # for the template
        pin.masked_text = masked_text(parts)  # type: ignore[attr-defined]  # for the template


# seq, role, the speaker's name ("" when unnamed), created_at, tool_name, masked content,
# scan pending.
TranscriptRow = tuple[int, str, str, datetime, str, str, bool]


def _speakers_masked(workspace_id: uuid.UUID) -> Callable[[str], str]:
    """A speaker's name as the workspace's pages show it (``speakers.speaker_masked``),
    each name worked out once; the policy is read at the first name (most conversations
    have none), and only read: a workspace without one has the defaults."""
    spec: PolicySpec | None = None
    shown: dict[str, str] = {"": ""}

    def masked(name: str) -> str:
        nonlocal spec
        if name not in shown:
            if spec is None:
                policy = RedactionPolicy.objects.filter(workspace_id=workspace_id).first()
                spec = PolicySpec.of(policy or RedactionPolicy(workspace_id=workspace_id))
            shown[name] = speaker_masked(name, spec=spec)
        return shown[name]

    return masked


def speaker_people_masked(*, workspace_id: uuid.UUID, names: Iterable[str]) -> dict[str, str]:
    """Each person in these speakers' names that a page masks, and its mask (``"Maria
    Lopez" -> "<PERSON>"``): for a page that shows a text in which the names are written
    (the served context's ``[Maria Lopez (user)]``)."""
    masked = _speakers_masked(workspace_id)
    return {person: shown for person in people_of(names) if (shown := masked(person)) != person}


def transcript_rows(
    *, conversation: Conversation, chunk_size: int = 2000
) -> Iterator[TranscriptRow]:
    """Every message as plain tuples, oldest first, its content masked as
    ``mask_messages`` masks it, and its speaker's name as well, with ``scan_pending``
    last. Streamed from the database in chunks (a server-side cursor on PostgreSQL),
    each chunk's findings read in one query: the urgent-review path never builds
    models."""
    speaker = _speakers_masked(conversation.workspace_id)
    rows = (
        Message.objects.filter(conversation=conversation)
        .order_by("seq")
        .values_list("pk", "seq", "role", "name", "created_at", "tool_name", "content")
        .iterator(chunk_size=chunk_size)
    )
    while chunk := list(itertools.islice(rows, chunk_size)):
        ids = [row[0] for row in chunk]
        spans = masked_spans(ids)
        digests = _scanned_digests(ids)
        for pk, seq, role, name, created_at, tool_name, content in chunk:
            text = masked_text(mask_parts(content, spans.get(pk, [])))
            pending = digests.get(pk) != content_digest(content)
            yield seq, role, speaker(name), created_at, tool_name, text, pending
