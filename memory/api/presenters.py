"""What turns rows into the bodies the agent API and the MCP tools answer with.

Each shape here is written once, as a DRF serializer that both renders the body and
documents it in the OpenAPI document. The shapes a context carries (messages, pins,
observations, reflections) are the exception: they are rendered by hand in
``memory/wire.py`` on the context's hot path and declared in ``memory/api_schema.py``
(which says why, with the figure).

Field names are camelCase, as the NAMS clients expect. Dates are written as
``datetime.isoformat()`` writes them (``+00:00``, where DRF would write ``Z``) and blank
text as null, as the clients have always been served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.utils import timezone
from rest_framework import serializers

from memory import selectors
from memory.engines.base import FIDELITIES
from memory.models import Conversation, Observation, ObserverRun, Reflection
from memory.wire import observation_to_wire, reflection_to_wire
from tenancy.models import APPROVAL_MODES, Workspace

# --- fields as the wire writes them --------------------------------------------------------


class IsoDateTimeField(serializers.DateTimeField):
    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class TextOrNullField(serializers.CharField):
    """Text, or null where it is blank."""

    def to_representation(self, value: Any) -> Any:
        return str(value) or None


class ComputedChoiceField(serializers.ChoiceField):
    """A value the row does not hold as one attribute: ``compute(row)``."""

    def __init__(self, compute: Callable[[Any], Any], **kwargs: Any) -> None:
        self.compute = compute
        super().__init__(source="*", **kwargs)

    def to_representation(self, value: Any) -> Any:
        return self.compute(value)


# --- conversations ---------------------------------------------------------------------------


class ConversationOut(serializers.Serializer):
    # Renders a ``selectors.ConversationSummary``.
    id = serializers.UUIDField(source="conversation.id")
    userId = TextOrNullField(source="conversation.user_id", allow_null=True)
    workspaceId = serializers.UUIDField(source="conversation.workspace_id")
    title = TextOrNullField(source="conversation.title", allow_null=True)
    metadata = serializers.DictField(source="conversation.metadata")
    # The messages stored now: retention and erasure delete some, last_seq never goes back.
    messageCount = serializers.IntegerField(source="message_count")
    createdAt = IsoDateTimeField(source="conversation.created_at")
    updatedAt = IsoDateTimeField(source="conversation.updated_at")
    piiFound = serializers.BooleanField(
        source="pii_found",
        help_text="Personal data was detected in this conversation (in any tier, redacted "
        "or not): the scan of its messages, or the redaction of its memory.",
    )


class ConversationPageOut(serializers.Serializer):
    conversations = ConversationOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


def new_conversation_to_wire(conversation: Conversation) -> dict[str, Any]:
    # A new conversation holds nothing yet.
    summary = selectors.ConversationSummary(conversation, message_count=0, pii_found=False)
    return ConversationOut(summary).data


# --- observations and reflections --------------------------------------------------------------


def observations_to_wire(
    conversation: Conversation, observations: Iterable[Observation]
) -> list[dict[str, Any]]:
    observations = list(observations)
    deleted = selectors.deleted_source_ids(conversation=conversation, observations=observations)
    today = timezone.now().date()
    return [observation_to_wire(o, today=today, deleted_sources=deleted) for o in observations]


def reflections_to_wire(reflections: Iterable[Reflection]) -> list[dict[str, Any]]:
    today = timezone.now().date()
    return [reflection_to_wire(r, today=today) for r in reflections]


class MemoryVersionOut(serializers.Serializer):
    # Renders a ``selectors.MemoryChange``.
    version = serializers.IntegerField()
    text = serializers.CharField()
    priority = serializers.CharField()
    change = serializers.CharField()
    reason = serializers.CharField()
    changedBy = serializers.CharField(source="changed_by")
    changedAt = IsoDateTimeField(source="changed_at")
    diff = serializers.CharField(help_text="Unified diff to the next version's text.")


def versions_to_wire(changes: list[selectors.MemoryChange]) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], MemoryVersionOut(changes, many=True).data)


# --- escalations -------------------------------------------------------------------------------


class EscalationOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField(source="conversation_id")
    reason = serializers.CharField()
    metadata = serializers.DictField()
    status = serializers.ChoiceField(choices=["open", "resolved"])
    createdBy = serializers.CharField(
        source="created_by", help_text="'api_key:<id>' or 'user:<id>'."
    )
    createdAt = IsoDateTimeField(source="created_at")
    resolvedBy = TextOrNullField(source="resolved_by", allow_null=True)
    resolvedAt = IsoDateTimeField(source="resolved_at", allow_null=True)
    resolutionNote = TextOrNullField(
        source="resolution_note",
        allow_null=True,
        help_text="What the person who resolved it wrote.",
    )


class EscalationListOut(serializers.Serializer):
    escalations = EscalationOut(many=True)


# --- runs ----------------------------------------------------------------------------------------


def _run_kind(run: Any) -> str:
    return "observer" if isinstance(run, ObserverRun) else "reflector"


OBSERVER_RUN_FIELDS = ("windowStartSeq", "windowEndSeq", "currentTask", "suggestedResponse")
REFLECTOR_RUN_FIELDS = ("generation",)


class RunOut(serializers.Serializer):
    id = serializers.UUIDField()
    kind = ComputedChoiceField(_run_kind, choices=["observer", "reflector"])
    conversationId = serializers.UUIDField(source="conversation_id")
    status = serializers.ChoiceField(
        source="state",
        choices=["queued", "running", "retrying", "succeeded", "failed", "cancelled"],
        help_text="queued: waiting for a worker; running; retrying: an attempt failed with "
        "a retryable error (error says how) and the next is at nextAttemptAt; then "
        "succeeded, failed (after the last attempt, or at once for an error a retry "
        "cannot fix) or cancelled.",
    )
    trigger = serializers.ChoiceField(choices=["threshold", "manual", "sweeper", "correction"])
    engine = TextOrNullField(allow_null=True)
    model = TextOrNullField(source="model_name", allow_null=True)
    promptVersion = TextOrNullField(source="prompt_version", allow_null=True)
    tokensIn = serializers.IntegerField(source="tokens_in")
    tokensOut = serializers.IntegerField(source="tokens_out")
    itemsIn = serializers.IntegerField(source="items_in")
    itemsOut = serializers.IntegerField(source="items_out")
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    attempts = serializers.IntegerField(help_text="Attempts started so far.")
    maxAttempts = serializers.IntegerField(
        source="MAX_ATTEMPTS", help_text="Attempts before a run fails."
    )
    nextAttemptAt = IsoDateTimeField(
        source="next_attempt_at",
        allow_null=True,
        help_text="When a retrying run is tried again.",
    )
    error = TextOrNullField(
        allow_null=True,
        help_text="The last error in words (a status code, a timeout, a rule the output "
        "broke), never the content.",
    )
    createdAt = IsoDateTimeField(source="created_at")
    startedAt = IsoDateTimeField(source="started_at", allow_null=True)
    finishedAt = IsoDateTimeField(source="finished_at", allow_null=True)
    # Observer runs only.
    windowStartSeq = serializers.IntegerField(
        source="window_start_seq", required=False, allow_null=True
    )
    windowEndSeq = serializers.IntegerField(
        source="window_end_seq", required=False, allow_null=True
    )
    currentTask = TextOrNullField(source="current_task", required=False, allow_null=True)
    suggestedResponse = TextOrNullField(
        source="suggested_response", required=False, allow_null=True
    )
    # Reflector runs only.
    generation = serializers.IntegerField(required=False, allow_null=True)

    def to_representation(self, instance: Any) -> Any:
        body = super().to_representation(instance)
        # A field the other kind of run has is left out, not sent as null.
        for name in (
            REFLECTOR_RUN_FIELDS if isinstance(instance, ObserverRun) else OBSERVER_RUN_FIELDS
        ):
            body.pop(name, None)
        return body


# --- the workspace -------------------------------------------------------------------------


def _fidelity_source(workspace: Workspace) -> str:
    return "workspace" if workspace.fidelity else "default"


def _fidelity_default(workspace: Workspace) -> str:
    return settings.MEMDESK_OBSERVER_FIDELITY


class FidelityLevelsField(serializers.ListField):
    def get_attribute(self, instance: Any) -> list[str]:
        return list(FIDELITIES)


class WorkspaceSettingsOut(serializers.Serializer):
    workspaceId = serializers.UUIDField(source="id")
    fidelity = serializers.ChoiceField(
        source="effective_fidelity",
        choices=FIDELITIES,
        help_text="How much detail the Observer keeps, in force now: compact (the smallest "
        "memory, the gist), balanced, or detailed (more of what was said, the assistant's "
        "answers included; a bigger memory).",
    )
    fidelitySource = ComputedChoiceField(
        _fidelity_source,
        choices=["workspace", "default"],
        help_text="workspace: chosen for this workspace; default: follows fidelityDefault.",
    )
    fidelityDefault = ComputedChoiceField(
        _fidelity_default,
        choices=FIDELITIES,
        help_text="The server's default (MEMDESK_OBSERVER_FIDELITY).",
    )
    fidelityLevels = FidelityLevelsField(
        child=serializers.ChoiceField(choices=FIDELITIES),
        help_text="Every level, from the smallest memory to the most detailed.",
    )
    observerThreshold = serializers.IntegerField(
        source="effective_observer_threshold",
        help_text="Unobserved message tokens that trigger the Observer, in force now.",
    )
    reflectorThreshold = serializers.IntegerField(
        source="effective_reflector_threshold",
        help_text="Active observation tokens that trigger the Reflector, in force now.",
    )
    engine = serializers.CharField(
        source="effective_engine", help_text="The Observer and Reflector engine in force."
    )
    contextMaxTokens = serializers.IntegerField(
        source="context_max_tokens",
        allow_null=True,
        help_text="The token budget of a context read that names no max_tokens; null: none.",
    )
    approval = serializers.ChoiceField(
        choices=APPROVAL_MODES,
        help_text="Which new reflections wait for a person before agents are served them: "
        "off, reflections (every one), flagged (those the checks flag).",
    )
    approvalByTag = serializers.DictField(
        source="approval_by_tag",
        child=serializers.ChoiceField(choices=APPROVAL_MODES),
        help_text="A mode per conversation tag, added to the workspace's.",
    )


# --- reasoning memory ----------------------------------------------------------------------------


class ReasoningStepOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField(source="conversation_id")
    stepNumber = serializers.IntegerField(
        source="step_number", help_text="1 for the conversation's first step."
    )
    reasoning = serializers.CharField(allow_blank=True)
    actionTaken = serializers.CharField(source="action_taken", allow_blank=True)
    result = TextOrNullField(allow_null=True)
    afterSeq = serializers.IntegerField(
        source="after_seq",
        help_text="The seq of the last message before the step (0: before any message).",
    )
    metadata = serializers.DictField()
    createdAt = IsoDateTimeField(source="created_at")


class ReasoningStepListOut(serializers.Serializer):
    steps = ReasoningStepOut(many=True)


class ToolCallOut(serializers.Serializer):
    id = serializers.UUIDField()
    conversationId = serializers.UUIDField(source="conversation_id")
    stepId = serializers.UUIDField(source="step_id", allow_null=True)
    toolName = serializers.CharField(source="tool_name")
    input = serializers.CharField(allow_blank=True, help_text="As sent: JSON text or plain text.")
    output = TextOrNullField(allow_null=True, help_text="As sent: JSON text or plain text.")
    status = serializers.ChoiceField(
        choices=["pending", "success", "failure", "error", "timeout", "cancelled"]
    )
    durationMs = serializers.IntegerField(source="duration_ms", allow_null=True)
    error = TextOrNullField(allow_null=True)
    afterSeq = serializers.IntegerField(
        source="after_seq",
        help_text="The seq of the last message before the call (0: before any message).",
    )
    metadata = serializers.DictField()
    createdAt = IsoDateTimeField(source="created_at")


class ReasoningTraceOut(serializers.Serializer):
    conversationId = serializers.UUIDField()
    steps = ReasoningStepOut(many=True)
    toolCalls = ToolCallOut(many=True)
