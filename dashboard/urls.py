from __future__ import annotations

from django.urls import include, path

from dashboard import escalation_views, member_views, views

app_name = "dashboard"

conversation = "conversations/<uuid:conversation_id>/"
observation = conversation + "observations/<uuid:item_id>/"
reflection = conversation + "reflections/<uuid:item_id>/"
OBSERVATION = {"kind": "observation"}
REFLECTION = {"kind": "reflection"}

urlpatterns = [
    path("conversations/", views.conversation_list, name="conversation_list"),
    path(conversation, views.conversation_detail, name="conversation_detail"),
    path(conversation + "context/", views.conversation_context, name="conversation_context"),
    path(conversation + "transcript", views.conversation_transcript, name="transcript"),
    path(conversation + "messages/", views.message_list, name="message_list"),
    path(
        conversation + "messages/<uuid:message_id>/reveal/",
        views.message_reveal,
        name="message_reveal",
    ),
    path(conversation + "observations/", views.observation_list, name="observation_list"),
    path(conversation + "observations/add/", views.observation_add, name="observation_add"),
    path(observation + "edit/", views.memory_edit, OBSERVATION, name="observation_edit"),
    path(observation + "delete/", views.memory_delete, OBSERVATION, name="observation_delete"),
    path(observation + "history/", views.memory_history, OBSERVATION, name="observation_history"),
    path(observation + "revert/", views.memory_revert, OBSERVATION, name="observation_revert"),
    path(conversation + "reflections/", views.reflection_list, name="reflection_list"),
    path(reflection + "edit/", views.memory_edit, REFLECTION, name="reflection_edit"),
    path(reflection + "delete/", views.memory_delete, REFLECTION, name="reflection_delete"),
    path(reflection + "history/", views.memory_history, REFLECTION, name="reflection_history"),
    path(reflection + "revert/", views.memory_revert, REFLECTION, name="reflection_revert"),
    path(conversation + "messages/<uuid:message_id>/pin/", views.pin_add, name="pin_add"),
    path(conversation + "pins/<uuid:pin_id>/unpin/", views.pin_delete, name="pin_delete"),
    path(conversation + "observe/", views.run_start, {"action": "observe"}, name="observe"),
    path(conversation + "reflect/", views.run_start, {"action": "reflect"}, name="reflect"),
    path(conversation + "runs/<str:kind>/<uuid:run_id>/", views.run_status, name="run_status"),
    path(
        conversation + "runs/<str:kind>/<uuid:run_id>/cancel/",
        views.run_cancel,
        name="run_cancel",
    ),
    path("search/", views.memory_search, name="search"),
    path("users/", views.end_user, name="end_user_lookup"),
    path("users/<path:end_user_id>/", views.end_user, name="end_user"),
    path("metrics/", views.metrics, name="metrics"),
    path("escalations/", escalation_views.escalation_list, name="escalation_list"),
    path(
        "escalations/<uuid:escalation_id>/resolve/",
        escalation_views.escalation_resolve,
        name="escalation_resolve",
    ),
    path("settings/api-keys/", views.api_keys, name="api_keys"),
    path("settings/api-keys/<int:api_key_id>/revoke/", views.api_key_revoke, name="api_key_revoke"),
    path("settings/memory/", views.memory_settings, name="memory_settings"),
    path("settings/members/", member_views.members, name="members"),
    path(
        "settings/members/<int:membership_id>/role/", member_views.member_role, name="member_role"
    ),
    path(
        "settings/members/<int:membership_id>/remove/",
        member_views.member_remove,
        name="member_remove",
    ),
    path("workspace/", views.workspace_switch, name="workspace_switch"),
    path("compliance/", include("dashboard.compliance_urls")),
]
