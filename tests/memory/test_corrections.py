"""A correction takes effect at once: after an observation or a reflection is edited,
re-prioritised, reverted or deleted, the very next context no longer carries what was
taken out, in any format, and what the Reflector re-derives afterwards carries the
correction."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.audit.writer import audit_text_digest
from governance.models import AuditEvent
from memory.engines.extractive import ExtractiveEngine
from memory.models import (
    Conversation,
    Observation,
    PipelineRun,
    Reflection,
    ReflectionVersion,
    ReflectorRun,
)
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.sweep import pipeline_sweep
from memory.services.observations import observation_create, observation_update
from tests.dashboard.factories import reflect
from tests.memory.factories import ReflectionFactory

FORMATS = ("json", "text", "messages")
HIGH = "\N{LARGE RED CIRCLE}"


def _built_from(observation: Observation, status: str = "active") -> list[Reflection]:
    return [
        r
        for r in Reflection.objects.filter(conversation_id=observation.conversation_id)
        if r.status == status and str(observation.pk) in r.source_observation_ids
    ]


def _context(api: APIClient, conversation: Conversation) -> dict[str, str]:
    """The context in every format, as the agent reads it."""
    bodies = {}
    for fmt in FORMATS:
        response = api.get(f"/v1/conversations/{conversation.pk}/context", {"format": fmt})
        assert response.status_code == 200
        bodies[fmt] = response.content.decode()
    return bodies


def _memory_lines(body: str, fmt: str) -> list[str]:
    """The memory lines of one rendered context."""
    if fmt == "text":
        return body.splitlines()
    if fmt == "messages":
        return json.loads(body)["messages"][0]["content"].splitlines()
    payload = json.loads(body)
    return [item["content"] for item in payload["reflections"] + payload["observations"]]


def _assert_nowhere(contexts: dict[str, str], words: str) -> None:
    for fmt, body in contexts.items():
        assert words not in body, f"the {fmt} context still carries {words!r}"


def _assert_everywhere(contexts: dict[str, str], words: str) -> None:
    for fmt, body in contexts.items():
        assert words in body, f"the {fmt} context lacks {words!r}"


def _served(api: APIClient, conversation: Conversation) -> dict:
    return json.loads(_context(api, conversation)["json"])


def _etag(api: APIClient, conversation: Conversation) -> str:
    return api.get(f"/v1/conversations/{conversation.pk}/context")["ETag"]


def _rederive(conversation: Conversation) -> ReflectorRun:
    """Run the re-derivation the correction scheduled, here, as the worker would."""
    run = ReflectorRun.objects.get(conversation=conversation, status=PipelineRun.Status.PENDING)
    assert run.trigger == "correction"
    outcome = reflector_run_execute(run_id=run.pk)
    assert outcome.run is not None
    assert outcome.run.status == "succeeded", outcome.run.error
    return outcome.run


def _path(observation: Observation) -> str:
    return f"/v1/conversations/{observation.conversation_id}/observations/{observation.pk}"


def _reflection_path(reflection: Reflection) -> str:
    return f"/v1/conversations/{reflection.conversation_id}/reflections/{reflection.pk}"


# --- corrections to an observation that was reflected ------------------------------------------


def test_editing_a_reflected_observation_is_served_at_once_and_rederived(
    curator_api, reflected_conversation, reflected_observation, django_capture_on_commit_callbacks
):
    [reflection] = _built_from(reflected_observation)
    _assert_everywhere(_context(curator_api, reflected_conversation), "email")
    etag = _etag(curator_api, reflected_conversation)

    with django_capture_on_commit_callbacks() as callbacks:
        response = curator_api.patch(
            _path(reflected_observation),
            {"content": "User prefers SMS over phone calls", "reason": "customer said SMS"},
            format="json",
        )
    assert response.status_code == 200
    assert callbacks, "the re-derivation is sent to the workers once the edit commits"

    reflection.refresh_from_db()
    assert reflection.status == "stale"
    now = _context(curator_api, reflected_conversation)
    _assert_nowhere(now, "email")
    _assert_everywhere(now, "User prefers SMS over phone calls")
    served = json.loads(now["json"])
    assert str(reflection.pk) not in [r["id"] for r in served["reflections"]]
    assert str(reflected_observation.pk) in [o["id"] for o in served["observations"]]
    assert _etag(curator_api, reflected_conversation) != etag

    _rederive(reflected_conversation)
    reflection.refresh_from_db()
    assert reflection.status == "superseded"
    successor = Reflection.objects.get(pk=reflection.superseded_by_id)
    assert successor.status == "active" and "SMS" in successor.text
    # Made again from the same sources: the corrected note still supersedes the older one.
    assert successor.source_observation_ids == reflection.source_observation_ids
    assert successor.generation == reflection.generation
    reflected_observation.refresh_from_db()
    assert (reflected_observation.status, reflected_observation.reflection_id) == (
        "reflected",
        successor.pk,
    )
    served = _served(curator_api, reflected_conversation)
    assert successor.text in [r["text"] for r in served["reflections"]]
    assert str(reflected_observation.pk) not in [o["id"] for o in served["observations"]]
    _assert_nowhere(_context(curator_api, reflected_conversation), "email")


def test_reprioritising_a_reflected_observation_is_served_at_once_and_rederived(
    curator_api, reflected_conversation, reflected_observation
):
    [reflection] = _built_from(reflected_observation)
    assert reflection.priority == "medium"

    response = curator_api.patch(
        _path(reflected_observation), {"priority": "high", "reason": "escalated"}, format="json"
    )
    assert response.status_code == 200

    for fmt, body in _context(curator_api, reflected_conversation).items():
        lines = [line for line in _memory_lines(body, fmt) if "email" in line]
        assert lines and all(line.startswith(HIGH) for line in lines), (fmt, lines)
    assert str(reflection.pk) not in [
        r["id"] for r in _served(curator_api, reflected_conversation)["reflections"]
    ]

    _rederive(reflected_conversation)
    reflection.refresh_from_db()
    successor = Reflection.objects.get(pk=reflection.superseded_by_id)
    assert successor.priority == "high"
    served = _served(curator_api, reflected_conversation)
    [line] = [r["content"] for r in served["reflections"] if "email" in r["content"]]
    assert line.startswith(HIGH)
    assert not [o for o in served["observations"] if "email" in o["text"]]
    assert AuditEvent.objects.filter(action="observation.reprioritise").count() == 1


def test_reverting_a_reflected_observation_is_served_at_once_and_rederived(
    curator_api, reflected_conversation, reflected_observation
):
    curator_api.patch(
        _path(reflected_observation),
        {"text": "User prefers SMS over phone calls", "reason": "r"},
        format="json",
    )
    _rederive(reflected_conversation)
    _assert_everywhere(_context(curator_api, reflected_conversation), "SMS")

    response = curator_api.post(
        f"{_path(reflected_observation)}/revert",
        {"version": 1, "reason": "it was email after all"},
        format="json",
    )
    assert response.status_code == 200

    now = _context(curator_api, reflected_conversation)
    _assert_nowhere(now, "SMS")
    _assert_everywhere(now, "email")
    _rederive(reflected_conversation)
    [current] = _built_from(reflected_observation)
    assert "email" in current.text and current.version == 1
    assert current.text in [
        r["text"] for r in _served(curator_api, reflected_conversation)["reflections"]
    ]
    _assert_nowhere(_context(curator_api, reflected_conversation), "SMS")


def test_deleting_a_reflected_observation_takes_it_out_at_once_and_for_good(
    curator_api, reflected_conversation, reflected_observation
):
    [reflection] = _built_from(reflected_observation)

    response = curator_api.delete(
        f"{_path(reflected_observation)}?reason=another customer's preference"
    )
    assert response.status_code == 204

    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    reflection.refresh_from_db()
    assert reflection.status == "stale"
    _rederive(reflected_conversation)
    reflection.refresh_from_db()
    # Its only source is gone: nothing replaces it.
    assert (reflection.status, reflection.superseded_by_id) == ("superseded", None)
    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    actions = list(
        AuditEvent.objects.filter(target_id__in=[str(reflected_observation.pk), str(reflection.pk)])
        .order_by("sequence")
        .values_list("action", "reason")
    )
    assert actions == [
        ("observation.delete", "another customer's preference"),
        ("reflection.stale", "another customer's preference"),
        (
            "reflection.rederive",
            "re-derived by the Reflector from its sources as they now stand",
        ),
    ]


def test_the_other_sources_of_a_reflection_are_served_in_its_place(
    curator_api, reflected_conversation
):
    """A reflection of several observations: one is deleted, the rest are served as
    they stand until the Reflector makes the reflection again from them."""
    email, parcel = (
        Observation.objects.get(conversation=reflected_conversation, text__contains=word)
        for word in ("email", "parcel")
    )
    summary = ReflectionFactory(
        conversation=reflected_conversation,
        text="User prefers email and drops the parcel off on Tuesday.",
        source_observation_ids=[str(email.pk), str(parcel.pk)],
    )
    Reflection.objects.filter(
        pk__in=[r.pk for r in _built_from(email) + _built_from(parcel)]
    ).exclude(pk=summary.pk).delete()
    Observation.objects.filter(pk__in=[email.pk, parcel.pk]).update(reflection=summary)
    assert "User prefers email and drops" in _context(curator_api, reflected_conversation)["text"]

    curator_api.delete(f"{_path(email)}?reason=not this customer")

    now = _context(curator_api, reflected_conversation)
    _assert_nowhere(now, "email")
    _assert_everywhere(now, parcel.text)
    assert str(parcel.pk) in [o["id"] for o in json.loads(now["json"])["observations"]]

    _rederive(reflected_conversation)
    summary.refresh_from_db()
    # One note alone condenses into nothing: the summary goes, and the parcel note is
    # served as the observation it is.
    assert (summary.status, summary.superseded_by_id) == ("superseded", None)
    parcel.refresh_from_db()
    assert (parcel.status, parcel.reflection_id) == ("active", None)
    served = _served(curator_api, reflected_conversation)
    assert parcel.text in [o["text"] for o in served["observations"]]
    assert summary.text not in [r["text"] for r in served["reflections"]]
    _assert_nowhere(_context(curator_api, reflected_conversation), "email")


def test_a_tags_only_edit_leaves_the_reflection_served(
    curator_api, reflected_conversation, reflected_observation
):
    [reflection] = _built_from(reflected_observation)
    curator_api.patch(
        _path(reflected_observation), {"tags": ["contact"], "reason": "filing"}, format="json"
    )
    reflection.refresh_from_db()
    assert reflection.status == "active"
    assert not ReflectorRun.objects.filter(status="pending").exists()


def test_a_rederivation_leaves_active_observations_to_their_threshold(
    curator_api, reflected_conversation, reflected_observation
):
    # A newer change of mind, which a run reading the active observations would condense
    # with the corrected one.
    fresh = observation_create(
        conversation=reflected_conversation,
        actor=SYSTEM_ACTOR,
        text="User now prefers letters over phone calls.",
    )
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers SMS over phone calls.", "reason": "r"},
        format="json",
    )
    run = _rederive(reflected_conversation)
    assert run.items_in == 2  # the stale reflection's two sources, condensed again
    fresh.refresh_from_db()
    assert fresh.status == "active"
    assert all(str(fresh.pk) not in r.source_observation_ids for r in Reflection.objects.all())


def test_reflect_now_while_a_rederivation_waits_reflects_the_active_observations_too(
    curator_api, reflected_conversation, reflected_observation
):
    fresh = observation_create(
        conversation=reflected_conversation,
        actor=SYSTEM_ACTOR,
        text="User now prefers letters over phone calls.",
    )
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers SMS over phone calls.", "reason": "r"},
        format="json",
    )
    waiting = ReflectorRun.objects.get(conversation=reflected_conversation, status="pending")

    run = curator_api.post(
        f"/v1/conversations/{reflected_conversation.pk}/reflect?wait=true"
    ).json()

    assert (run["id"], run["trigger"], run["status"]) == (str(waiting.pk), "manual", "succeeded")
    fresh.refresh_from_db()
    assert fresh.status == "reflected"
    [current] = _built_from(reflected_observation)
    # The active change of mind, read with the stale reflection's sources, supersedes them.
    assert "letters" in current.text and str(fresh.pk) in current.source_observation_ids


def test_a_correction_made_while_the_reflector_works_is_not_lost(
    curator_api, reflected_conversation, reflected_observation, fake_engine
):
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers SMS over phone calls.", "reason": "r"},
        format="json",
    )

    class CorrectedMeanwhile(ExtractiveEngine):
        def reflect(self, observations, *, now):
            drafts = super().reflect(observations, now=now)
            if not Observation.objects.filter(text__contains="letters").exists():
                observation_update(
                    observation=reflected_observation,
                    actor=SYSTEM_ACTOR,
                    reason="the customer wrote again",
                    text="User prefers letters over phone calls.",
                )
            return drafts

    fake_engine(CorrectedMeanwhile())
    run = ReflectorRun.objects.get(conversation=reflected_conversation, status="pending")
    outcome = reflector_run_execute(run_id=run.pk, final_attempt=False)
    assert outcome.retry and "corrected while the Reflector worked" in outcome.run.error
    assert not Reflection.objects.filter(text__contains="SMS").exists()

    outcome = reflector_run_execute(run_id=run.pk)
    assert outcome.run.status == "succeeded"
    [current] = _built_from(reflected_observation)
    assert "letters" in current.text
    _assert_nowhere(_context(curator_api, reflected_conversation), "SMS")


def test_the_sweeper_rederives_what_a_failed_run_left_stale(
    curator_api, reflected_conversation, reflected_observation, monkeypatch
):
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers SMS over phone calls.", "reason": "r"},
        format="json",
    )
    ReflectorRun.objects.filter(status="pending").update(status="failed")
    monkeypatch.setattr("memory.pipeline.scheduling.FAILURE_COOLDOWN", timedelta(0))

    assert pipeline_sweep()["reflector_scheduled"] == 1
    _rederive(reflected_conversation)
    [current] = _built_from(reflected_observation)
    assert "SMS" in current.text


# --- corrections to a reflection -------------------------------------------------------------


@pytest.fixture
def reflection(reflected_observation) -> Reflection:
    [reflection] = _built_from(reflected_observation)
    return reflection


def test_editing_a_reflection_is_served_at_once_and_kept_by_the_reflector(
    curator_api, reflected_conversation, reflection
):
    response = curator_api.patch(
        _reflection_path(reflection),
        {"content": "User prefers SMS over phone calls.", "reason": "summary was wrong"},
        format="json",
    )
    assert response.status_code == 200
    assert (response.json()["version"], response.json()["status"]) == (2, "active")

    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    _assert_everywhere(
        _context(curator_api, reflected_conversation), "User prefers SMS over phone calls."
    )
    reflect(reflected_conversation)  # a Reflector run: nothing it reads makes it touch the edit
    reflection.refresh_from_db()
    assert (reflection.status, reflection.text) == ("active", "User prefers SMS over phone calls.")
    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    event = AuditEvent.objects.get(action="reflection.edit")
    kept = ReflectionVersion.objects.get(reflection_id=reflection.pk)
    assert kept.text.startswith("User prefers email over phone calls, since ")
    assert event.before["textDigest"] == audit_text_digest(kept.text)
    assert (event.after["textDigest"], event.reason) == (
        audit_text_digest("User prefers SMS over phone calls."),
        "summary was wrong",
    )


def test_a_person_s_edit_of_a_stale_reflection_stands_until_its_sources_change(
    curator_api, reflected_conversation, reflected_observation, reflection
):
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers SMS over phone calls.", "reason": "r"},
        format="json",
    )
    reflection.refresh_from_db()
    assert reflection.status == "stale"

    curator_api.patch(
        _reflection_path(reflection),
        {"content": "User wants texts, never calls.", "reason": "my wording"},
        format="json",
    )
    reflection.refresh_from_db()
    assert reflection.status == "active"
    run = _rederive(reflected_conversation)
    assert run.items_out == 0
    reflection.refresh_from_db()
    assert (reflection.status, reflection.text) == ("active", "User wants texts, never calls.")
    served = _served(curator_api, reflected_conversation)
    assert "User wants texts, never calls." in [r["text"] for r in served["reflections"]]
    assert str(reflected_observation.pk) not in [o["id"] for o in served["observations"]]

    # Its source changes again: the source is newer than the person's wording.
    curator_api.patch(
        _path(reflected_observation),
        {"content": "User prefers letters over phone calls.", "reason": "r"},
        format="json",
    )
    reflection.refresh_from_db()
    assert reflection.status == "stale"
    _rederive(reflected_conversation)
    reflection.refresh_from_db()
    assert reflection.status == "superseded"
    assert "letters" in Reflection.objects.get(pk=reflection.superseded_by_id).text


def test_reprioritising_a_reflection_is_served_at_once(
    curator_api, reflected_conversation, reflection
):
    response = curator_api.patch(
        _reflection_path(reflection), {"priority": "high", "reason": "matters"}, format="json"
    )
    assert response.status_code == 200
    for fmt, body in _context(curator_api, reflected_conversation).items():
        lines = [line for line in _memory_lines(body, fmt) if "email" in line]
        assert lines and all(line.startswith(HIGH) for line in lines), (fmt, lines)
    reflect(reflected_conversation)
    reflection.refresh_from_db()
    assert (reflection.status, reflection.priority) == ("active", "high")
    assert AuditEvent.objects.filter(action="reflection.reprioritise").count() == 1


def test_reverting_a_reflection_is_served_at_once(curator_api, reflected_conversation, reflection):
    path = _reflection_path(reflection)
    curator_api.patch(path, {"text": "User prefers SMS.", "reason": "r"}, format="json")
    _assert_everywhere(_context(curator_api, reflected_conversation), "SMS")

    response = curator_api.post(f"{path}/revert", {"version": 1, "reason": "undo"}, format="json")
    assert response.status_code == 200
    assert response.json()["version"] == 3

    now = _context(curator_api, reflected_conversation)
    _assert_nowhere(now, "SMS")
    _assert_everywhere(now, "email")
    reflect(reflected_conversation)
    _assert_nowhere(_context(curator_api, reflected_conversation), "SMS")
    assert AuditEvent.objects.get(action="reflection.revert").after["revertedTo"] == 1


def test_deleting_a_reflection_takes_it_out_at_once_and_for_good(
    curator_api, reflected_conversation, reflected_observation, reflection
):
    response = curator_api.delete(_reflection_path(reflection), {"reason": "wrong"}, format="json")
    assert response.status_code == 204

    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    reflect(reflected_conversation)
    _assert_nowhere(_context(curator_api, reflected_conversation), "email")
    reflected_observation.refresh_from_db()
    assert (reflected_observation.status, reflected_observation.reflection_id) == (
        "reflected",
        None,
    )
    assert not Reflection.objects.filter(pk=reflection.pk).exists()
    deleted = AuditEvent.objects.get(action="reflection.delete")
    assert deleted.before["textDigest"] == audit_text_digest(reflection.text)
