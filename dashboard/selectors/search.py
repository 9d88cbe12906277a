"""Search across the conversations of a workspace."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from governance.redaction.masking import mask_messages
from memory.models import Conversation, Message, Observation, Reflection
from tenancy.models import Workspace

SEARCH_KINDS = {
    "messages": "Messages",
    "observations": "Observations",
    "reflections": "Reflections",
}
# Messages are matched on what a person sees of them (masked): the database finds these
# many candidates by their stored text, the masked text decides.
SEARCH_MESSAGE_CANDIDATES = 500
SNIPPET_CONTEXT = 90


@dataclass(frozen=True)
class SearchHit:
    kind: str  # "message", "observation", "reflection"
    conversation: Conversation
    item_id: uuid.UUID
    anchor: str  # the item's element id on the conversation page
    query: str  # what the conversation page needs to show the item ("at=12")
    before: str
    match: str
    after: str
    when: datetime
    seq: int | None = None
    role: str = ""
    priority: str = ""
    status: str = ""


def _snippet(text: str, query: str) -> tuple[str, str, str]:
    at = text.lower().find(query.lower())
    if at < 0:
        return text[: SNIPPET_CONTEXT * 2], "", ""
    start = max(at - SNIPPET_CONTEXT, 0)
    end = at + len(query)
    before = ("…" if start else "") + text[start:at]
    after = text[end : end + SNIPPET_CONTEXT] + ("…" if end + SNIPPET_CONTEXT < len(text) else "")
    return before, text[at:end], after


@dataclass
class SearchResults:
    counts: dict[str, int]
    capped: bool  # more messages matched than were read
    hits: dict[
        str, Sequence[Any] | QuerySet[Any]
    ]  # by kind: SearchHit for messages, rows otherwise

    def first_kind_found(self) -> str:
        return next((kind for kind, n in self.counts.items() if n), "messages")


def _message_hits(workspace: Workspace, query: str, end_user: str) -> tuple[list[SearchHit], bool]:
    candidates = Message.objects.filter(
        conversation__workspace=workspace, content__icontains=query
    ).select_related("conversation")
    if end_user:
        candidates = candidates.filter(conversation__user_id=end_user)
    rows = list(
        candidates.defer("metadata").order_by("-created_at", "-seq")[
            : SEARCH_MESSAGE_CANDIDATES + 1
        ]
    )
    capped = len(rows) > SEARCH_MESSAGE_CANDIDATES
    rows = rows[:SEARCH_MESSAGE_CANDIDATES]
    mask_messages(messages=rows, workspace_id=workspace.pk)
    hits = []
    for message in rows:
        shown = message.masked_text  # type: ignore[attr-defined]  # set by mask_messages
        if query.lower() not in shown.lower():
            continue  # it matched only inside a masked value
        before, match, after = _snippet(shown, query)
        hits.append(
            SearchHit(
                "message",
                message.conversation,
                message.pk,
                before=before,
                match=match,
                after=after,
                anchor=f"m-{message.seq}",
                query=f"at={message.seq}",
                when=message.created_at,
                seq=message.seq,
                role=message.role,
            )
        )
    return hits, capped


def _memory_hits(
    model: type[Observation] | type[Reflection], workspace: Workspace, query: str, end_user: str
) -> QuerySet[Any]:
    rows = model.objects.filter(conversation__workspace=workspace, text__icontains=query)
    if end_user:
        rows = rows.filter(conversation__user_id=end_user)
    return rows.select_related("conversation").order_by("-observed_at", "-created_at", "-id")


def memory_hit(item: Observation | Reflection, query: str) -> SearchHit:
    if isinstance(item, Observation):
        kind, anchor, link = "observation", f"obs-{item.pk}", f"highlight={item.pk}"
    else:
        kind, anchor, link = "reflection", f"refl-{item.pk}", f"reflection={item.pk}"
    before, match, after = _snippet(item.text, query)
    return SearchHit(
        kind,
        item.conversation,
        item.pk,
        anchor=anchor,
        query=link,
        when=item.observed_at,
        priority=item.priority,
        status=item.status,
        before=before,
        match=match,
        after=after,
    )


def memory_search(*, workspace: Workspace, query: str, end_user: str = "") -> SearchResults:
    """Messages, observations and reflections of one workspace whose text holds
    ``query`` (case-insensitive, on every database: people search for exact words and
    ids, and a substring answers that the same on SQLite and PostgreSQL), newest first.
    The observation and reflection hits are lazy querysets, for a paginator."""
    messages, capped = _message_hits(workspace, query, end_user)
    observations = _memory_hits(Observation, workspace, query, end_user)
    reflections = _memory_hits(Reflection, workspace, query, end_user)
    return SearchResults(
        counts={
            "messages": len(messages),
            "observations": observations.count(),
            "reflections": reflections.count(),
        },
        capped=capped,
        hits={"messages": messages, "observations": observations, "reflections": reflections},
    )
