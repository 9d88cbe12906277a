"""Correcting reflections in the dashboard like observations (edit, re-prioritise,
delete, history with diffs, revert, each with a reason), and what a corrected
observation does to the reflections column: stale, being re-derived, then the new one."""

from __future__ import annotations

import json

import pytest
from django.utils.html import escape

from governance.models import AuditEvent
from memory.models import Conversation, Observation, Reflection, ReflectionVersion, ReflectorRun
from memory.pipeline.reflector import reflector_run_execute

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def reflection(reflected_observation) -> Reflection:
    return next(
        r
        for r in Reflection.objects.filter(conversation=reflected_observation.conversation)
        if str(reflected_observation.pk) in r.source_observation_ids
    )


def _url(reflection: Reflection, action: str) -> str:
    return f"/conversations/{reflection.conversation_id}/reflections/{reflection.pk}/{action}/"


def _item(html: str, reflection: Reflection) -> str:
    item = html[html.index(f'<li id="refl-{reflection.pk}"') :]
    return item[: item.index("</li>")]


def _rederive(conversation: Conversation) -> None:
    run = ReflectorRun.objects.get(conversation=conversation, status="pending")
    assert reflector_run_execute(run_id=run.pk).run.status == "succeeded"


# --- the actions -------------------------------------------------------------------------------


def test_every_reflection_offers_history_and_to_a_reviewer_edit_and_delete(
    login, reflected_conversation, reflection
):
    html = login("reviewer").get(f"/conversations/{reflected_conversation.pk}/").content.decode()
    item = _item(html, reflection)
    for action in ("history", "edit", "delete"):
        assert (
            f'hx-get="/conversations/{reflected_conversation.pk}/reflections/{reflection.pk}/{action}/"'
            in item
        )
    viewer = _item(
        login("viewer").get(f"/conversations/{reflected_conversation.pk}/").content.decode(),
        reflection,
    )
    assert "/history/" in viewer and "/edit/" not in viewer and "/delete/" not in viewer


@pytest.mark.parametrize("role", ["reviewer", "admin"])
def test_an_edit_with_a_reason_is_saved_audited_and_swapped_in(login, role, reflection):
    client = login(role)
    response = client.post(
        _url(reflection, "edit"),
        {"text": "Customer wants texts, never calls.", "priority": "high", "reason": "wording"},
        **HX,
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith(f'<li id="refl-{reflection.pk}"')
    assert "Customer wants texts, never calls." in html and "marker-high" in html
    reflection.refresh_from_db()
    assert (reflection.text, reflection.priority, reflection.version) == (
        "Customer wants texts, never calls.",
        "high",
        2,
    )
    kept = ReflectionVersion.objects.get(reflection_id=reflection.pk)
    assert kept.reason == "wording" and kept.changed_by == f"user:{client.user.pk}"
    event = AuditEvent.objects.get(action="reflection.edit")
    assert (event.actor_type, event.actor_role, event.reason) == ("user", role, "wording")


def test_a_priority_only_change_is_a_reprioritisation(login, reflection):
    login("reviewer").post(
        _url(reflection, "edit"),
        {"text": reflection.text, "priority": "completed", "reason": "done"},
        **HX,
    )
    assert AuditEvent.objects.get(action__startswith="reflection.").action == (
        "reflection.reprioritise"
    )


def test_an_edit_without_a_reason_is_refused_in_its_panel(login, reflection):
    response = login("reviewer").post(
        _url(reflection, "edit"), {"text": "Changed", "priority": "low", "reason": ""}, **HX
    )
    assert response.status_code == 422
    assert response["HX-Retarget"] == f"#refl-{reflection.pk}-panel"
    assert b"Give a reason" in response.content
    reflection.refresh_from_db()
    assert reflection.version == 1
    assert not AuditEvent.objects.filter(action__startswith="reflection.").exists()


def test_the_edit_and_delete_forms_have_pages_of_their_own(login, reflection):
    client = login("reviewer")
    edit = client.get(_url(reflection, "edit"))
    assert edit.status_code == 200 and b"Edit a reflection" in edit.content
    delete = client.get(_url(reflection, "delete"))
    assert b"Delete a reflection" in delete.content
    assert b"Its source observations stay stored and are not served in its place" in delete.content
    saved = client.post(_url(reflection, "edit"), {"text": "B.", "priority": "low", "reason": "x"})
    assert saved["Location"] == f"/conversations/{reflection.conversation_id}/#refl-{reflection.pk}"


def test_delete_with_a_reason_leaves_a_tombstone(login, reflection):
    response = login("reviewer").post(_url(reflection, "delete"), {"reason": "wrong"}, **HX)
    assert response.status_code == 200
    assert b"Reflection deleted" in response.content
    assert not Reflection.objects.filter(pk=reflection.pk).exists()
    assert AuditEvent.objects.get(action__startswith="reflection.").action == "reflection.delete"


def test_history_shows_the_diff_and_revert_restores_it(login, reflection):
    client = login("reviewer")
    original = reflection.text
    client.post(
        _url(reflection, "edit"),
        {"text": "Rewritten.", "priority": "low", "reason": "shorter"},
        **HX,
    )
    history = client.get(_url(reflection, "history"), **HX).content.decode()
    assert history.lstrip().startswith(
        '<section class="history" aria-label="History of this reflection"'
    )
    assert "v1 → v2" in history and "Reason: “shorter”" in history
    assert f'<span class="diff-del">-{escape(original)}</span>' in history
    assert '<span class="diff-add">+Rewritten.</span>' in history

    reverted = client.post(_url(reflection, "revert"), {"version": 1, "reason": "lost facts"}, **HX)
    assert reverted.status_code == 200
    html = reverted.content.decode()
    assert html.lstrip().startswith(f'<li id="refl-{reflection.pk}"')
    assert escape(original) in html and 'class="history"' in html
    reflection.refresh_from_db()
    assert (reflection.text, reflection.version) == (original, 3)
    assert AuditEvent.objects.filter(action="reflection.revert").count() == 1


def test_a_viewer_cannot_correct_a_reflection(login, reflection):
    client = login("viewer")
    for response in (
        client.get(_url(reflection, "edit")),
        client.post(_url(reflection, "edit"), {"text": "x", "priority": "low", "reason": "r"}),
        client.post(_url(reflection, "delete"), {"reason": "r"}),
        client.post(_url(reflection, "revert"), {"version": 1, "reason": "r"}),
    ):
        assert response.status_code == 403
    assert client.get(_url(reflection, "history")).status_code == 200
    reflection.refresh_from_db()
    assert reflection.version == 1


def test_another_workspaces_reflection_is_not_found(login, workspace, other_workspace):
    from memory.services.conversations import conversation_create
    from tests.dashboard.factories import chat, observe, reflect

    theirs = conversation_create(workspace=other_workspace, title="Globex")
    chat(theirs)
    observe(theirs)
    reflect(theirs)
    reflection = Reflection.objects.filter(conversation=theirs).first()
    client = login("admin")
    for action in ("edit", "delete", "history"):
        assert client.get(_url(reflection, action), **HX).status_code == 404
    assert client.post(_url(reflection, "revert"), {"version": 1, "reason": "r"}).status_code == 404


# --- stale, being re-derived, re-derived ----------------------------------------------------------


def test_a_corrected_observation_marks_its_reflection_stale_on_the_page(
    login, reflected_conversation, reflected_observation, reflection
):
    client = login("reviewer")
    edited = client.post(
        f"/conversations/{reflected_conversation.pk}/observations/{reflected_observation.pk}/edit/",
        {
            "text": "User prefers SMS over phone calls.",
            "priority": reflected_observation.priority,
            "reason": "r",
        },
        **HX,
    )
    assert edited.status_code == 200
    assert "memory-changed" in json.loads(edited["HX-Trigger"])  # the reflections column reloads
    assert "served while its reflection is re-derived" in edited.content.decode()

    column = client.get(
        f"/conversations/{reflected_conversation.pk}/reflections/", **HX
    ).content.decode()
    assert column.lstrip().startswith('<ol id="reflection-list"')
    assert "every 2s" in column  # polls while a reflection is being re-derived
    item = _item(column, reflection)
    assert "stale, being re-derived" in item and "is-stale" in item

    page = client.get(f"/conversations/{reflected_conversation.pk}/").content.decode()
    assert "stale, being re-derived" in _item(page, reflection)
    observation = page[page.index(f'<li id="obs-{reflected_observation.pk}"') :]
    assert "served while its reflection is re-derived" in observation[: observation.index("</li>")]

    _rederive(reflected_conversation)
    reflection.refresh_from_db()
    polled = client.get(f"/conversations/{reflected_conversation.pk}/reflections/?stale=1", **HX)
    # Re-derived: the observations column reloads too.
    assert "memory-rederived" in json.loads(polled["HX-Trigger"])
    column = polled.content.decode()
    assert "every 2s" not in column and "stale, being re-derived" not in column
    assert "superseded" in _item(column, reflection)
    # A person's words are not condensed again: the observation is served as they wrote it.
    observation = Observation.objects.get(pk=reflected_observation.pk)
    assert (observation.status, observation.text) == (
        "active",
        "User prefers SMS over phone calls.",
    )
    assert not Reflection.objects.filter(
        conversation=reflected_conversation, status="active", text__contains="SMS"
    ).exists()


def test_the_reflections_column_without_javascript_is_the_page(login, reflected_conversation):
    response = login("viewer").get(f"/conversations/{reflected_conversation.pk}/reflections/")
    assert response.status_code == 302
    assert response["Location"] == f"/conversations/{reflected_conversation.pk}/#reflections"


def test_the_observation_delete_panel_says_what_happens_to_its_reflections(
    login, reflected_conversation, reflected_observation
):
    client = login("reviewer")
    panel = client.get(
        f"/conversations/{reflected_conversation.pk}/observations/{reflected_observation.pk}/delete/",
        **HX,
    )
    assert b"It leaves the agent's context at once, and so do the reflections built from it" in (
        panel.content
    )
    deleted = client.post(
        f"/conversations/{reflected_conversation.pk}/observations/{reflected_observation.pk}/delete/",
        {"reason": "r"},
        **HX,
    )
    assert b"the reflections built from it are being made again" in deleted.content
    assert "memory-changed" in json.loads(deleted["HX-Trigger"])


def test_a_superseded_reflection_offers_no_edit_and_refuses_one(
    login, reflected_conversation, reflected_observation, reflection
):
    client = login("reviewer")
    client.post(
        f"/conversations/{reflected_conversation.pk}/observations/{reflected_observation.pk}/edit/",
        {"text": "User prefers SMS.", "priority": reflected_observation.priority, "reason": "r"},
        **HX,
    )
    _rederive(reflected_conversation)
    item = _item(
        client.get(f"/conversations/{reflected_conversation.pk}/").content.decode(), reflection
    )
    assert "/edit/" not in item and "/delete/" in item
    refused = client.post(
        _url(reflection, "edit"), {"text": "x", "priority": "low", "reason": "r"}, **HX
    )
    assert refused.status_code == 422
    assert b"replaced when the Reflector re-derived it" in refused.content
