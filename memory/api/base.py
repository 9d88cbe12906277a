"""What every memory route of the agent API shares: the conversation in the caller's
workspace, idempotent writes, and memory as an API key may read it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request
from rest_framework.response import Response

from governance.redaction.gates import reidentifier_for_api
from memory import selectors
from memory.context.tiers import Reidentifies, readable_items
from memory.models import Conversation, Message, Observation, Pin, Reflection
from memory.services.idempotency import Reply, idempotent_write, request_fingerprint
from tenancy.api_base import ApiView
from tenancy.models import ApiKey

IDEMPOTENCY_HEADER = OpenApiParameter(
    "Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    description="Repeat a write safely: the same key and body replay the first response; "
    "the same key with another body is 409. A response is replayed for 24 hours (the "
    "server's MEMDESK_IDEMPOTENCY_TTL_HOURS) and only while what the write stored is still "
    "stored; after that the key starts a new request.",
)


MemoryRowT = TypeVar("MemoryRowT", Message, Observation, Reflection, Pin)


class MemoryApi(ApiView):
    # Base of the memory routes: the conversation in the caller's workspace, idempotent
    # writes, and memory as API keys may read it (pseudonyms, or their values when the
    # workspace's redaction policy lets agents see re-identified memory).

    _reidentifier: Reidentifies | None
    _reidentification_allowed: bool
    _redact_at_ingest: bool

    def conversation(self, conversation_id: str) -> Conversation:
        # One query for the conversation, the workspace (authentication comes from the
        # cache without it), which then is the view's workspace too, and what its
        # redaction policy says of re-identification and of redaction at ingest.
        conversation, flags = selectors.conversation_and_policy_flags(
            workspace_id=self.api_key.workspace_id, conversation_id=conversation_id
        )
        if not ApiKey.workspace.is_cached(self.api_key):
            self.api_key.workspace = conversation.workspace
        self._reidentification_allowed = flags.agents_see_reidentified
        self._redact_at_ingest = flags.redact_at_ingest
        return conversation

    def reidentifier(self) -> Reidentifies | None:
        if not hasattr(self, "_reidentifier"):
            self._reidentifier = reidentifier_for_api(
                workspace_id=self.workspace.pk,
                allowed=getattr(self, "_reidentification_allowed", None),
            )
        return self._reidentifier

    def readable(self, rows: Iterable[MemoryRowT]) -> list[MemoryRowT]:
        return readable_items(self.reidentifier(), rows)

    def idempotent(self, request: Request, write: Callable[[], Reply]) -> Response:
        key = request.headers.get("Idempotency-Key")
        # Canonical JSON of a 100-message body is not free; only a keyed write needs it.
        fingerprint = (
            request_fingerprint(method=request.method or "", path=request.path, body=request.data)
            if key
            else ""
        )
        status, body, replayed = idempotent_write(
            workspace=self.workspace, key=key, fingerprint=fingerprint, write=write
        )
        response = Response(body, status=status)
        if replayed:
            response["Idempotent-Replayed"] = "true"
        return response


# The words the observation and the reflection routes share in the OpenAPI document.
EDIT_DESCRIPTION = "Edit the text (`content`, or `text`), priority, event date or tags. "
HISTORY_DESCRIPTION = (
    "Earlier versions, oldest first, each with the reason it changed and a unified diff to "
    "the version after it."
)
REVERT_DESCRIPTION = (
    "Restore an earlier version. `reason` is required; the revert is itself a new version "
    "and is audited."
)
REASON_PARAMETER = OpenApiParameter("reason", str, description="Required (or in the body).")
