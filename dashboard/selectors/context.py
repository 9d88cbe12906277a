"""What the agent is served for a conversation, as its context page shows it to people."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from governance.redaction.gates import reidentifier_for_api, reidentifier_for_measurement
from governance.redaction.labels import LABEL
from governance.redaction.masking import masked_spans, speaker_people_masked
from memory.context.budget import ContextBudget, context_budget
from memory.context.read import context_for_conversation
from memory.context.rendering import chat_name
from memory.context.tiers import Reidentifies
from memory.models import Conversation, Message, Pin
from memory.recall import Recall, recall_for_conversation


class RecordingReidentifier:
    """Wraps the API's reidentifier and remembers which value replaced which pseudonym,
    so a page can put the pseudonyms back: people see memory as the conversation page
    shows it, not with the values only agents are given."""

    def __init__(self, inner: Reidentifies) -> None:
        self.inner = inner
        self.cache_key = inner.cache_key
        self.values: dict[str, str] = {}

    def prepare(self, texts: Iterable[str]) -> None:
        self.inner.prepare(texts)

    def text(self, text: str) -> str:
        after = self.inner.text(text)
        if after != text:
            for match in LABEL.finditer(text):
                value = self.inner.text(match.group(0))
                if value != match.group(0):
                    self.values[value] = match.group(0)
        return after


@dataclass(frozen=True)
class ServedContext:
    """The context ``GET /v1/conversations/{id}/context`` returns, as text and as chat
    messages, with the values a person may not read here masked (``masked_values``)."""

    text: str
    chat: list[dict[str, Any]]
    budget: ContextBudget
    masked_values: int
    reidentified: bool


def mask_values(text: str, replacements: list[tuple[str, str]]) -> str:
    for value, label in replacements:
        text = text.replace(value, label)
    return text


def chat_masked(
    chat: list[dict[str, Any]], replacements: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The turns of a ``messages`` context with ``replacements`` made in their contents and
    names (in place)."""
    # A turn's name is in the form OpenAI takes ("Maria_Lopez"): masked when it is that
    # form of a masked value.
    chat_names = {chat_name(value): chat_name(label) or label for value, label in replacements}
    for turn in chat:
        if isinstance(turn.get("content"), str):
            turn["content"] = mask_values(turn["content"], replacements)
        if turn.get("name") in chat_names:
            turn["name"] = chat_names[turn["name"]]
    return chat


def masked_values_of(
    *,
    workspace_id: Any,
    message_ids: Iterable[Any],
    recorder: RecordingReidentifier | None,
) -> list[tuple[str, str]]:
    """What a page masks in a context holding these messages' words: the values the scan
    found in them (for every role), the values ``recorder`` put back for their
    pseudonyms, and the speakers' names the conversation page masks; longest first (a
    value inside another is not masked half)."""
    rows = list(
        Message.objects.filter(pk__in=set(message_ids)).values_list("pk", "content", "name")
    )
    contents = {pk: content for pk, content, _ in rows}
    names = {name for _, _, name in rows if name}
    found: dict[str, str] = {}
    for message_id, spans in masked_spans(list(contents)).items():
        content = contents.get(message_id, "")
        for start, end, entity_type, _ in spans:
            if content[start:end].strip():
                found[content[start:end]] = f"<{entity_type}>"
    if recorder is not None:
        found.update({value: label for value, label in recorder.values.items() if value})
    masks = speaker_people_masked(workspace_id=workspace_id, names=names)
    for person, mask in masks.items():
        found.setdefault(person, mask)
    return sorted(found.items(), key=lambda pair: -len(pair[0]))


def served_context(*, conversation: Conversation, max_tokens: int | None) -> ServedContext:
    """Exactly what the agent API serves for this conversation (the same selector, the
    same reidentifier choice, the same budget), then masked as the conversation page
    masks: the values the scan found in messages (for every role), and the values a
    re-identifying workspace gives agents back as their pseudonyms."""
    reidentifier = reidentifier_for_api(workspace_id=conversation.workspace_id)
    recorder = RecordingReidentifier(reidentifier) if reidentifier is not None else None
    budget = context_budget(conversation=conversation, max_tokens=max_tokens, reidentifier=recorder)
    text = context_for_conversation(
        conversation=conversation, fmt="text", max_tokens=max_tokens, reidentifier=reidentifier
    ).body.decode()
    chat = json.loads(
        context_for_conversation(
            conversation=conversation,
            fmt="messages",
            max_tokens=max_tokens,
            reidentifier=reidentifier,
        ).body
    )["messages"]
    pin_message_ids = set(
        Pin.objects.filter(conversation=conversation).values_list("message_id", flat=True)
    )
    replacements = masked_values_of(
        workspace_id=conversation.workspace_id,
        message_ids={*budget.recent_message_ids, *pin_message_ids},
        recorder=recorder,
    )
    return ServedContext(
        text=mask_values(text, replacements),
        chat=chat_masked(chat, replacements),
        budget=budget,
        masked_values=len(replacements),
        reidentified=reidentifier is not None,
    )


def conversation_recall(*, conversation: Conversation) -> Recall:
    """The recall estimate as ``/v1/metrics`` gives it (memory's pseudonyms matched with
    their values, in memory only)."""
    return recall_for_conversation(
        conversation=conversation,
        reidentifier=reidentifier_for_measurement(workspace_id=conversation.workspace_id),
    )
