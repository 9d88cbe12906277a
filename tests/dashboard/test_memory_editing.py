"""Editing memory inline: edit, re-prioritise, delete, add, history with diffs, revert.
Every change needs a reason, is audited as the signed-in user, and is refused without
the role or the CSRF token."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from governance.models import AuditEvent
from memory.models import Observation, ObservationVersion

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def observation(observed_conversation) -> Observation:
    return (
        Observation.objects.filter(conversation=observed_conversation)
        .order_by("observed_at")
        .first()
    )


def _url(observation: Observation, action: str) -> str:
    return f"/conversations/{observation.conversation_id}/observations/{observation.pk}/{action}/"


# --- edit -------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["reviewer", "compliance", "admin"])
def test_an_edit_with_a_reason_is_saved_audited_and_swapped_in(login, role, observation):
    client = login(role)
    response = client.post(
        _url(observation, "edit"),
        {"text": "Customer wants a refund; box was crushed.", "priority": "high", "reason": "typo"},
        **HX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<li id="obs-{observation.pk}"')
    assert "Customer wants a refund; box was crushed." in html and "marker-high" in html
    observation.refresh_from_db()
    assert (observation.text, observation.priority, observation.version) == (
        "Customer wants a refund; box was crushed.",
        "high",
        2,
    )
    kept = ObservationVersion.objects.get(observation_id=observation.pk)
    assert kept.reason == "typo" and kept.changed_by == f"user:{client.user.pk}"
    event = AuditEvent.objects.get(action="observation.edit")
    assert (event.actor_type, event.actor_id, event.actor_role, event.reason) == (
        "user",
        str(client.user.pk),
        role,
        "typo",
    )


def test_an_edit_without_a_reason_is_refused_next_to_the_reason_field(login, observation):
    before = observation.text
    response = login("reviewer").post(
        _url(observation, "edit"), {"text": "Changed", "priority": "low", "reason": " "}, **HX
    )
    assert response.status_code == 422
    # Back into the item's panel, with the error under the reason field.
    assert response["HX-Retarget"] == f"#obs-{observation.pk}-panel"
    assert response["HX-Reswap"] == "innerHTML"
    html = response.content.decode()
    reason_id = f"edit_{observation.pk.hex[:12]}_reason"
    assert f'aria-describedby="{reason_id}_helptext {reason_id}_error"' in html
    assert f'<ul class="errorlist" id="{reason_id}_error"><li>Give a reason' in html
    observation.refresh_from_db()
    assert observation.text == before and observation.version == 1
    assert not AuditEvent.objects.filter(action__startswith="observation.").exists()


def test_an_edit_that_changes_nothing_says_so(login, observation):
    response = login("reviewer").post(
        _url(observation, "edit"),
        {"text": observation.text, "priority": observation.priority, "reason": "why not"},
    )
    assert response.status_code == 422
    assert b"Nothing changed" in response.content and b"<html" in response.content


def test_a_priority_only_change_is_recorded_as_a_reprioritisation(login, observation):
    login("reviewer").post(
        _url(observation, "edit"),
        {"text": observation.text, "priority": "completed", "reason": "refund done"},
        **HX,
    )
    [event] = AuditEvent.objects.filter(target_type="observation")
    assert event.action == "observation.reprioritise"
    observation.refresh_from_db()
    assert observation.priority == "completed"


def test_the_edit_form_works_without_javascript(login, observation):
    client = login("reviewer")
    page = client.get(_url(observation, "edit"))
    assert page.status_code == 200 and b"<html" in page.content
    assert b"Edit an observation" in page.content
    fragment = client.get(_url(observation, "edit"), **HX).content.decode()
    assert fragment.lstrip().startswith("<form") and "<html" not in fragment
    saved = client.post(
        _url(observation, "edit"), {"text": "New text", "priority": "low", "reason": "clearer"}
    )
    assert saved.status_code == 302
    assert (
        saved["Location"] == f"/conversations/{observation.conversation_id}/#obs-{observation.pk}"
    )


def test_a_viewer_cannot_edit_and_is_told_the_reviewer_role_can(login, observation):
    client = login("viewer")
    for response in (
        client.get(_url(observation, "edit")),
        client.post(_url(observation, "edit"), {"text": "x", "priority": "low", "reason": "r"}),
        client.post(_url(observation, "delete"), {"reason": "r"}),
        client.post(_url(observation, "revert"), {"version": 1, "reason": "r"}),
        client.post(
            f"/conversations/{observation.conversation_id}/observations/add/",
            {"text": "x", "priority": "low", "reason": "r"},
        ),
    ):
        assert response.status_code == 403
        assert b"To edit memory in <strong>acme</strong>" in response.content
        assert b'<strong class="required-role">reviewer</strong>' in response.content
    observation.refresh_from_db()
    assert observation.version == 1


def test_another_workspaces_observation_is_not_found(login, foreign_conversation):
    theirs = Observation.objects.filter(conversation=foreign_conversation).first()
    client = login("admin")
    for action in ("edit", "delete", "history"):
        assert client.get(_url(theirs, action), **HX).status_code == 404
    assert client.post(_url(theirs, "revert"), {"version": 1, "reason": "r"}).status_code == 404


def test_an_observation_must_belong_to_the_conversation_in_the_url(
    login, observation, reflected_conversation
):
    mixed = f"/conversations/{reflected_conversation.pk}/observations/{observation.pk}/edit/"
    assert login("admin").get(mixed).status_code == 404


# --- delete ---------------------------------------------------------------------------------


def test_delete_with_a_reason_leaves_a_tombstone_and_the_version(login, observation):
    response = login("reviewer").post(
        _url(observation, "delete"), {"reason": "wrong customer"}, **HX
    )
    assert response.status_code == 200
    assert b"Observation deleted" in response.content
    assert not Observation.objects.filter(pk=observation.pk).exists()
    kept = ObservationVersion.objects.get(observation_id=observation.pk)
    assert (kept.change, kept.reason) == ("delete", "wrong customer")
    [event] = AuditEvent.objects.filter(target_type="observation")
    assert event.action == "observation.delete"


def test_delete_without_a_reason_is_refused(login, observation):
    response = login("reviewer").post(_url(observation, "delete"), {"reason": ""}, **HX)
    assert response.status_code == 422
    assert b"Give a reason" in response.content
    assert Observation.objects.filter(pk=observation.pk).exists()


def test_delete_without_javascript_confirms_on_a_page_then_redirects(login, observation):
    client = login("reviewer")
    assert b"Delete an observation" in client.get(_url(observation, "delete")).content
    response = client.post(_url(observation, "delete"), {"reason": "duplicate"})
    assert response.status_code == 302
    assert response["Location"].endswith("#observations")


# --- add ---------------------------------------------------------------------------------------


def test_adding_an_observation_with_a_reason(login, observed_conversation):
    client = login("reviewer")
    url = f"/conversations/{observed_conversation.pk}/observations/add/"
    response = client.post(
        url,
        {
            "text": "Customer asked for a callback on Friday.",
            "priority": "high",
            "referenced_at": "2026-03-06",
            "reason": "from the phone call",
        },
        **HX,
    )
    assert response.status_code == 201
    added = Observation.objects.get(text="Customer asked for a callback on Friday.")
    assert (added.source, added.priority, added.referenced_at.date().isoformat()) == (
        "manual",
        "high",
        "2026-03-06",
    )
    html = response.content.decode()
    assert 'hx-swap-oob="beforeend:#observation-list"' in html
    assert f'id="obs-{added.pk}"' in html and "Observation added" in html
    event = AuditEvent.objects.get(action="observation.create")
    assert event.reason == "from the phone call" and event.actor_role == "reviewer"


def test_adding_without_text_or_reason_shows_both_errors(login, observed_conversation):
    response = login("reviewer").post(
        f"/conversations/{observed_conversation.pk}/observations/add/",
        {"text": "", "priority": "medium", "reason": ""},
        **HX,
    )
    assert response.status_code == 422
    html = response.content.decode()
    assert '<ul class="errorlist" id="add_text_error">' in html
    assert '<ul class="errorlist" id="add_reason_error"><li>Give a reason' in html
    assert not Observation.objects.filter(source="manual").exists()


def test_the_add_form_has_a_page_of_its_own(login, observed_conversation):
    client = login("reviewer")
    page = client.get(f"/conversations/{observed_conversation.pk}/observations/add/")
    assert page.status_code == 200 and b"<html" in page.content
    assert b'<label for="add_reason">' in page.content
    saved = client.post(
        f"/conversations/{observed_conversation.pk}/observations/add/",
        {"text": "A note", "priority": "low", "reason": "context"},
    )
    assert saved.status_code == 302


# --- history and revert ---------------------------------------------------------------------------


def test_history_shows_each_version_with_its_diff_and_revert_restores_it(login, observation):
    client = login("reviewer")
    original = observation.text
    client.post(
        _url(observation, "edit"),
        {"text": "First rewrite.", "priority": "high", "reason": "shorter"},
        **HX,
    )
    client.post(
        _url(observation, "edit"),
        {"text": "Second rewrite.", "priority": "high", "reason": "clearer"},
        **HX,
    )
    history = client.get(_url(observation, "history"), **HX).content.decode()
    assert history.lstrip().startswith('<section class="history"')
    assert "v1 → v2" in history and "v2 → v3" in history
    assert "Reason: “shorter”" in history and "Reason: “clearer”" in history
    assert f'<span class="diff-del">-{escape(original)}</span>' in history
    assert '<span class="diff-add">+First rewrite.</span>' in history
    assert "Revert to v1" in history and client.user.username in history

    reverted = client.post(
        _url(observation, "revert"), {"version": 1, "reason": "the rewrite lost facts"}, **HX
    )
    assert reverted.status_code == 200
    html = reverted.content.decode()
    assert html.lstrip().startswith(f'<li id="obs-{observation.pk}"')
    assert escape(original) in html and 'class="history"' in html  # history stays open
    assert "v3 → v4" in html and "Reason: “the rewrite lost facts”" in html
    observation.refresh_from_db()
    assert (observation.text, observation.version) == (original, 4)
    assert AuditEvent.objects.filter(action="observation.revert").count() == 1


def test_history_of_an_observation_never_edited_lists_no_versions(login, observation):
    assert observation.version == 1
    response = login("viewer").get(_url(observation, "history"), **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="history"')
    assert "Revert to" not in html and "→" not in html


def test_a_revert_without_a_reason_is_refused_under_its_version(login, observation):
    client = login("reviewer")
    client.post(
        _url(observation, "edit"), {"text": "Rewritten.", "priority": "low", "reason": "x"}, **HX
    )
    response = client.post(_url(observation, "revert"), {"version": 1, "reason": ""}, **HX)
    assert response.status_code == 422
    assert response["HX-Retarget"] == f"#obs-{observation.pk}-panel"
    html = response.content.decode()
    field = f"revert1_{observation.pk.hex[:12]}_reason"
    assert f'<ul class="errorlist" id="{field}_error"><li>Give a reason' in html
    observation.refresh_from_db()
    assert observation.text == "Rewritten."


def test_reverting_to_a_version_that_does_not_exist(login, observation):
    response = login("reviewer").post(
        _url(observation, "revert"), {"version": 7, "reason": "try"}, **HX
    )
    assert response.status_code == 422
    assert b"no earlier version 7" in response.content


def test_history_of_an_unedited_observation_and_for_a_viewer(login, observation):
    client = login("viewer")
    page = client.get(_url(observation, "history"))
    assert page.status_code == 200 and b"<html" in page.content
    assert b"No edits yet" in page.content and b"Revert to" not in page.content


def test_revert_without_javascript_goes_back_to_the_history_page(login, observation):
    client = login("reviewer")
    client.post(_url(observation, "edit"), {"text": "B.", "priority": "low", "reason": "x"})
    response = client.post(_url(observation, "revert"), {"version": 1, "reason": "undo"})
    assert response.status_code == 302 and response["Location"] == _url(observation, "history")
