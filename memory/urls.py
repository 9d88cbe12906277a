from __future__ import annotations

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from memory import api

conversation = "conversations/<str:conversation_id>"
observation = f"{conversation}/observations/<str:observation_id>"
reflection = f"{conversation}/reflections/<str:reflection_id>"

urlpatterns = [
    path("conversations", api.ConversationListCreateApi.as_view()),
    path(conversation, api.ConversationDetailApi.as_view()),
    path(f"{conversation}/messages", api.MessageListCreateApi.as_view()),
    path(f"{conversation}/messages/bulk", api.MessageBulkCreateApi.as_view()),
    path(f"{conversation}/search", api.MessageSearchApi.as_view()),
    path(f"{conversation}/context", api.ContextGetApi.as_view()),
    path(f"{conversation}/observations", api.ObservationListCreateApi.as_view()),
    path(observation, api.ObservationDetailApi.as_view()),
    path(f"{observation}/history", api.ObservationHistoryApi.as_view()),
    path(f"{observation}/revert", api.ObservationRevertApi.as_view()),
    path(f"{conversation}/reflections", api.ReflectionListApi.as_view()),
    path(reflection, api.ReflectionDetailApi.as_view()),
    path(f"{reflection}/history", api.ReflectionHistoryApi.as_view()),
    path(f"{reflection}/revert", api.ReflectionRevertApi.as_view()),
    path(f"{conversation}/pins", api.PinListCreateApi.as_view()),
    path(f"{conversation}/pins/<str:pin_id>", api.PinDetailApi.as_view()),
    path(f"{conversation}/escalations", api.EscalationListCreateApi.as_view()),
    path(f"{conversation}/extraction-status", api.ExtractionStatusApi.as_view()),
    path(f"{conversation}/observe", api.ObserveNowApi.as_view()),
    path(f"{conversation}/reflect", api.ReflectNowApi.as_view()),
    path("runs/<str:run_id>", api.RunDetailApi.as_view()),
    path("runs/<str:run_id>/cancel", api.RunCancelApi.as_view()),
    path("reasoning/steps", api.ReasoningStepCreateApi.as_view()),
    path("reasoning/tool-calls", api.ToolCallCreateApi.as_view()),
    path("reasoning/trace/<str:conversation_id>", api.ReasoningTraceApi.as_view()),
    path("metrics", api.MetricsApi.as_view()),
    path("workspace/settings", api.WorkspaceSettingsApi.as_view()),
    path(
        "schema/",
        SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="schema",
    ),
    path(
        "docs/",
        SpectacularSwaggerView.as_view(
            url_name="schema", authentication_classes=[], permission_classes=[]
        ),
        name="docs",
    ),
]
