"""What someone needs, however the sentence opens, and what is put forward for it; what a
system message says of the user. Pure engine tests: no database."""

from __future__ import annotations

from memory.engines.base import ObserverOutput
from memory.engines.extractive import ExtractiveEngine
from tests.memory.builders import TUESDAY, source_messages, texts


def observe(*turns: tuple[str, str]) -> ObserverOutput:
    return ExtractiveEngine().observe(
        source_messages(*turns), previous_observations=(), now=TUESDAY
    )


def test_a_need_after_an_opening_phrase_is_kept_with_the_suggestion_that_answers_it():
    notes = texts(
        observe(
            ("user", "For the hike on Saturday I need a waterproof jacket in size M."),
            ("assistant", "The Ridge 3 shell would suit a wet hike."),
        )
    )
    [note] = [n for n in notes if "jacket" in n]
    assert note.startswith("User requested a waterproof jacket in size M for the hike")
    assert "Assistant said the Ridge 3 shell would suit a wet hike" in note


def test_what_a_system_message_says_of_the_user_is_a_fact_its_instructions_are_not():
    notes = texts(
        observe(
            ("system", "You are a helpful travel agent. Be brief."),
            ("system", "The user is travelling to Norway in May."),
            ("user", "What should I pack?"),
        )
    )
    assert "User is travelling to Norway in May" in notes
    assert not any("helpful travel agent" in n or "brief" in n for n in notes)
