"""Reflections corrected through the API like observations: edit, re-prioritise, delete,
history with diffs, revert, always with a reason; and the `content` / `text` rule of
every edit."""

from __future__ import annotations

import pytest

from governance.audit.writer import audit_text_digest
from governance.models import AuditEvent
from memory.models import Observation, Reflection, ReflectionVersion
from tests.memory.factories import ObservationFactory, ReflectionFactory


@pytest.fixture
def source(conversation_id) -> Observation:
    return ObservationFactory(
        conversation_id=conversation_id, text="User prefers email.", status="reflected"
    )


@pytest.fixture
def reflection(conversation_id, source) -> Reflection:
    reflection = ReflectionFactory(
        conversation_id=conversation_id,
        text="User prefers email.",
        source_observation_ids=[str(source.pk)],
    )
    Observation.objects.filter(pk=source.pk).update(reflection=reflection)
    return reflection


def _path(reflection: Reflection, action: str = "") -> str:
    path = f"/v1/conversations/{reflection.conversation_id}/reflections/{reflection.pk}"
    return f"{path}/{action}" if action else path


def test_a_reflection_is_read_by_its_id(curator_api, reflection):
    body = curator_api.get(_path(reflection)).json()
    assert (body["id"], body["text"], body["status"], body["supersededBy"]) == (
        str(reflection.pk),
        "User prefers email.",
        "active",
        None,
    )


def test_an_edit_keeps_the_previous_version_with_a_diff_and_is_audited(curator_api, reflection):
    response = curator_api.patch(
        _path(reflection),
        {"content": "User prefers SMS.", "priority": "high", "reason": "customer corrected us"},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert (body["text"], body["priority"], body["version"]) == ("User prefers SMS.", "high", 2)
    assert body["grounding"] is not None  # scored against its source observation again

    history = curator_api.get(_path(reflection, "history")).json()
    assert history["current"]["text"] == "User prefers SMS."
    [version] = history["versions"]
    assert (version["version"], version["text"], version["priority"], version["change"]) == (
        1,
        "User prefers email.",
        "medium",
        "edit",
    )
    assert version["reason"] == "customer corrected us"
    assert "-User prefers email." in version["diff"]
    assert "+User prefers SMS." in version["diff"]
    event = AuditEvent.objects.get(action="reflection.edit", target_id=str(reflection.pk))
    assert (event.before["textDigest"], event.after["textDigest"], event.reason) == (
        audit_text_digest("User prefers email."),
        audit_text_digest("User prefers SMS."),
        "customer corrected us",
    )


def test_changing_only_the_priority_is_a_reprioritisation(curator_api, reflection):
    response = curator_api.patch(
        _path(reflection), {"priority": "low", "reason": "old news"}, format="json"
    )
    assert response.json()["marker"] == "\N{LARGE GREEN CIRCLE}"
    assert AuditEvent.objects.filter(action="reflection.reprioritise").count() == 1


@pytest.mark.parametrize(
    ("method", "action", "body"),
    [
        ("patch", "", {"text": "User prefers SMS."}),
        ("patch", "", {"text": "User prefers SMS.", "reason": "   "}),
        ("delete", "", None),
        ("post", "revert", {"version": 1}),
    ],
)
def test_every_change_without_a_reason_is_refused_and_changes_nothing(
    curator_api, reflection, method, action, body
):
    ReflectionVersion.objects.create(
        reflection_id=reflection.pk,
        conversation_id=reflection.conversation_id,
        version=1,
        text="earlier",
        priority="low",
        change="edit",
        reason="r",
        changed_by="user:1",
    )
    response = getattr(curator_api, method)(_path(reflection, action), body, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "error": "A reason is required to change memory.",
        "code": "reason_required",
        "message": "A reason is required to change memory.",
        "field": "reason",
    }
    reflection.refresh_from_db()
    assert (reflection.text, reflection.version) == ("User prefers email.", 1)
    assert ReflectionVersion.objects.count() == 1
    assert not AuditEvent.objects.filter(action__startswith="reflection.").exists()


def test_delete_keeps_the_last_version_and_takes_the_reason_from_the_query(curator_api, reflection):
    assert curator_api.delete(f"{_path(reflection)}?reason=duplicate").status_code == 204
    assert not Reflection.objects.filter(pk=reflection.pk).exists()
    kept = ReflectionVersion.objects.get(reflection_id=reflection.pk)
    assert (kept.change, kept.text, kept.reason) == ("delete", "User prefers email.", "duplicate")
    assert AuditEvent.objects.get(action="reflection.delete").reason == "duplicate"
    assert curator_api.get(_path(reflection)).status_code == 404


def test_revert_restores_an_earlier_version_as_a_new_one(curator_api, reflection):
    curator_api.patch(
        _path(reflection), {"text": "User prefers SMS.", "reason": "r"}, format="json"
    )
    response = curator_api.post(
        _path(reflection, "revert"), {"version": 1, "reason": "the edit was wrong"}, format="json"
    )
    assert response.status_code == 200
    assert (response.json()["text"], response.json()["version"]) == ("User prefers email.", 3)
    changes = [
        v["change"] for v in curator_api.get(_path(reflection, "history")).json()["versions"]
    ]
    assert changes == ["edit", "revert"]
    event = AuditEvent.objects.get(action="reflection.revert")
    assert (event.after["revertedTo"], event.reason) == (1, "the edit was wrong")

    unknown = curator_api.post(
        _path(reflection, "revert"), {"version": 7, "reason": "x"}, format="json"
    )
    assert unknown.status_code == 400
    assert unknown.json()["message"] == "This reflection has no earlier version 7."


def test_another_workspace_s_reflection_is_not_found(make_client, other_workspace, reflection):
    other_api = make_client(other_workspace, scope="curator")
    for method, action, body in [
        ("get", "", None),
        ("patch", "", {"text": "x", "reason": "r"}),
        ("delete", "", {"reason": "r"}),
        ("get", "history", None),
        ("post", "revert", {"version": 1, "reason": "r"}),
    ]:
        response = getattr(other_api, method)(_path(reflection, action), body, format="json")
        assert response.status_code == 404, (method, action)
        assert response.json()["code"] == "not_found"
    reflection.refresh_from_db()
    assert reflection.version == 1


def test_a_reflection_of_another_conversation_is_not_found_through_this_one(
    curator_api, conversation_id, reflection
):
    other = curator_api.post("/v1/conversations", {}, format="json").json()["id"]
    path = f"/v1/conversations/{other}/reflections/{reflection.pk}"
    assert curator_api.patch(path, {"text": "x", "reason": "r"}, format="json").status_code == 404
    assert curator_api.delete(f"{path}?reason=r").status_code == 404
    assert Reflection.objects.filter(pk=reflection.pk, version=1).exists()


def test_a_superseded_reflection_is_history_it_names_what_replaced_it(curator_api, reflection):
    successor = ReflectionFactory(conversation_id=reflection.conversation_id)
    Reflection.objects.filter(pk=reflection.pk).update(status="superseded", superseded_by=successor)
    response = curator_api.patch(
        _path(reflection), {"priority": "low", "reason": "r"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["code"] == "reflection_superseded"
    assert str(successor.pk) in response.json()["message"]
    assert curator_api.get(_path(reflection)).json()["supersededBy"] == str(successor.pk)
    # It may still be deleted (say it held something that must go).
    assert curator_api.delete(f"{_path(reflection)}?reason=held a typo'd name").status_code == 204


def test_stale_reflections_are_listed_by_status(curator_api, conversation_id, reflection, source):
    curator_api.patch(
        f"/v1/conversations/{conversation_id}/observations/{source.pk}",
        {"content": "User prefers SMS.", "reason": "r"},
        format="json",
    )
    listed = curator_api.get(f"/v1/conversations/{conversation_id}/reflections?status=stale").json()
    assert [r["id"] for r in listed["reflections"]] == [str(reflection.pk)]
    assert curator_api.get(
        f"/v1/conversations/{conversation_id}/reflections?status=active"
    ).json() == {"reflections": []}


# --- content and text -------------------------------------------------------------------------


@pytest.fixture
def observation_body(curator_api, conversation_id) -> dict:
    """An observation added over the API, as the API answered it."""
    return curator_api.post(
        f"/v1/conversations/{conversation_id}/observations",
        {"text": "User prefers email.", "priority": "medium"},
        format="json",
    ).json()


def _observation_path(conversation: str, observation: dict) -> str:
    return f"/v1/conversations/{conversation}/observations/{observation['id']}"


def test_an_edit_takes_content_the_name_reads_use(curator_api, conversation_id, observation_body):
    response = curator_api.patch(
        _observation_path(conversation_id, observation_body),
        {"content": "User prefers SMS.", "reason": "r"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["text"] == "User prefers SMS."


def test_content_sent_back_as_read_is_stored_without_its_marker_and_dates(
    curator_api, conversation_id, observation_body, reflection
):
    for path, read in [
        (_observation_path(conversation_id, observation_body), observation_body),
        (_path(reflection), curator_api.get(_path(reflection)).json()),
    ]:
        line = read["content"]
        assert line.startswith("\N{LARGE YELLOW CIRCLE} ") and line.endswith("User prefers email.")
        edited = line.replace("email", "SMS")
        response = curator_api.patch(path, {"content": edited, "reason": "r"}, format="json")
        assert response.json()["text"] == "User prefers SMS.", path
        assert response.json()["content"] == edited


def test_content_and_text_together_must_agree(
    curator_api, conversation_id, observation_body, reflection
):
    for path in (_observation_path(conversation_id, observation_body), _path(reflection)):
        same = curator_api.patch(
            path,
            {"content": "User prefers SMS.", "text": "User prefers SMS.", "reason": "r"},
            format="json",
        )
        assert same.status_code == 200
        different = curator_api.patch(
            path,
            {"content": "User prefers letters.", "text": "User prefers fax.", "reason": "r"},
            format="json",
        )
        assert different.status_code == 400
        assert different.json()["code"] == "conflicting_fields"
        assert different.json()["field"] == "content"
        assert "content and text" in different.json()["message"]
    assert Observation.objects.get(pk=observation_body["id"]).text == "User prefers SMS."
    reflection.refresh_from_db()
    assert (reflection.text, reflection.version) == ("User prefers SMS.", 2)


def test_empty_content_is_refused_by_its_own_name(curator_api, conversation_id, observation_body):
    response = curator_api.patch(
        _observation_path(conversation_id, observation_body),
        {"content": "  ", "reason": "r"},
        format="json",
    )
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["field"]) == ("empty_text", "content")
    assert Observation.objects.get(pk=observation_body["id"]).version == 1


def test_limit_keeps_the_newest_reflections_in_list_order(curator_api, conversation_id):
    made = [
        ReflectionFactory(conversation_id=conversation_id, text=f"Gen {n}.", generation=n)
        for n in range(1, 4)
    ]

    listed = curator_api.get(
        f"/v1/conversations/{conversation_id}/reflections", {"limit": 2}
    ).json()

    assert [r["id"] for r in listed["reflections"]] == [str(r.pk) for r in made[1:]]
    assert [r["createdAt"] for r in listed["reflections"]] == [
        r.created_at.isoformat() for r in made[1:]
    ]
