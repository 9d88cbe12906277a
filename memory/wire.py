"""The JSON shapes a context carries (camelCase, as the NAMS clients expect): messages,
pins, observations and reflections, and the memory line of a prompt.

Written by hand rather than as DRF serializers, because they are the context's hot path:
an uncached render of a long conversation turns about 720 rows into wire dicts (65 ms of
CPU in all, docs/benchmarks.md, "Context read"), and a serializer costs about five times
these functions per row (38 against 7 us per row of a 100-row list, 0.2-0.4 ms for a
single object, measured on the conversation shape). ``memory/api_schema.py`` declares
these shapes for the OpenAPI document, and tests/memory/test_openapi.py checks every
response against it. Every other shape is a DRF serializer in
``memory/api/presenters.py``, written once.
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from datetime import date, datetime
from typing import Any

from memory.models import (
    PRIORITY_MARKERS,
    Message,
    Observation,
    Pin,
    Reflection,
)


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def relative_date(value: datetime | None, *, today: date) -> str | None:
    """'today', 'yesterday', '3 days ago', 'in 2 weeks'... at day precision, so the context
    stays byte-identical within a day (prompt caches key on exact bytes)."""
    if value is None:
        return None
    days = (today - value.date()).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    if days == -1:
        return "tomorrow"
    span = abs(days)
    if span < 14:
        amount, unit = span, "day"
    elif span < 60:
        amount, unit = span // 7, "week"
    elif span < 730:
        amount, unit = span // 30, "month"
    else:
        amount, unit = span // 365, "year"
    label = f"{amount} {unit}{'s' if amount != 1 else ''}"
    return f"{label} ago" if days > 0 else f"in {label}"


def message_to_wire(message: Message, *, score: float | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(message.id),
        "conversationId": str(message.conversation_id),
        "seq": message.seq,
        "role": message.role,
        "content": message.content,
        "createdAt": iso(message.created_at),
        "tokenCount": message.token_count,
        "metadata": message.metadata,
    }
    # Present only when set, as toolName: a client that sends only {role, content}
    # reads the shape it always has.
    if message.name:
        body["name"] = message.name
    if message.tool_name:
        body["toolName"] = message.tool_name
    if message.tool_call_id:
        body["toolCallId"] = message.tool_call_id
    if score is not None:
        body["score"] = score
    return body


# The roles every NAMS client knows (the TypeScript MessageRole union).
NAMS_ROLES = ("user", "assistant", "system")


def tool_result_text(message: Message) -> str:
    """A tool's output as a turn of a client that has no tool role: labelled, so a model
    does not read it as something the user said."""
    return f"[{message.tool_name or 'tool'} result] {message.content}"


def recent_message_to_wire(message: Message) -> dict[str, Any]:
    """A message of the context's ``recentMessages``, which clients put into a prompt
    as it is. A tool message becomes a user turn labelled with its tool (as the
    ``messages`` format serves an unanswered tool result; not a system turn, which would
    lend a tool's output the authority of instructions); ``originalRole`` keeps
    Memdesk's own role."""
    body = message_to_wire(message)
    if message.role not in NAMS_ROLES:
        body["originalRole"] = message.role
        body["role"] = "user"
        body["content"] = tool_result_text(message)
    return body


def memory_line(item: Observation | Reflection, *, today: date) -> str:
    """One line of memory as it goes into a prompt: marker, when it was said (a
    reflection: the span of its sources) with how long ago, the text, and the date of the
    event it talks about when that is another day.

    ``🟡 2026-10-03 (2 months ago) User's order ORD-7 arrived damaged (event date
    2026-10-01, 2 months ago)``
    """
    said = f"{item.observed_at:%Y-%m-%d}"
    if (
        isinstance(item, Reflection)
        and item.window_start_at
        and item.window_start_at.date() < item.observed_at.date()
    ):
        said = f"{item.window_start_at:%Y-%m-%d} to {said}"
    line = f"{item.marker} {said} ({relative_date(item.observed_at, today=today)}) {item.text}"
    if item.referenced_at and item.referenced_at.date() != item.observed_at.date():
        event = relative_date(item.referenced_at, today=today)
        line += f" (event date {item.referenced_at:%Y-%m-%d}, {event})"
    return line


_DAY = r"\d{4}-\d{2}-\d{2}"
_LINE_HEAD = re.compile(
    "^(?:"
    + "|".join(map(re.escape, PRIORITY_MARKERS.values()))
    + ")"
    + rf" {_DAY}(?: to {_DAY})? \([^()]*\) "
)
_LINE_EVENT_DATE = re.compile(rf" \(event date {_DAY}, [^()]*\)$")


def text_from_content(content: str) -> str:
    """The note in ``content`` as an edit sends it. Reads give a note's ``content`` as
    its ``memory_line``; one sent back so, with its marker and dates, would otherwise
    be stored with them and served with them twice."""
    head = _LINE_HEAD.match(content)
    if head is None:
        return content
    return _LINE_EVENT_DATE.sub("", content[head.end() :])


def note_origin(item: Observation | Reflection) -> dict[str, Any]:
    """Whose word a note is: the engine (and model), or the agent or person who wrote it,
    and who changed it last."""
    return {
        "kind": item.origin_kind,
        "engine": item.engine or None,
        "model": item.model_name or None,
        "writtenBy": item.written_by or None,
        "correctedBy": item.corrected_by or None,
        "correctedAt": iso(item.corrected_at),
        "personsWords": item.persons_words,
    }


def _memory_common(item: Observation | Reflection, *, today: date) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": str(item.id),
        "conversationId": str(item.conversation_id),
        "content": memory_line(item, today=today),
        "text": item.text,
        "priority": item.priority,
        "marker": item.marker,
        "status": item.status,
        "observedAt": iso(item.observed_at),
        "referencedAt": iso(item.referenced_at),
        "writtenAt": iso(item.written_at),
        "grounding": item.grounding,
        "groundingFlagged": item.needs_grounding_review,
        "relativeDate": relative_date(item.referenced_at or item.observed_at, today=today),
        "windowStartSeq": item.window_start_seq,
        "windowEndSeq": item.window_end_seq,
        "source": item.source,
        "engine": item.engine or None,
        "model": item.model_name or None,
        "origin": note_origin(item),
        "tags": item.tags,
        "topics": item.topics,
        "tokenCount": item.token_count,
        "version": item.version,
        "createdAt": iso(item.created_at),
    }
    # When the messages behind it were said, as ISO strings (the NAMS clients' Observation
    # type): absent, not null, for a note written by hand from no message, since the
    # TypeScript client types them as optional strings.
    if item.window_start_at is not None:
        body["windowStart"] = iso(item.window_start_at)
    if item.window_end_at is not None:
        body["windowEnd"] = iso(item.window_end_at)
    return body


def observation_to_wire(
    observation: Observation, *, today: date, deleted_sources: AbstractSet[str] = frozenset()
) -> dict[str, Any]:
    """``deleted_sources``: message ids retention or erasure deleted (see
    ``deleted_source_ids``); the ones among this observation's sources are listed in
    ``deletedSourceMessageIds`` so a client does not follow a link to nothing."""
    body = _memory_common(observation, today=today)
    body["sourceMessageIds"] = observation.source_message_ids
    body["deletedSourceMessageIds"] = [
        i for i in observation.source_message_ids if str(i) in deleted_sources
    ]
    body["ticketId"] = observation.ticket_id or None
    body["reflectionId"] = str(observation.reflection_id) if observation.reflection_id else None
    return body


def reflection_to_wire(reflection: Reflection, *, today: date) -> dict[str, Any]:
    body = _memory_common(reflection, today=today)
    body["generation"] = reflection.generation
    body["sourceObservationIds"] = reflection.source_observation_ids
    body["supersededBy"] = str(reflection.superseded_by_id) if reflection.superseded_by_id else None
    return body


def pin_to_wire(pin: Pin) -> dict[str, Any]:
    return {
        "id": str(pin.id),
        "conversationId": str(pin.conversation_id),
        "messageId": str(pin.message_id),
        "start": pin.start,
        "end": pin.end,
        "text": pin.text,
        "tokenCount": pin.token_count,
        "createdBy": pin.created_by,
        "createdAt": iso(pin.created_at),
    }
