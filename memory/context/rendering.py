"""The context's body in each format (JSON, the text block, an OpenAI ``messages``
array), from memory items rendered and costed once, and its ETag."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from dataclasses import dataclass, field, replace
from datetime import date
from functools import lru_cache
from typing import Any

from memory.context.tiers import MemoryTiers
from memory.engines.base import MEMORY_BLOCK_HEADER
from memory.models import PRIORITY_KEEP_RANK, Conversation, Message, Observation, Reflection
from memory.selectors import deleted_source_ids
from memory.tokens import token_count
from memory.wire import (
    memory_line,
    observation_to_wire,
    pin_to_wire,
    recent_message_to_wire,
    reflection_to_wire,
    tool_result_text,
)

FORMATS = ("json", "text", "messages")
# Tokens a chat message costs beyond its content (role and separators), as OpenAI counts.
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True)
class RenderedContext:
    body: bytes
    content_type: str
    # The SHA-256 of ``body`` in hex: what the read ledger records of a body served, and
    # the ETag's source. Set by ``of`` and ``with_body``, which keep it the body's.
    digest: str
    # A digest of the memory sections served (pins, reflections, observations, as
    # rendered and fitted): equal digests, byte-identical memory block. Empty in
    # renders cached before it existed.
    memory_digest: str = ""
    # What a recalled section needs (memory/context/recalled.py): the tokens the body
    # holds, and the first recent message's seq (recall leaves out what is already
    # there). None in renders cached before they existed.
    token_count: int | None = None
    recent_from_seq: int | None = None

    @classmethod
    def of(cls, body: bytes, **fields: Any) -> RenderedContext:
        """A rendered context of ``body``, with its digest."""
        return cls(body=body, digest=hashlib.sha256(body).hexdigest(), **fields)

    @classmethod
    def of_parts(
        cls, prefix: bytes, prefix_hash: Any, end: bytes, **fields: Any
    ) -> RenderedContext:
        """A rendered context of ``prefix + end``, its digest carried on from
        ``prefix_hash`` (a SHA-256 of ``prefix``, left as it is): an extended body hashes
        only what it adds (memory/context/extension.py)."""
        digest = prefix_hash.copy()
        digest.update(end)
        return cls(body=prefix + end, digest=digest.hexdigest(), **fields)

    def with_body(self, body: bytes, **changes: Any) -> RenderedContext:
        """This context with another body (and its digest), and ``changes``."""
        return replace(self, body=body, digest=hashlib.sha256(body).hexdigest(), **changes)

    @property
    def etag(self) -> str:
        return f'"{self.digest[:32]}"'


@lru_cache(maxsize=1024)
def _name_cost(name: str) -> int:
    # A conversation has a few speakers and many turns: each name is counted once.
    return token_count(name) + 1  # + the separator OpenAI counts for a name


def message_cost(message: Message) -> int:
    cost = message.token_count + MESSAGE_OVERHEAD_TOKENS
    if message.name:
        cost += _name_cost(message.name)
    return cost


def speaker_label(message: Message) -> str:
    """Who said a message as the text block shows it: ``user``, or ``Maria Lopez (user)``."""
    return f"{message.name} ({message.role})" if message.name else message.role


# What OpenAI accepts as a chat message's ``name`` (it refuses any other with a 400).
_CHAT_NAME_REFUSED = re.compile(r"[^A-Za-z0-9_-]+")
CHAT_NAME_MAX_CHARS = 64


@lru_cache(maxsize=1024)  # a conversation's few speakers, over its many turns
def chat_name(name: str) -> str:
    """``name`` in the form OpenAI takes for a chat message's ``name``: accents dropped
    ("José" is "Jose"), every other run of characters it refuses made one "_" ("Maria
    Lopez" is "Maria_Lopez", "<PERSON_3>" is "PERSON_3"); "" when nothing is left."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return _CHAT_NAME_REFUSED.sub("_", ascii_name).strip("_")[:CHAT_NAME_MAX_CHARS].rstrip("_")


def _memory_cost(item: Observation | Reflection, today: date) -> int:
    return token_count(memory_line(item, today=today)) + 1  # + the newline between lines


@dataclass(frozen=True)
class _MemoryItem:
    cost: int  # tokens against a budget
    rendered: str  # the memory line (text, messages) or the wire object as JSON (json)


@dataclass(frozen=True)
class MemoryBlock:
    """Pins, reflections and observations, each rendered once and costed: everything of a
    context that changes only with ``memory_version`` (and the day, and the pseudonyms
    forgotten). A message write appends to the tail and leaves this block, and so the
    bytes of the memory sections, as they were."""

    pins: tuple[_MemoryItem, ...]
    reflections: tuple[_MemoryItem, ...]
    observations: tuple[_MemoryItem, ...]
    # Indexes into ``observations``, the first to drop first: the lowest priority, and
    # among equals the oldest.
    drop_order: tuple[int, ...]


@dataclass(frozen=True)
class Fitted:
    """Which items of a block and a tail a budget keeps."""

    pins: tuple[_MemoryItem, ...]
    reflections: tuple[_MemoryItem, ...]
    observations: tuple[_MemoryItem, ...]
    recent: list[Message]
    token_count: int
    dropped: dict[str, int]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def memory_block(
    tiers: MemoryTiers,
    *,
    fmt: str,
    conversation: Conversation,
    deleted: frozenset[str] | None = None,
) -> MemoryBlock:
    """``deleted``: the observations' source messages deleted since (``deleted_source_ids``,
    read here when not given), which the JSON format lists."""
    today = tiers.today
    as_json = fmt == "json"
    if not as_json:
        deleted = frozenset()
    elif deleted is None:
        deleted = deleted_source_ids(conversation=conversation, observations=tiers.observations)
    pins = tuple(
        _MemoryItem(pin.token_count + 1, _dumps(pin_to_wire(pin)) if as_json else pin.text)
        for pin in tiers.pins
    )
    reflections = tuple(
        _MemoryItem(
            _memory_cost(r, today),
            _dumps(reflection_to_wire(r, today=today)) if as_json else memory_line(r, today=today),
        )
        for r in tiers.reflections
    )
    observations = tuple(
        _MemoryItem(
            _memory_cost(o, today),
            _dumps(observation_to_wire(o, today=today, deleted_sources=deleted))
            if as_json
            else memory_line(o, today=today),
        )
        for o in tiers.observations
    )
    by_expendability = sorted(
        range(len(tiers.observations)),
        key=lambda i: (
            -PRIORITY_KEEP_RANK[tiers.observations[i].priority],
            tiers.observations[i].observed_at,
            tiers.observations[i].window_start_seq or 0,
        ),
    )
    return MemoryBlock(pins, reflections, observations, tuple(by_expendability))


def _memory_sections(fitted: Fitted) -> list[str]:
    sections = []
    if fitted.pins:
        # Only when there are pins: without them the block stays byte for byte the one
        # the neo4j-agent-memory client builds.
        sections.append("## Pinned\n" + "\n".join(item.rendered for item in fitted.pins))
    if fitted.reflections:
        lines = (item.rendered for item in fitted.reflections)
        sections.append("## Reflections\n" + "\n".join(lines))
    if fitted.observations:
        lines = (item.rendered for item in fitted.observations)
        sections.append("## Observations\n" + "\n".join(lines))
    return sections


def text_line(message: Message) -> str:
    return f"[{speaker_label(message)}] {message.content}"


def _text_layout(fitted: Fitted) -> Layout:
    """The block the neo4j-agent-memory client builds from the JSON context, byte for byte,
    but for the speaker's name beside the role of a message that names one."""
    parts = _memory_sections(fitted)
    if not fitted.recent:
        return Layout("\n\n".join(parts), [], [], "\n", "")
    head = "".join(part + "\n\n" for part in parts) + "## Recent Messages\n"
    return Layout(head, [], [text_line(m) for m in fitted.recent], "\n", "")


def chat_turn(message: Message, open_calls: set[str]) -> str:
    """One turn of the ``messages`` format as JSON; ``open_calls``: the ids of the tool
    calls earlier assistant turns made, updated with this turn's.

    OpenAI accepts a ``tool`` message only as the answer to a ``tool_calls`` entry of an
    earlier assistant message. Assistant messages carry those calls in
    ``metadata.toolCalls``; a tool result whose call is not in the array (never sent, or
    trimmed away) becomes a user message that names the tool, so the array stays valid.
    A turn whose message names its speaker carries the name as OpenAI takes it
    (``chat_name``)."""
    turn: dict[str, Any] = {"role": message.role, "content": message.content}
    tool_calls = tool_calls_of(message)
    if tool_calls:
        turn["tool_calls"] = tool_calls
        open_calls.update(str(c.get("id")) for c in tool_calls if isinstance(c, dict))
    elif message.role == Message.Role.TOOL:
        if message.tool_call_id and message.tool_call_id in open_calls:
            turn["tool_call_id"] = message.tool_call_id
        else:
            turn = {"role": "user", "content": tool_result_text(message)}
    if message.name and turn["role"] != Message.Role.TOOL:
        name = chat_name(message.name)
        if name:
            turn["name"] = name
    return _dumps(turn)


def tool_calls_of(message: Message) -> list[Any]:
    """The tool calls an assistant message made (``metadata.toolCalls``), or []."""
    if message.role != Message.Role.ASSISTANT:
        return []
    tool_calls = (message.metadata or {}).get("toolCalls")
    return tool_calls if isinstance(tool_calls, list) else []


def _messages_layout(fitted: Fitted, max_tokens: int | None) -> Layout:
    """An OpenAI chat ``messages`` array: the memory as one system message, then the turns
    (``chat_turn``); ``json.dumps`` of ``{"messages": [...], **budget}``, byte for byte."""
    lead = []
    memory_parts = _memory_sections(fitted)
    if memory_parts:
        system = MEMORY_BLOCK_HEADER + "\n\n" + "\n\n".join(memory_parts)
        lead.append(_dumps({"role": "system", "content": system}))
    open_calls: set[str] = set()
    turns = [chat_turn(m, open_calls) for m in fitted.recent]
    end = json_end(max_tokens, fitted.token_count, fitted.dropped)
    return Layout('{"messages":[', lead, turns, ",", end, open_calls)


def _json_layout(
    conversation_id: Any, fitted: Fitted, wires: dict[Any, str], max_tokens: int | None
) -> Layout:
    """``json.dumps`` of the payload, byte for byte, with the memory items' JSON taken from
    the block and each message's from ``wires`` (filled here), rather than encoded again."""
    head = (
        '{"conversationId":'
        + _dumps(str(conversation_id))
        + ',"pins":['
        + ",".join(item.rendered for item in fitted.pins)
        + '],"reflections":['
        + ",".join(item.rendered for item in fitted.reflections)
        + '],"observations":['
        + ",".join(item.rendered for item in fitted.observations)
        + '],"recentMessages":['
    )
    pieces = [json_message(m, wires) for m in fitted.recent]
    end = json_end(max_tokens, fitted.token_count, fitted.dropped)
    return Layout(head, [], pieces, ",", end)


def json_message(message: Message, wires: dict[Any, str]) -> str:
    """A recent message's JSON, from ``wires`` (where it is kept once encoded)."""
    wire = wires.get(message.pk)
    if wire is None:
        wire = wires[message.pk] = _dumps(recent_message_to_wire(message))
    return wire


def json_end(max_tokens: int | None, token_count: int, dropped: dict[str, int]) -> str:
    """What follows the recent messages in the JSON formats: the array's end, then the
    budget, when there is one (``maxTokens``, ``tokenCount``, ``trimmed``)."""
    if max_tokens is None:
        return "]}"
    budget = {"maxTokens": max_tokens, "tokenCount": token_count, "trimmed": dropped}
    fields = "".join(f",{_dumps(name)}:{_dumps(value)}" for name, value in budget.items())
    return "]" + fields + "}"


@dataclass
class Layout:
    """A body as ``head + sep.join(lead + recent) + end``: ``recent`` holds one piece per
    recent message, last, so a body extends by newer messages' pieces (and drops its
    oldest, as a budget does) without rendering the rest again
    (memory/context/extension.py). ``lead``: the messages format's system turn."""

    head: str
    lead: list[str]
    recent: list[str]
    sep: str
    end: str
    # The messages format's tool calls the turns made so far (``chat_turn``).
    open_calls: set[str] = field(default_factory=set)

    def body(self) -> bytes:
        return self.prefix() + self.end.encode()

    def prefix(self) -> bytes:
        """The body but its end."""
        return (self.head + self.sep.join(self.lead + self.recent)).encode()


@dataclass(frozen=True)
class Tail:
    """The recent messages up to ``through_seq``. Between two changes of memory (each
    moves ``memory_version``: an Observer run, a redaction, a deletion) the tail only
    grows at its end, so a newer one is this one plus the messages after it."""

    through_seq: int
    intervals: tuple[tuple[int, int], ...]  # the observed seq ranges, fixed until then
    messages: tuple[Message, ...]
    wires: dict[Any, str]  # each message's JSON, by id, as the json format needs it
    # Older unobserved messages left out of ``messages`` (the newest
    # LOCAL_TAIL_MAX_MESSAGES are kept): a budget that drops messages drops them first.
    trimmed: int = 0


def layout(
    conversation_id: Any,
    *,
    fitted: Fitted,
    wires: dict[Any, str],
    fmt: str,
    max_tokens: int | None,
) -> Layout:
    if fmt == "text":
        return _text_layout(fitted)
    if fmt == "messages":
        return _messages_layout(fitted, max_tokens)
    return _json_layout(conversation_id, fitted, wires, max_tokens)


CONTENT_TYPES = {
    "json": "application/json",
    "messages": "application/json",
    "text": "text/plain; charset=utf-8",
}


def memory_digest_of(fitted: Fitted) -> str:
    """A digest of the memory sections served (pins, reflections, observations)."""
    memory = hashlib.blake2b(digest_size=16)
    for section in (fitted.pins, fitted.reflections, fitted.observations):
        for item in section:
            memory.update(item.rendered.encode())
            memory.update(b"\x1e")
        memory.update(b"\x1d")
    return memory.hexdigest()


def compose(laid: Layout, *, fitted: Fitted, fmt: str) -> RenderedContext:
    """The body ``laid`` lays out, with its ETag and digests."""
    return RenderedContext.of(
        laid.body(),
        content_type=CONTENT_TYPES[fmt],
        memory_digest=memory_digest_of(fitted),
        token_count=fitted.token_count,
        recent_from_seq=fitted.recent[0].seq if fitted.recent else None,
    )
