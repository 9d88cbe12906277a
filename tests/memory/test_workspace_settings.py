"""A workspace's memory settings over the API: read by any key, the Observer's fidelity
changed by admin keys with a reason, every change audited, and /admin/ unable to change
it without that trail."""

from __future__ import annotations

import pytest
from django.test import override_settings

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory.services.workspace_settings import workspace_settings_update
from tenancy.models import DEFAULT_CONTEXT_MAX_TOKENS, Workspace

SETTINGS = "/v1/workspace/settings"


def _stored_fidelity(workspace: Workspace) -> str:
    workspace.refresh_from_db()
    return workspace.fidelity


# --- reading ---------------------------------------------------------------------------------


def test_any_key_reads_the_settings_in_force(api, workspace):
    response = api.get(SETTINGS)

    assert response.status_code == 200
    assert response.json() == {
        "workspaceId": str(workspace.pk),
        "fidelity": "balanced",
        "fidelitySource": "default",
        "fidelityDefault": "balanced",
        "fidelityLevels": ["compact", "balanced", "detailed"],
        "observerThreshold": 30_000,
        "reflectorThreshold": 40_000,
        "engine": "extractive",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }


@override_settings(MEMDESK_OBSERVER_FIDELITY="compact")
def test_the_settings_show_the_workspaces_own_values_over_the_defaults(api, workspace):
    body = api.get(SETTINGS).json()
    assert (body["fidelity"], body["fidelitySource"], body["fidelityDefault"]) == (
        "compact",
        "default",
        "compact",
    )

    workspace.fidelity = "detailed"
    workspace.observer_threshold = 500
    workspace.save()
    body = api.get(SETTINGS).json()
    assert (body["fidelity"], body["fidelitySource"], body["fidelityDefault"]) == (
        "detailed",
        "workspace",
        "compact",
    )
    assert body["observerThreshold"] == 500


def test_each_key_reads_its_own_workspace(api, other_api, workspace, other_workspace):
    other_workspace.fidelity = "compact"
    other_workspace.save()

    mine, theirs = api.get(SETTINGS).json(), other_api.get(SETTINGS).json()

    assert (mine["workspaceId"], mine["fidelity"]) == (str(workspace.pk), "balanced")
    assert (theirs["workspaceId"], theirs["fidelity"]) == (str(other_workspace.pk), "compact")


# --- changing the fidelity -----------------------------------------------------------------------


def test_an_admin_key_changes_the_fidelity_with_a_reason_and_it_is_audited(admin_api, workspace):
    response = admin_api.patch(
        SETTINGS,
        {"fidelity": "detailed", "reason": "agents must quote our answers"},
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["fidelity"], body["fidelitySource"]) == ("detailed", "workspace")
    assert _stored_fidelity(workspace) == "detailed"
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert (event.target_type, event.target_id) == ("workspace", str(workspace.pk))
    assert event.before == {
        "fidelity": None,
        "effectiveFidelity": "balanced",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }
    assert event.after == {
        "fidelity": "detailed",
        "effectiveFidelity": "detailed",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }
    assert event.reason == "agents must quote our answers"
    assert (event.actor_type, event.actor_role) == ("api_key", "admin")


@pytest.mark.parametrize("back_to_default", [None, ""])
def test_null_or_empty_returns_to_the_default(admin_api, workspace, back_to_default):
    workspace.fidelity = "compact"
    workspace.save()

    response = admin_api.patch(
        SETTINGS, {"fidelity": back_to_default, "reason": "as the others"}, format="json"
    )

    assert response.status_code == 200
    assert (response.json()["fidelity"], response.json()["fidelitySource"]) == (
        "balanced",
        "default",
    )
    assert _stored_fidelity(workspace) == ""
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert event.before == {
        "fidelity": "compact",
        "effectiveFidelity": "compact",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }
    assert event.after == {
        "fidelity": None,
        "effectiveFidelity": "balanced",
        "contextMaxTokens": DEFAULT_CONTEXT_MAX_TOKENS,
        "approval": "off",
        "approvalByTag": {},
    }


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_it_refuses_a_change_without_a_reason(admin_api, workspace, reason):
    body = {"fidelity": "compact"} if reason is None else {"fidelity": "compact", "reason": reason}

    response = admin_api.patch(SETTINGS, body, format="json")

    assert response.status_code == 400
    assert response.json()["code"] == "reason_required"
    assert response.json()["field"] == "reason"
    assert _stored_fidelity(workspace) == ""
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


def test_it_refuses_an_unknown_level_naming_the_levels(admin_api, workspace):
    response = admin_api.patch(SETTINGS, {"fidelity": "verbose", "reason": "more"}, format="json")

    assert response.status_code == 400
    body = response.json()
    assert (body["code"], body["field"]) == ("invalid_fidelity", "fidelity")
    assert "compact, balanced, detailed" in body["message"] and "'verbose'" in body["message"]
    assert _stored_fidelity(workspace) == ""
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"fidelity": 3, "reason": "x"}, "invalid_request", "fidelity"),
        ({"reason": "x"}, "nothing_to_change", "fidelity"),
        (
            {"fidelity": "compact", "observerThreshold": 10, "reason": "x"},
            "invalid_request",
            "observerThreshold",
        ),
    ],
)
def test_it_refuses_a_malformed_body_and_stores_nothing(admin_api, workspace, body, error, field):
    response = admin_api.patch(SETTINGS, body, format="json")

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == (error, field)
    workspace.refresh_from_db()
    assert (workspace.fidelity, workspace.observer_threshold) == ("", None)


def test_a_change_that_changes_nothing_is_not_audited(admin_api, workspace):
    workspace.fidelity = "compact"
    workspace.save()

    response = admin_api.patch(SETTINGS, {"fidelity": "compact", "reason": "again"}, format="json")

    assert response.status_code == 200
    assert response.json()["fidelity"] == "compact"
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


def test_choosing_the_default_level_explicitly_is_a_change(admin_api, workspace):
    # The workspace stops following MEMDESK_OBSERVER_FIDELITY, even at the same level.
    response = admin_api.patch(
        SETTINGS, {"fidelity": "balanced", "reason": "pin it"}, format="json"
    )

    assert response.json()["fidelitySource"] == "workspace"
    assert AuditEvent.objects.filter(action="workspace.settings.update").count() == 1


def test_an_agent_key_may_read_but_not_change_the_settings(api, workspace):
    response = api.patch(SETTINGS, {"fidelity": "compact", "reason": "x"}, format="json")

    assert response.status_code == 403
    assert response.json()["code"] == "forbidden"
    assert _stored_fidelity(workspace) == ""
    assert not AuditEvent.objects.filter(action="workspace.settings.update").exists()


def test_a_change_stays_in_the_keys_workspace(admin_api, other_api, workspace, other_workspace):
    admin_api.patch(SETTINGS, {"fidelity": "compact", "reason": "short notes"}, format="json")

    assert _stored_fidelity(workspace) == "compact"
    assert _stored_fidelity(other_workspace) == ""
    assert other_api.get(SETTINGS).json()["fidelity"] == "balanced"
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert event.workspace_id == workspace.pk


def test_the_service_is_the_one_door_for_people_and_keys(workspace):
    updated = workspace_settings_update(
        workspace=workspace, actor=SYSTEM_ACTOR, fidelity="detailed", reason="benchmark run"
    )

    assert updated.effective_fidelity == "detailed"
    assert AuditEvent.objects.get(action="workspace.settings.update").actor_type == "system"


# --- the default context budget ----------------------------------------------------------------


def test_an_admin_key_sets_the_default_context_budget_with_a_reason_audited(admin_api, workspace):
    response = admin_api.patch(
        SETTINGS, {"contextMaxTokens": 8000, "reason": "keep prompts small"}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["contextMaxTokens"] == 8000
    assert response.json()["fidelitySource"] == "default"  # the fidelity stays as it was
    event = AuditEvent.objects.get(action="workspace.settings.update")
    assert event.before["contextMaxTokens"] == DEFAULT_CONTEXT_MAX_TOKENS
    assert event.after["contextMaxTokens"] == 8000
    assert event.reason == "keep prompts small"

    admin_api.patch(SETTINGS, {"contextMaxTokens": None, "reason": "no budget"}, format="json")
    workspace.refresh_from_db()
    assert workspace.context_max_tokens is None
    assert AuditEvent.objects.filter(action="workspace.settings.update").count() == 2


@pytest.mark.parametrize("value", [0, -5, "lots", True, 10**12])
def test_it_refuses_a_budget_that_is_not_a_positive_whole_number(admin_api, workspace, value):
    response = admin_api.patch(SETTINGS, {"contextMaxTokens": value, "reason": "x"}, format="json")

    assert response.status_code == 400
    assert response.json()["field"] == "contextMaxTokens"
    workspace.refresh_from_db()
    assert workspace.context_max_tokens == DEFAULT_CONTEXT_MAX_TOKENS


def test_the_default_budget_fits_a_context_read_that_names_none(admin_api, api, workspace):
    conversation_id = api.post("/v1/conversations", {}, format="json").json()["id"]
    api.post(
        f"/v1/conversations/{conversation_id}/messages/bulk",
        {"messages": [{"role": "user", "content": f"message number {n}"} for n in range(1, 11)]},
        format="json",
    )
    path = f"/v1/conversations/{conversation_id}/context"
    # A new workspace has a budget, which ten short messages are far under.
    first = api.get(path).json()
    assert first["maxTokens"] == DEFAULT_CONTEXT_MAX_TOKENS
    assert len(first["recentMessages"]) == 10 and first["trimmed"]["recentMessages"] == 0

    admin_api.patch(SETTINGS, {"contextMaxTokens": 30, "reason": "small"}, format="json")

    default = api.get(path).json()
    assert default["maxTokens"] == 30
    assert default["tokenCount"] <= 30 and default["trimmed"]["recentMessages"] > 0
    assert (
        api.get(f"{path}?max_tokens=100000").json()["recentMessages"] == (first["recentMessages"])
    )

    admin_api.patch(SETTINGS, {"contextMaxTokens": None, "reason": "no budget"}, format="json")
    unbudgeted = api.get(path).json()
    assert "maxTokens" not in unbudgeted and len(unbudgeted["recentMessages"]) == 10


# --- /admin/ ---------------------------------------------------------------------------------


def test_the_admin_shows_the_fidelity_but_cannot_change_it(admin_client, workspace):
    url = f"/admin/tenancy/workspace/{workspace.pk}/change/"
    page = admin_client.get(url).content.decode()

    assert 'name="fidelity"' not in page
    assert "balanced (the server&#x27;s default)" in page
    assert 'href="/settings/memory/"' in page

    response = admin_client.post(
        url,
        {
            "name": workspace.name,
            "observer_threshold": "",
            "reflector_threshold": "",
            "fidelity": "compact",
            "engine": "",
            "llm_base_url": "",
            "llm_model": "",
            "llm_api_key": "",
            "created_at_0": "2026-01-01",
            "created_at_1": "00:00:00",
            "audit_reason": "tidy up",
        },
    )

    assert response.status_code == 302
    assert _stored_fidelity(workspace) == ""
    # Nothing the admin may change changed: no event, and never a fidelity change.
    assert not AuditEvent.objects.filter(action__startswith="workspace.").exists()
