"""The messages column of the conversation page: windows of messages with the agent's
reasoning among them, and which of them no observation covers yet."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from django.db.models import Q, QuerySet

from core.errors import MemdeskError
from governance.redaction.gates import texts_masked_for_display
from memory.models import Conversation, Message, Observation, ObserverRun, ReasoningStep, ToolCall
from memory.selectors import unobserved_messages

MESSAGE_PAGE = 50
# Messages shown above the first source message when the list jumps to an observation,
# so the reader sees what led up to it.
JUMP_CONTEXT = 3


@dataclass
class MessageWindow:
    """A contiguous run of messages, oldest first, and whether there are more either side."""

    messages: list[Message]
    has_older: bool
    has_newer: bool
    highlighted: set[str] = field(default_factory=set)
    # Reasoning steps and tool calls after the conversation's last message
    # (``attach_reasoning``).
    reasoning_tail: list[ReasoningItem] = field(default_factory=list)

    @property
    def first_seq(self) -> int | None:
        return self.messages[0].seq if self.messages else None

    @property
    def last_seq(self) -> int | None:
        return self.messages[-1].seq if self.messages else None

    @property
    def older_at(self) -> int:
        """Where a whole page of the messages before this window starts (for no-JS links)."""
        return max((self.first_seq or 1) - MESSAGE_PAGE, 1)


@dataclass(frozen=True)
class ReasoningItem:
    """A reasoning step or a tool call as the messages column shows it, its texts masked
    (``texts_masked_for_display``)."""

    kind: str  # "step" or "tool_call"
    id: uuid.UUID
    created_at: datetime
    after_seq: int
    title: str  # "Step 3" or the tool's name
    status: str  # a tool call's status; "" for a step
    duration_ms: int | None
    fields: list[tuple[str, str]]  # (label, masked text), empty texts left out


def _reasoning_items(
    conversation: Conversation, steps: Sequence[ReasoningStep], calls: Sequence[ToolCall]
) -> list[ReasoningItem]:
    texts: list[str] = []
    for step in steps:
        texts += [step.reasoning, step.action_taken, step.result]
    for call in calls:
        texts += [call.input, call.output, call.error]
    masked = iter(texts_masked_for_display(workspace_id=conversation.workspace_id, texts=texts))

    def labelled(*labels: str) -> list[tuple[str, str]]:
        texts = [(label, next(masked)) for label in labels]
        return [(label, text) for label, text in texts if text.strip()]

    items = [
        ReasoningItem(
            kind="step",
            id=step.pk,
            created_at=step.created_at,
            after_seq=step.after_seq,
            title=f"Step {step.step_number}",
            status="",
            duration_ms=None,
            fields=labelled("Thought", "Action", "Result"),
        )
        for step in steps
    ]
    items += [
        ReasoningItem(
            kind="tool_call",
            id=call.pk,
            created_at=call.created_at,
            after_seq=call.after_seq,
            title=call.tool_name,
            status=call.status,
            duration_ms=call.duration_ms,
            fields=labelled("Input", "Output", "Error"),
        )
        for call in calls
    ]
    return sorted(items, key=lambda item: (item.after_seq, item.created_at, item.kind))


def attach_reasoning(*, conversation: Conversation, window: MessageWindow) -> None:
    """Place the conversation's reasoning steps and tool calls among the window's
    messages, in time order: each before the first message after it
    (``message.reasoning_before``), and those after the conversation's last message at
    the end (``window.reasoning_tail``) when the window reaches it. A window shows the
    items from the message before it up to its last message, so the windows a page
    loads one after another show each item once."""
    window.reasoning_tail = []
    messages = window.messages
    before = 0
    bounds = Q()
    if messages:
        # The message before the window is seq - 1, without a query: seq numbers are
        # consecutive, but for the oldest messages retention deleted, and it deletes
        # the reasoning recorded before them with them (it is older still).
        before = messages[0].seq - 1
        bounds &= Q(after_seq__gte=before)
        if messages[-1].seq < conversation.last_seq:
            bounds &= Q(after_seq__lt=messages[-1].seq)
    steps = list(ReasoningStep.objects.filter(bounds, conversation=conversation))
    calls = list(ToolCall.objects.filter(bounds, conversation=conversation))
    if not steps and not calls:
        return
    items = _reasoning_items(conversation, steps, calls)
    for message in messages:
        message.reasoning_before = [  # type: ignore[attr-defined]  # for the template
            item for item in items if item.after_seq < message.seq and item.after_seq >= before
        ]
        before = message.seq
    last = messages[-1].seq if messages else -1
    window.reasoning_tail = [item for item in items if item.after_seq >= last]


def _messages(conversation: Conversation) -> QuerySet[Message]:
    # Metadata is not shown; leaving it out keeps a page of tool calls light.
    return Message.objects.filter(conversation=conversation).defer("metadata")


def message_window(
    *,
    conversation: Conversation,
    before: int | None = None,
    after: int | None = None,
    at: int | None = None,
    limit: int = MESSAGE_PAGE,
) -> MessageWindow:
    """The newest ``limit`` messages; or the ``limit`` before seq ``before`` / after seq
    ``after`` (to extend a list already shown); or ``limit`` starting a few messages
    before seq ``at`` (to jump to an observation's sources)."""
    qs = _messages(conversation)
    if at is not None:
        start = max(at - JUMP_CONTEXT, 0)
        page = list(qs.filter(seq__gte=start).order_by("seq")[: limit + 1])
        has_older = bool(page) and qs.filter(seq__lt=page[0].seq).exists()
        return MessageWindow(page[:limit], has_older=has_older, has_newer=len(page) > limit)
    if after is not None:
        page = list(qs.filter(seq__gt=after).order_by("seq")[: limit + 1])
        return MessageWindow(page[:limit], has_older=False, has_newer=len(page) > limit)
    if before is not None:
        qs = qs.filter(seq__lt=before)
    newest_first = list(qs.order_by("-seq")[: limit + 1])
    return MessageWindow(
        newest_first[:limit][::-1], has_older=len(newest_first) > limit, has_newer=False
    )


def unobserved_ids(*, conversation: Conversation) -> set[uuid.UUID]:
    """The messages no Observer run or observation covers yet (served verbatim)."""
    return set(unobserved_messages(conversation=conversation).values_list("pk", flat=True))


def _covered(seq: int, intervals: Sequence[tuple[int, int]]) -> bool:
    return any(start <= seq <= end for start, end in intervals)


def mark_unobserved(*, conversation: Conversation, messages: Sequence[Message]) -> None:
    """Flag ``unobserved`` on messages no observation covers yet, for the template: no
    succeeded Observer run's window and no observation's window holds them.

    Only windows that reach the messages are read: the runs over their seq range, then,
    for the messages no run covers (the newest, usually, or none), the observations
    over those. Observations are read by where their windows end, so a page of old
    messages, which runs cover, never reads a long conversation's later observations."""
    if not messages:
        return
    seqs = sorted(message.seq for message in messages)
    # The filters exclude NULL windows, which the values_list type cannot know.
    intervals = cast(
        list[tuple[int, int]],
        list(
            ObserverRun.objects.filter(
                conversation=conversation,
                status=ObserverRun.Status.SUCCEEDED,
                window_start_seq__lte=seqs[-1],
                window_end_seq__gte=seqs[0],
            ).values_list("window_start_seq", "window_end_seq")
        ),
    )
    uncovered = [seq for seq in seqs if not _covered(seq, intervals)]
    if uncovered:
        intervals += cast(
            list[tuple[int, int]],
            list(
                Observation.objects.filter(
                    conversation=conversation,
                    window_end_seq__gte=uncovered[0],
                    window_start_seq__lte=uncovered[-1],
                ).values_list("window_start_seq", "window_end_seq")
            ),
        )
    for message in messages:
        message.unobserved = not _covered(message.seq, intervals)  # type: ignore[attr-defined]  # for the template


def message_get(*, conversation: Conversation, message_id: uuid.UUID) -> Message:
    try:
        return Message.objects.get(conversation=conversation, pk=message_id)
    except Message.DoesNotExist:
        raise MemdeskError(
            "not_found", "No such message in this conversation.", status_code=404
        ) from None
