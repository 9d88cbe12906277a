"""Reads for the compliance pages that only the dashboard needs: where an audit event's
target lives, who its actor is by name, how many conversations an end user id covers,
which conversations a retention dry run touches. Nothing here decides who may read it
(that is ``dashboard.access``)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from django.urls import reverse

from core.paging import is_ascii_digits
from governance.models import (
    AuditEvent,
    ErasureRequest,
    LegalHold,
    RedactionFinding,
    RestrictedOriginal,
)
from governance.redaction.scan import UNSCANNED
from memory.models import Conversation, Message, Observation, Reflection
from tenancy.models import ApiKey, Workspace

# Targets whose page is one per row, named by the event's target id.
_ROW_PAGES = {
    "retention_sweep": "dashboard:compliance_sweep",
    "erasure_request": "dashboard:compliance_erasure_detail",
    "rescan_run": "dashboard:compliance_rescan_run",
    "retention_policy": "dashboard:compliance_retention_policy",
}
# Targets with one page for all their rows.
_LIST_PAGES = {
    "redaction_policy": "dashboard:compliance_redaction",
    "legal_hold": "dashboard:compliance_holds",
    "api_key": "dashboard:api_keys",
}
_IN_CONVERSATION: dict[str, type[Message | RedactionFinding]] = {
    "message": Message,
    "redaction_finding": RedactionFinding,
}
_ITEMS: dict[str, type[Observation | Reflection]] = {
    "observation": Observation,
    "reflection": Reflection,
}


def _uuids(raw_ids: set[str]) -> list[uuid.UUID]:
    ids = []
    for raw in raw_ids:
        try:
            ids.append(uuid.UUID(raw))
        except ValueError:
            continue
    return ids


def _ids_by_type(events: Sequence[AuditEvent]) -> dict[str, set[str]]:
    by_type: dict[str, set[str]] = defaultdict(set)
    for event in events:
        by_type[event.target_type].add(event.target_id)
    return by_type


def _conversations_of(
    model: type[Message | Observation | Reflection | RedactionFinding],
    raw_ids: set[str],
    workspace: Workspace,
) -> dict[str, uuid.UUID]:
    """Target id → the id of the conversation it is in, for the rows that still exist."""
    found: QuerySet[Any]
    if model is RedactionFinding:
        numbers = [int(raw) for raw in raw_ids if is_ascii_digits(raw)]
        found = RedactionFinding.objects.filter(pk__in=numbers, workspace=workspace)
    else:
        found = model._default_manager.filter(
            pk__in=_uuids(raw_ids), conversation__workspace=workspace
        )
    return {
        str(pk): conversation_id
        for pk, conversation_id in found.values_list("pk", "conversation_id")
    }


def audit_target_urls(
    *, workspace: Workspace, events: Sequence[AuditEvent]
) -> dict[tuple[str, str], str]:
    """Where each event's target can be seen, keyed by ``(target_type, target_id)``: a
    few queries per page, whatever its length. Targets that no longer exist (or never
    had a page) are absent."""
    by_type = _ids_by_type(events)
    urls: dict[tuple[str, str], str] = {}
    if "conversation" in by_type:
        conversations = Conversation.objects.filter(
            pk__in=_uuids(by_type["conversation"]), workspace=workspace
        )
        for conversation_pk in conversations.values_list("pk", flat=True):
            urls[("conversation", str(conversation_pk))] = reverse(
                "dashboard:conversation_detail", args=[conversation_pk]
            )
    for kind, item_model in _ITEMS.items():
        items = _conversations_of(item_model, by_type.get(kind, set()), workspace)
        for pk, conversation_id in items.items():
            urls[(kind, pk)] = reverse(f"dashboard:{kind}_history", args=[conversation_id, pk])
    for kind, row_model in _IN_CONVERSATION.items():
        rows = _conversations_of(row_model, by_type.get(kind, set()), workspace)
        for pk, conversation_id in rows.items():
            urls[(kind, pk)] = reverse("dashboard:conversation_detail", args=[conversation_id])
    if "legal_hold" in by_type:
        held = LegalHold.objects.filter(
            workspace=workspace,
            pk__in=[int(i) for i in by_type["legal_hold"] if is_ascii_digits(i)],
        ).values_list("pk", flat=True)
        page = reverse(_LIST_PAGES["legal_hold"])
        for hold_pk in held:
            urls[("legal_hold", str(hold_pk))] = f"{page}#hold-{hold_pk}"
    for kind, name in _ROW_PAGES.items():
        for raw in by_type.get(kind, set()):
            if is_ascii_digits(raw):
                urls[(kind, raw)] = reverse(name, args=[int(raw)])
    for kind in ("redaction_policy", "api_key"):
        for raw in by_type.get(kind, set()):
            urls[(kind, raw)] = reverse(_LIST_PAGES[kind])
    return urls


def audit_originals(*, workspace: Workspace, events: Sequence[AuditEvent]) -> set[tuple[str, str]]:
    """``(target_type, target_id)`` of the events whose target has a restricted original
    kept: only those get a "Reveal original" link."""
    by_type = _ids_by_type(events)
    wanted = Q()
    for kind in ("message", "observation", "reflection"):
        ids = _uuids(by_type.get(kind, set()))
        if ids:
            wanted |= Q(target_type=kind, target_id__in=ids)
    if not wanted:
        return set()
    rows = RestrictedOriginal.objects.filter(wanted, workspace=workspace).values_list(
        "target_type", "target_id"
    )
    return {(target_type, str(target_id)) for target_type, target_id in rows}


def audit_actor_names(*, workspace: Workspace, events: Sequence[AuditEvent]) -> dict[str, str]:
    """``"user:12"`` → the user's name, ``"api_key:3"`` → the key's name."""
    user_ids = {e.actor_id for e in events if e.actor_type == AuditEvent.ActorType.USER}
    key_ids = {e.actor_id for e in events if e.actor_type == AuditEvent.ActorType.API_KEY}
    names: dict[str, str] = {}
    users = get_user_model().objects.filter(pk__in=[int(i) for i in user_ids if is_ascii_digits(i)])
    for pk, username in users.values_list("pk", "username"):
        names[f"user:{pk}"] = username
    keys = ApiKey.objects.filter(
        workspace=workspace, pk__in=[int(i) for i in key_ids if is_ascii_digits(i)]
    )
    for pk, name in keys.values_list("pk", "name"):
        names[f"api_key:{pk}"] = name
    return names


# --- end users -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class EndUserCoverage:
    end_user_id: str
    conversations: int  # conversations with this user_id in the workspace now
    similar: tuple[str, ...] = ()  # ids that differ only by case or surrounding spaces

    @property
    def known(self) -> bool:
        return self.conversations > 0

    @property
    def unknown_message(self) -> str:
        """What the hold and erasure forms say of an id no conversation carries."""
        message = (
            f"No conversation in this workspace has the end user id “{self.end_user_id}”: "
            "check the spelling."
        )
        if self.similar:
            message += " Did you mean " + " or ".join(f"“{s}”" for s in self.similar) + "?"
        return message


def end_user_coverage(*, workspace: Workspace, end_user_id: str) -> EndUserCoverage:
    """How many conversations an end user id covers, and, for an id no conversation
    carries, the ids that differ from it only by case (a likely typo)."""
    end_user_id = end_user_id.strip()
    count = Conversation.objects.filter(workspace=workspace, user_id=end_user_id).count()
    similar: tuple[str, ...] = ()
    if not count and end_user_id:
        similar = tuple(
            Conversation.objects.filter(workspace=workspace, user_id__iexact=end_user_id)
            .exclude(user_id=end_user_id)
            .values_list("user_id", flat=True)
            .distinct()
            .order_by("user_id")[:5]
        )
    return EndUserCoverage(end_user_id=end_user_id, conversations=count, similar=similar)


def erasure_receipt_event(*, erasure: ErasureRequest) -> AuditEvent | None:
    """The audit event that closed an erasure request (completed, refused or failed): it
    holds the hash of the deleted ids and is itself chained."""
    return (
        AuditEvent.objects.filter(
            workspace_id=erasure.workspace_id,
            target_type="erasure_request",
            target_id=str(erasure.pk),
            action__in=["erasure.complete", "erasure.refuse", "erasure.fail"],
        )
        .order_by("-sequence")
        .first()
    )


def open_erasures(*, workspace: Workspace) -> int:
    return ErasureRequest.objects.filter(
        workspace=workspace,
        status__in=[ErasureRequest.Status.PENDING, ErasureRequest.Status.RUNNING],
    ).count()


def conversation_titles(
    *, workspace: Workspace, ids: set[uuid.UUID]
) -> dict[uuid.UUID, Conversation]:
    """Conversations by id, for links that name them."""
    return {c.pk: c for c in Conversation.objects.filter(workspace=workspace, pk__in=ids)}


def finding_counts(*, workspace: Workspace) -> dict[str, int]:
    """Pending findings per entity type, for the review queue's counts and filter."""
    rows = (
        RedactionFinding.objects.filter(
            workspace=workspace, status=RedactionFinding.Status.PENDING_REVIEW
        )
        .values("entity_type")
        .annotate(n=Count("pk"))
        .order_by("entity_type")
    )
    return {row["entity_type"]: row["n"] for row in rows}


@dataclass(frozen=True)
class UnscannedMessage:
    """A message the PII scan could not read in time: where it is and how long it is,
    never what it says."""

    conversation: Conversation
    seq: int
    characters: int
    marked_at: datetime


def unscanned_messages(*, workspace: Workspace, limit: int = 50) -> list[UnscannedMessage]:
    """The messages marked ``UNSCANNED`` (governance/redaction/scan.py), newest first:
    masked whole on every page and held out of memory until a person deals with them."""
    marks = list(
        RedactionFinding.objects.filter(
            workspace=workspace,
            target_type=RedactionFinding.TargetType.MESSAGE,
            entity_type=UNSCANNED,
            status=RedactionFinding.Status.DETECTED,
        ).order_by("-created_at", "-pk")[:limit]
    )
    messages = {
        m.pk: m
        for m in Message.objects.filter(pk__in=[f.target_id for f in marks])
        .select_related("conversation")
        .defer("content", "metadata")
    }
    return [
        UnscannedMessage(
            conversation=messages[f.target_id].conversation,
            seq=messages[f.target_id].seq,
            characters=f.end - f.start,
            marked_at=f.created_at,
        )
        for f in marks
        if f.target_id in messages
    ]
