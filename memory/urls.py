from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from memory.api.context import ContextGetApi
from memory.api.conversations import ConversationDetailApi, ConversationListCreateApi
from memory.api.escalations import EscalationListCreateApi
from memory.api.messages import MessageBulkCreateApi, MessageListCreateApi
from memory.api.metrics import MetricsApi
from memory.api.observations import (
    ObservationDetailApi,
    ObservationHistoryApi,
    ObservationListCreateApi,
    ObservationRevertApi,
)
from memory.api.pins import PinDetailApi, PinListCreateApi
from memory.api.reasoning import ReasoningStepCreateApi, ReasoningTraceApi, ToolCallCreateApi
from memory.api.reflections import (
    ReflectionDetailApi,
    ReflectionHistoryApi,
    ReflectionListApi,
    ReflectionRevertApi,
)
from memory.api.runs import (
    ExtractionStatusApi,
    ObserveNowApi,
    ReflectNowApi,
    RunCancelApi,
    RunDetailApi,
)
from memory.api.search import MessageSearchApi, WorkspaceSearchApi
from memory.api.workspace import WorkspaceSettingsApi

conversation = "conversations/<str:conversation_id>"
observation = f"{conversation}/observations/<str:observation_id>"
reflection = f"{conversation}/reflections/<str:reflection_id>"

urlpatterns = [
    path("conversations", ConversationListCreateApi.as_view()),
    path(conversation, ConversationDetailApi.as_view()),
    path(f"{conversation}/messages", MessageListCreateApi.as_view()),
    path(f"{conversation}/messages/bulk", MessageBulkCreateApi.as_view()),
    path(f"{conversation}/search", MessageSearchApi.as_view()),
    path("search", WorkspaceSearchApi.as_view()),
    path(f"{conversation}/context", ContextGetApi.as_view()),
    path(f"{conversation}/observations", ObservationListCreateApi.as_view()),
    path(observation, ObservationDetailApi.as_view()),
    path(f"{observation}/history", ObservationHistoryApi.as_view()),
    path(f"{observation}/revert", ObservationRevertApi.as_view()),
    path(f"{conversation}/reflections", ReflectionListApi.as_view()),
    path(reflection, ReflectionDetailApi.as_view()),
    path(f"{reflection}/history", ReflectionHistoryApi.as_view()),
    path(f"{reflection}/revert", ReflectionRevertApi.as_view()),
    path(f"{conversation}/pins", PinListCreateApi.as_view()),
    path(f"{conversation}/pins/<str:pin_id>", PinDetailApi.as_view()),
    path(f"{conversation}/escalations", EscalationListCreateApi.as_view()),
    path(f"{conversation}/extraction-status", ExtractionStatusApi.as_view()),
    path(f"{conversation}/observe", ObserveNowApi.as_view()),
    path(f"{conversation}/reflect", ReflectNowApi.as_view()),
    path("runs/<str:run_id>", RunDetailApi.as_view()),
    path("runs/<str:run_id>/cancel", RunCancelApi.as_view()),
    path("reasoning/steps", ReasoningStepCreateApi.as_view()),
    path("reasoning/tool-calls", ToolCallCreateApi.as_view()),
    path("reasoning/trace/<str:conversation_id>", ReasoningTraceApi.as_view()),
    path("metrics", MetricsApi.as_view()),
    path("workspace/settings", WorkspaceSettingsApi.as_view()),
    path(
        "schema/",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="schema",
    ),
    path(
        "docs/",
        # Its script is served from docs/?script, not inline: the Content-Security-Policy.
        SpectacularSwaggerSplitView.as_view(
            url_name="schema", authentication_classes=[], permission_classes=[]
        ),
        name="docs",
    ),
]
