"""No malformed pseudonym reaches a tier: whatever an engine writes (a model may write
``<PERSON3>`` or a bare ``PERSON_3``), the pipeline stores the label it was given, and a
label it was never given as no label at all."""

from __future__ import annotations

from dataclasses import dataclass

from governance.redaction.labels import malformed_pseudonyms
from memory.engines.base import DraftObservation, DraftReflection, ObserverOutput
from memory.models import Observation, Reflection
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.services.messages import MessageInput, messages_append
from tests.memory.factories import ObservationFactory


@dataclass
class ManglingEngine:
    """Writes back the labels it reads without their underscore, and one label it was
    never given, bare."""

    name = "extractive"
    model = ""
    prompt_version = ""

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        return ObserverOutput(
            observations=[
                DraftObservation(
                    text="User asked PERSON_41 and <LOCATION7> about it",
                    priority="medium",
                    referenced_at=None,
                    source_message_ids=[messages[0].id],
                )
            ]
        )

    def reflect(self, observations, *, now):
        text = "; ".join(o.text for o in observations).replace("<PERSON_3>", "<PERSON3>")
        return [
            DraftReflection(
                text=f"{text}; also PERSON_9",
                priority="medium",
                referenced_at=None,
                source_observation_ids=[o.id for o in observations],
            )
        ]


def test_a_reflection_holds_the_label_its_sources_gave_not_the_engines_misspelling(
    conversation, fake_engine
):
    fake_engine(ManglingEngine())
    ObservationFactory(conversation=conversation, text="User met <PERSON_3> on Friday")
    ObservationFactory(conversation=conversation, text="<PERSON_3> owes User $20")
    run = reflector_schedule(conversation=conversation, trigger="manual")
    assert reflector_run_execute(run_id=run.pk).run.status == "succeeded"
    [reflection] = Reflection.objects.filter(conversation=conversation)
    assert reflection.text.count("<PERSON_3>") == 2
    assert "[PERSON]" in reflection.text  # PERSON_9 was nobody the engine was given
    assert malformed_pseudonyms(reflection.text) == []


def test_an_observation_never_stores_a_malformed_label(conversation, fake_engine):
    fake_engine(ManglingEngine())
    messages_append(conversation=conversation, items=[MessageInput(role="user", content="Hi")])
    run = observer_schedule(conversation=conversation, trigger="manual")
    assert observer_run_execute(run_id=run.pk).run.status == "succeeded"
    [note] = Observation.objects.filter(conversation=conversation)
    assert note.text == "User asked [PERSON] and [LOCATION] about it"
