"""Reads of the governance app."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any, TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Count, Model, Q, QuerySet

from core.errors import MemdeskError
from core.paging import keyset_page, parse_pk, parse_uuid
from governance.audit.filters import AuditEventFilter
from governance.models import (
    REDACTION_TARGETS,
    AuditEvent,
    ContextManifest,
    ContextRead,
    ErasureRequest,
    LegalHold,
    Pseudonym,
    RedactionFinding,
    RedactionPolicy,
    RescanRun,
    RetentionPolicy,
    RetentionSweep,
)
from memory.models import Conversation
from tenancy.models import Workspace

ModelT = TypeVar("ModelT", bound=Model)


def audit_event_list(
    *, filters: AuditEventFilter, cursor: str | None, limit: int
) -> tuple[list[AuditEvent], str | None]:
    """The workspace's events that ``filters`` (built for it) let through, newest first,
    keyset-paged on the chain sequence."""
    page = keyset_page(filters.qs, keys=("sequence",), limit=limit, cursor=cursor)
    return page.items, page.next_cursor


def audit_export_lines(*, filters: AuditEventFilter, context_reads: bool = False) -> Iterator[str]:
    """The workspace's events that ``filters`` let through as JSON Lines, in chain order,
    streamed from the database in chunks; with ``context_reads``, then the read ledger's
    rows under the filters that apply to them, one ``{"contextRead": {...}}`` per line,
    in the order they were served."""
    events = filters.qs.order_by("sequence").iterator(chunk_size=1000)
    for event in events:
        yield json.dumps(event.as_dict(), cls=DjangoJSONEncoder) + "\n"
    if context_reads:
        for read in filters.context_reads().iterator(chunk_size=1000):
            yield json.dumps({"contextRead": read.as_dict()}) + "\n"


# --- retention, legal holds, erasure ----------------------------------------------------------


def _get_in_workspace(
    model: type[ModelT], workspace: Workspace, raw_id: object, *, field: str, noun: str
) -> ModelT:
    """One row of ``model`` by its id, within the workspace: another workspace's row is
    "not found", exactly like a row that does not exist."""
    pk = parse_pk(raw_id, field=field)
    try:
        return model._default_manager.get(pk=pk, workspace=workspace)
    except ObjectDoesNotExist:
        raise MemdeskError(
            "not_found", f"No {noun} with this id in this workspace.", status_code=404
        ) from None


def active_holds(*, workspace_id: uuid.UUID) -> QuerySet[LegalHold]:
    return LegalHold.objects.filter(workspace_id=workspace_id, released_at__isnull=True)


def active_hold_for_conversation(*, conversation: Conversation) -> LegalHold | None:
    """The oldest active hold that covers the conversation: one placed on it, or one on
    its end user (which covers every conversation with that user_id, including ones
    created after the hold was placed)."""
    covers = Q(conversation_id=conversation.pk)
    if conversation.user_id:
        covers |= Q(end_user_id=conversation.user_id)
    return (
        active_holds(workspace_id=conversation.workspace_id)
        .filter(covers)
        .order_by("placed_at", "pk")
        .first()
    )


def active_hold_sets(*, workspace_id: uuid.UUID) -> tuple[set[str], set[str]]:
    """(held conversation ids as strings, held end-user ids) of a workspace. Holds are
    few (each one is a person's decision), so they are read whole."""
    conversation_ids: set[str] = set()
    end_user_ids: set[str] = set()
    for conversation_id, end_user_id in active_holds(workspace_id=workspace_id).values_list(
        "conversation_id", "end_user_id"
    ):
        if conversation_id is not None:
            conversation_ids.add(str(conversation_id))
        elif end_user_id:
            end_user_ids.add(end_user_id)
    return conversation_ids, end_user_ids


def holds_covering_end_user(*, workspace_id: uuid.UUID, end_user_id: str) -> list[LegalHold]:
    """Active holds that block erasing this end user: on the user, or on any one of the
    user's conversations."""
    return list(
        active_holds(workspace_id=workspace_id)
        .filter(
            Q(end_user_id=end_user_id)
            | Q(
                conversation__user_id=end_user_id,
                conversation__workspace_id=workspace_id,
            )
        )
        .order_by("placed_at", "pk")
    )


def legal_hold_refusal(hold: LegalHold) -> str:
    """Why a deletion is refused, in one sentence that names the hold (not its reason,
    which may name a legal matter; an admin reads that from the hold itself)."""
    target = (
        f"on conversation {hold.conversation_id}"
        if hold.conversation_id
        else f"on end user {hold.end_user_id!r}"
    )
    return (
        f"Legal hold {hold.pk} ({target}, placed {hold.placed_at:%Y-%m-%d %H:%M} UTC) covers "
        "this data; nothing it covers can be deleted until the hold is released."
    )


def legal_hold_get(*, workspace: Workspace, hold_id: object) -> LegalHold:
    return _get_in_workspace(LegalHold, workspace, hold_id, field="hold_id", noun="legal hold")


def legal_hold_list(
    *,
    workspace: Workspace,
    active: bool | None = None,
    conversation_id: uuid.UUID | None = None,
    end_user_id: str | None = None,
) -> QuerySet[LegalHold]:
    holds = LegalHold.objects.filter(workspace=workspace)
    if active is not None:
        holds = holds.filter(released_at__isnull=active)
    if conversation_id is not None:
        holds = holds.filter(conversation_id=conversation_id)
    if end_user_id:
        holds = holds.filter(end_user_id=end_user_id)
    return holds.order_by("-placed_at", "-pk")


def retention_policy_list(*, workspace: Workspace) -> QuerySet[RetentionPolicy]:
    return RetentionPolicy.objects.filter(workspace=workspace).order_by("conversation_tag", "name")


def retention_policy_get(*, workspace: Workspace, policy_id: object) -> RetentionPolicy:
    return _get_in_workspace(
        RetentionPolicy, workspace, policy_id, field="policy_id", noun="retention policy"
    )


def retention_sweep_get(*, workspace: Workspace, sweep_id: object) -> RetentionSweep:
    return _get_in_workspace(
        RetentionSweep, workspace, sweep_id, field="sweep_id", noun="retention sweep"
    )


def retention_sweep_list(*, workspace: Workspace, limit: int) -> list[RetentionSweep]:
    return list(RetentionSweep.objects.filter(workspace=workspace).order_by("-pk")[:limit])


def erasure_request_get(*, workspace: Workspace, request_id: object) -> ErasureRequest:
    return _get_in_workspace(
        ErasureRequest, workspace, request_id, field="request_id", noun="erasure request"
    )


def erasure_request_list(*, workspace: Workspace, limit: int) -> list[ErasureRequest]:
    return list(ErasureRequest.objects.filter(workspace=workspace).order_by("-pk")[:limit])


def rescan_run_get(*, workspace: Workspace, run_id: object) -> RescanRun:
    return _get_in_workspace(RescanRun, workspace, run_id, field="run_id", noun="re-scan")


def rescan_run_list(*, workspace: Workspace, limit: int) -> list[RescanRun]:
    return list(RescanRun.objects.filter(workspace=workspace).order_by("-pk")[:limit])


# --- redaction --------------------------------------------------------------------------------


def redaction_policy_or_defaults(*, workspace_id: uuid.UUID) -> RedactionPolicy:
    """The stored policy, or an unsaved one with the defaults (reads never create it)."""
    return RedactionPolicy.objects.filter(workspace_id=workspace_id).first() or RedactionPolicy(
        workspace_id=workspace_id
    )


def pseudonym_list(
    *, workspace_id: uuid.UUID, entity_type: str = "", limit: int = 50
) -> list[Pseudonym]:
    """The workspace's pseudonyms, newest first, each with ``sighting_count`` (how many
    raw objects hold its value); never the value."""
    rows = Pseudonym.objects.filter(workspace_id=workspace_id)
    if entity_type:
        rows = rows.filter(entity_type=entity_type)
    return list(
        rows.annotate(sighting_count=Count("sightings")).order_by("-created_at", "-pk")[:limit]
    )


def redaction_finding_list(
    *,
    workspace_id: uuid.UUID,
    status: str | None,
    conversation_id: uuid.UUID | str | None,
    limit: int,
    cursor: str | None,
    entity_type: str = "",
    min_score: float | None = None,
    max_score: float | None = None,
) -> tuple[list[RedactionFinding], str | None]:
    """Newest first, keyset-paged on id; ``cursor`` is the previous page's next_cursor.
    ``min_score`` is inclusive, ``max_score`` exclusive, as the review band is."""
    findings = RedactionFinding.objects.filter(workspace_id=workspace_id).select_related(
        "pseudonym"
    )
    if status:
        if status not in RedactionFinding.Status.values:
            raise MemdeskError(
                "invalid_status",
                f"status must be one of {', '.join(RedactionFinding.Status.values)}; "
                f"got {status!r}.",
                field="status",
            )
        findings = findings.filter(status=status)
    if conversation_id:
        findings = findings.filter(conversation_id=conversation_id)
    if entity_type:
        findings = findings.filter(entity_type=entity_type)
    if min_score is not None:
        findings = findings.filter(score__gte=min_score)
    if max_score is not None:
        findings = findings.filter(score__lt=max_score)
    page = keyset_page(findings, keys=("id",), limit=limit, cursor=cursor)
    return page.items, page.next_cursor


def redaction_finding_get(*, workspace_id: uuid.UUID, finding_id: object) -> RedactionFinding:
    pk = parse_pk(finding_id, field="finding_id")
    finding = RedactionFinding.objects.filter(workspace_id=workspace_id, pk=pk).first()
    if finding is None:
        raise MemdeskError(
            "not_found", "No redaction finding with this id in this workspace.", status_code=404
        )
    return finding


def redaction_finding_texts(
    *, workspace_id: uuid.UUID, findings: list[RedactionFinding]
) -> dict[tuple[str, str], str]:
    """The current text of each finding's target, keyed by ``(target_type, str(target_id))``:
    one query per target type; a target that is gone or outside the workspace is absent."""
    wanted: dict[str, set[object]] = {}
    for finding in findings:
        wanted.setdefault(finding.target_type, set()).add(finding.target_id)
    texts: dict[tuple[str, str], str] = {}
    for target_type, ids in wanted.items():
        model, field = REDACTION_TARGETS[target_type]
        rows = model.objects.filter(pk__in=ids, conversation__workspace_id=workspace_id)
        for pk, text in rows.values_list("pk", field):
            texts[(target_type, str(pk))] = text
    return texts


def context_reads_list(
    *, conversation: Conversation, cursor: str | None, limit: int
) -> tuple[list[ContextRead], str | None]:
    """The read ledger's rows of a conversation, the latest served first, keyset-paged."""
    reads = ContextRead.objects.filter(conversation=conversation)
    page = keyset_page(reads, keys=("served_at", "id"), limit=limit, cursor=cursor)
    return page.items, page.next_cursor


def context_read_get(*, conversation: Conversation, read_id: object) -> ContextRead:
    """One of a conversation's ledger rows (another's, or none: not found)."""
    pk = parse_uuid(read_id, field="read")
    try:
        return ContextRead.objects.get(pk=pk, conversation=conversation)
    except ContextRead.DoesNotExist:
        raise MemdeskError(
            "not_found", "No such context read in this conversation.", status_code=404
        ) from None


def context_read_at(*, conversation: Conversation, when: datetime) -> ContextRead | None:
    """The conversation's latest read served at or before ``when``."""
    return (
        ContextRead.objects.filter(conversation=conversation, served_at__lte=when)
        .order_by("-served_at", "-writer_seq")
        .first()
    )


def context_manifest_of(*, read: ContextRead) -> dict[str, Any] | None:
    """The manifest of the memory version ``read`` was rendered from (None: not noted)."""
    return (
        ContextManifest.objects.filter(
            conversation_id=read.conversation_id, memory_version=read.memory_version
        )
        .values_list("manifest", flat=True)
        .first()
    )
