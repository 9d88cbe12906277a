"""Whose word a note is (issue 27, item 4): every note says who wrote it (an engine and its
model, an agent's key, a person) and who corrected it last, in the JSON context and on the
conversation page; and a person's words are never rewritten by the Reflector."""

from __future__ import annotations

import pytest
from django.utils import timezone

from core.actors import Actor
from memory.models import Observation, Reflection
from memory.selectors import rederivable_reflections
from memory.services.observations import observation_create, observation_update
from memory.services.reflections import reflection_update
from tests.dashboard.factories import reflect
from tests.memory.factories import ObservationFactory
from tests.memory.fake_engines import CondensesEverything


def _served(api, conversation) -> dict:
    return api.get(f"/v1/conversations/{conversation.pk}/context").json()


@pytest.fixture
def person(member) -> Actor:
    user = member("reviewer")
    return Actor(type="user", id=str(user.pk), role="reviewer")


@pytest.mark.django_db
def test_the_context_says_whose_word_each_note_is(api, workspace, conversation, person):
    machine = ObservationFactory(
        conversation=conversation, text="User ordered a kettle.", engine="extractive"
    )
    agent = Actor(type="api_key", id="7f1c", role="agent")
    typed = observation_create(
        conversation=conversation, actor=agent, text="User is travelling Friday.", reason=""
    )
    observation_update(
        observation=machine, actor=person, reason="it was a toaster", text="User ordered a toaster."
    )

    served = {o["id"]: o["origin"] for o in _served(api, conversation)["observations"]}

    corrected, by_agent = served[str(machine.pk)], served[str(typed.pk)]
    assert corrected["kind"] == "observer" and corrected["engine"] == "extractive"
    assert corrected["writtenBy"] is None
    assert corrected["correctedBy"] == person.label and corrected["correctedAt"]
    assert corrected["personsWords"] is True
    assert by_agent == {
        "kind": "agent",
        "engine": None,
        "model": None,
        "writtenBy": "api_key:7f1c",
        "correctedBy": None,
        "correctedAt": None,
        "personsWords": False,
    }


@pytest.mark.django_db
def test_a_corrected_observation_survives_the_next_reflector_run_word_for_word(
    api, conversation, person, fake_engine
):
    engine = fake_engine(CondensesEverything("Customer story, condensed."))
    notes = [
        ObservationFactory(conversation=conversation, text=f"User mentioned parcel {n}.")
        for n in range(3)
    ]
    words = "User's parcel 2 is the blue one — deliver it before the trip on Friday."
    observation_update(observation=notes[2], actor=person, reason="wrong city", text=words)

    reflect(conversation)

    assert words not in engine.seen and len(engine.seen) == 2  # never given to the engine
    kept = Observation.objects.get(pk=notes[2].pk)
    assert (kept.status, kept.text) == ("active", words)
    assert words in [o["text"] for o in _served(api, conversation)["observations"]]
    assert Reflection.objects.get(conversation=conversation).source_observation_ids == [
        str(n.pk) for n in notes[:2]
    ]


@pytest.mark.django_db
def test_a_corrected_source_of_a_reflection_is_served_as_written_once_it_is_re_derived(
    api, reflected_conversation, reflected_observation, person
):
    words = "User prefers e-mail, never phone calls, even for urgent matters."
    observation_update(
        observation=reflected_observation, actor=person, reason="she said so", text=words
    )

    reflect(reflected_conversation)

    restored = Observation.objects.get(pk=reflected_observation.pk)
    assert (restored.status, restored.reflection_id, restored.text) == ("active", None, words)
    served = _served(api, reflected_conversation)
    assert words in [o["text"] for o in served["observations"]]
    assert not any(str(restored.pk) in r["sourceObservationIds"] for r in served["reflections"])


@pytest.mark.django_db
def test_a_reflection_in_a_persons_words_is_not_rewritten_when_its_sources_change(
    reflected_conversation, reflected_observation, person
):
    reflection = reflected_observation.reflection
    words = "Customer wants every update by e-mail; confirmed on the phone on Monday."
    reflection_update(reflection=reflection, actor=person, reason="merged by hand", text=words)
    observation_update(
        observation=reflected_observation, actor=person, reason="typo", priority="high"
    )
    assert Reflection.objects.get(pk=reflection.pk).status == "stale"

    reflect(reflected_conversation)

    after = Reflection.objects.get(pk=reflection.pk)
    assert (after.status, after.text, after.superseded_by_id) == ("stale", words, None)
    assert not rederivable_reflections(conversation=reflected_conversation).exists()
    # Its sources are served in its place until a person edits or deletes it.
    source = Observation.objects.get(pk=reflected_observation.pk)
    assert source.reflection_id == reflection.pk
    assert after.corrected_by == person.label and after.corrected_at <= timezone.now()


@pytest.mark.django_db
def test_the_conversation_page_says_who_wrote_and_corrected_a_note(client, member, conversation):
    user = member("reviewer")
    client.force_login(user)
    note = ObservationFactory(
        conversation=conversation, text="User ordered a kettle.", engine="extractive"
    )
    observation_update(
        observation=note,
        actor=Actor(type="user", id=str(user.pk), role="reviewer"),
        reason="wrong item",
        text="User ordered a toaster.",
    )

    html = client.get(f"/conversations/{conversation.pk}/").content.decode()

    item = html.split(f'id="obs-{note.pk}"', 1)[1].split("</li>", 1)[0]
    assert "observer engine (extractive)" in item
    assert f"corrected by {user.username}" in item and "a person's words" in item
