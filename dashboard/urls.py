from __future__ import annotations

from django.urls import include, path

from dashboard.views import (
    approvals,
    context,
    conversations,
    end_users,
    escalations,
    members,
    metrics,
    note_history,
    notes,
    pins,
    runs,
    search,
    served,
    settings,
    transcript,
)

app_name = "dashboard"

conversation = "conversations/<uuid:conversation_id>/"
observation = conversation + "observations/<uuid:item_id>/"
reflection = conversation + "reflections/<uuid:item_id>/"

urlpatterns = [
    path("conversations/", conversations.conversation_list, name="conversation_list"),
    path(conversation, conversations.conversation_detail, name="conversation_detail"),
    path(conversation + "context/", context.conversation_context, name="conversation_context"),
    path(conversation + "served/", served.conversation_served, name="conversation_served"),
    path(conversation + "transcript", transcript.conversation_transcript, name="transcript"),
    path(conversation + "messages/", conversations.message_list, name="message_list"),
    path(
        conversation + "messages/<uuid:message_id>/reveal/",
        conversations.message_reveal,
        name="message_reveal",
    ),
    path(conversation + "observations/", conversations.observation_list, name="observation_list"),
    path(conversation + "observations/add/", notes.observation_add, name="observation_add"),
    path(observation + "edit/", notes.observation_edit, name="observation_edit"),
    path(observation + "delete/", notes.observation_delete, name="observation_delete"),
    path(observation + "history/", note_history.observation_history, name="observation_history"),
    path(observation + "revert/", note_history.observation_revert, name="observation_revert"),
    path(conversation + "reflections/", conversations.reflection_list, name="reflection_list"),
    path(reflection + "edit/", notes.reflection_edit, name="reflection_edit"),
    path(reflection + "delete/", notes.reflection_delete, name="reflection_delete"),
    path(reflection + "history/", note_history.reflection_history, name="reflection_history"),
    path(reflection + "revert/", note_history.reflection_revert, name="reflection_revert"),
    path(conversation + "messages/<uuid:message_id>/pin/", pins.pin_add, name="pin_add"),
    path(conversation + "pins/<uuid:pin_id>/unpin/", pins.pin_delete, name="pin_delete"),
    path(conversation + "observe/", runs.run_start, {"action": "observe"}, name="observe"),
    path(conversation + "reflect/", runs.run_start, {"action": "reflect"}, name="reflect"),
    path(conversation + "runs/<str:kind>/<uuid:run_id>/", runs.run_status, name="run_status"),
    path(
        conversation + "runs/<str:kind>/<uuid:run_id>/cancel/",
        runs.run_cancel,
        name="run_cancel",
    ),
    path("search/", search.memory_search, name="search"),
    path("users/", end_users.end_user, name="end_user_lookup"),
    path("users/<path:end_user_id>/", end_users.end_user, name="end_user"),
    path("metrics/", metrics.metrics, name="metrics"),
    path("approvals/", approvals.approval_queue, name="approval_queue"),
    path(
        "approvals/<str:kind>/<uuid:note_id>/approve/",
        approvals.approval_decide,
        {"decision": "approve"},
        name="approval_approve",
    ),
    path(
        "approvals/<str:kind>/<uuid:note_id>/reject/",
        approvals.approval_decide,
        {"decision": "reject"},
        name="approval_reject",
    ),
    path("escalations/", escalations.escalation_list, name="escalation_list"),
    path(
        "escalations/<uuid:escalation_id>/resolve/",
        escalations.escalation_resolve,
        name="escalation_resolve",
    ),
    path("settings/api-keys/", settings.api_keys, name="api_keys"),
    path(
        "settings/api-keys/<int:api_key_id>/revoke/",
        settings.api_key_revoke,
        name="api_key_revoke",
    ),
    path("settings/memory/", settings.memory_settings, name="memory_settings"),
    path("settings/members/", members.members, name="members"),
    path("settings/members/<int:membership_id>/role/", members.member_role, name="member_role"),
    path(
        "settings/members/<int:membership_id>/remove/",
        members.member_remove,
        name="member_remove",
    ),
    path("workspace/", settings.workspace_switch, name="workspace_switch"),
    path("compliance/", include("dashboard.compliance.urls")),
]
