"""Two people correcting the same note: each form carries the version it was opened at.
Saving from a form someone else's change has made stale changes nothing, says who
changed the note meanwhile and what, and keeps what the person typed in the form, so
that saving again is a decision made on what the note now says."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from governance.models import AuditEvent
from memory.models import Observation, Reflection

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def observation(observed_conversation) -> Observation:
    return (
        Observation.objects.filter(conversation=observed_conversation)
        .order_by("observed_at")
        .first()
    )


@pytest.fixture
def reflection(reflected_observation) -> Reflection:
    return next(
        r
        for r in Reflection.objects.filter(conversation=reflected_observation.conversation)
        if str(reflected_observation.pk) in r.source_observation_ids
    )


def _url(note: Observation | Reflection, action: str) -> str:
    tier = "observations" if isinstance(note, Observation) else "reflections"
    return f"/conversations/{note.conversation_id}/{tier}/{note.pk}/{action}/"


def _other_priority(priority: str) -> str:
    return "low" if priority == "high" else "high"


def test_the_edit_form_carries_the_version_it_was_opened_at(login, observation):
    html = login("reviewer").get(_url(observation, "edit"), **HX).content.decode()
    assert 'type="hidden" name="expected_version" value="1"' in html


@pytest.mark.parametrize("kind", ["observation", "reflection"])
def test_a_text_edit_from_a_stale_form_does_not_revert_the_priority_set_meanwhile(
    request, login, kind
):
    note = request.getfixturevalue(kind)
    opened_text, opened_priority = note.text, note.priority
    raised = _other_priority(opened_priority)
    first, second = login("reviewer"), login("reviewer")
    for client in (first, second):
        assert client.get(_url(note, "edit"), **HX).status_code == 200
    saved = first.post(
        _url(note, "edit"),
        {"text": opened_text, "priority": raised, "reason": "urgent", "expected_version": 1},
        **HX,
    )
    assert saved.status_code == 200

    typed = "Customer wants a refund; the box was crushed."
    stale = second.post(
        _url(note, "edit"),
        {"text": typed, "priority": opened_priority, "reason": "clearer", "expected_version": 1},
        **HX,
    )

    assert stale.status_code == 422
    note.refresh_from_db()
    assert (note.text, note.priority, note.version) == (opened_text, raised, 2)
    assert AuditEvent.objects.filter(target_id=str(note.pk)).count() == 1
    html = stale.content.decode()
    # Who changed it meanwhile, with their reason, and what changed.
    assert "changed while you had it open" in html
    assert first.user.username in html and "urgent" in html
    assert f"Priority: {opened_priority} → {raised}" in html
    # What they typed is still in the form, now made from the current version; the
    # priority they did not touch follows the note's.
    assert f"{escape(typed)}</textarea>" in html
    assert 'name="expected_version" value="2"' in html
    assert f'<option value="{raised}" selected>' in html
    assert 'value="clearer"' in html

    resaved = second.post(
        _url(note, "edit"),
        {"text": typed, "priority": raised, "reason": "clearer", "expected_version": 2},
        **HX,
    )
    assert resaved.status_code == 200
    note.refresh_from_db()
    assert (note.text, note.priority, note.version) == (typed, raised, 3)


def test_a_stale_form_shows_the_text_changed_meanwhile_as_a_diff(login, observation):
    opened_text, opened_priority = observation.text, observation.priority
    first, second = login("reviewer"), login("reviewer")
    first.post(
        _url(observation, "edit"),
        {
            "text": "Customer wants a refund.",
            "priority": opened_priority,
            "reason": "shorter",
            "expected_version": 1,
        },
        **HX,
    )

    stale = second.post(
        _url(observation, "edit"),
        {
            "text": opened_text,
            "priority": "completed",
            "reason": "refund done",
            "expected_version": 1,
        },
        **HX,
    )

    assert stale.status_code == 422
    html = stale.content.decode()
    assert f'<span class="diff-del">-{escape(opened_text)}</span>' in html
    assert '<span class="diff-add">+Customer wants a refund.</span>' in html
    # They changed only the priority: the form now holds the text as it stands.
    assert "\nCustomer wants a refund.</textarea>" in html
    assert '<option value="completed" selected>' in html
    observation.refresh_from_db()
    assert (observation.priority, observation.version) == (opened_priority, 2)


def test_a_delete_from_a_stale_form_keeps_the_note_and_says_who_changed_it(login, observation):
    first, second = login("reviewer"), login("reviewer")
    form = second.get(_url(observation, "delete"), **HX).content.decode()
    assert 'type="hidden" name="expected_version" value="1"' in form
    first.post(
        _url(observation, "edit"),
        {
            "text": "Customer wants a refund.",
            "priority": observation.priority,
            "reason": "shorter",
            "expected_version": 1,
        },
        **HX,
    )

    stale = second.post(
        _url(observation, "delete"), {"reason": "duplicate", "expected_version": 1}, **HX
    )

    assert stale.status_code == 422
    assert Observation.objects.filter(pk=observation.pk).exists()
    html = stale.content.decode()
    assert "changed while you had it open" in html and first.user.username in html
    assert '<span class="diff-add">+Customer wants a refund.</span>' in html
    assert 'name="expected_version" value="2"' in html and 'value="duplicate"' in html

    deleted = second.post(
        _url(observation, "delete"), {"reason": "duplicate", "expected_version": 2}, **HX
    )
    assert deleted.status_code == 200
    assert not Observation.objects.filter(pk=observation.pk).exists()


def test_a_revert_from_a_stale_history_page_changes_nothing(login, observation):
    first, second = login("reviewer"), login("reviewer")
    first.post(
        _url(observation, "edit"),
        {"text": "Rewritten.", "priority": "low", "reason": "shorter", "expected_version": 1},
        **HX,
    )
    history = second.get(_url(observation, "history"), **HX).content.decode()
    assert 'type="hidden" name="expected_version" value="2"' in history
    first.post(
        _url(observation, "edit"),
        {"text": "Rewritten again.", "priority": "low", "reason": "clearer", "expected_version": 2},
        **HX,
    )

    stale = second.post(
        _url(observation, "revert"),
        {"version": 1, "reason": "undo", "expected_version": 2},
        **HX,
    )

    assert stale.status_code == 422
    observation.refresh_from_db()
    assert (observation.text, observation.version) == ("Rewritten again.", 3)
    html = stale.content.decode()
    assert "changed while you had it open" in html and first.user.username in html
    assert '<span class="diff-add">+Rewritten again.</span>' in html
    assert 'name="expected_version" value="3"' in html
