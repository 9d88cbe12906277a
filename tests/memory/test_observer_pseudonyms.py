"""A pseudonym is one word to the extractive Observer: ``<PERSON_12>`` written into a
message reaches the notes byte for byte, wherever it stands, and never as ``<PERSON12>``,
``PERSON_12`` or ``Person_12``. Pure engine tests: no database."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from memory.engines.base import ObserverOutput, SourceMessage
from memory.engines.extractive import ExtractiveEngine
from tests.memory.builders import TUESDAY, source_messages, texts

LABEL = re.compile(r"<[A-Z][A-Z0-9_]*_[1-9][0-9]*>")
# What a broken label looks like: brackets or underscore or number lost, or re-cased.
BROKEN = re.compile(
    r"<[A-Z_]*[A-Z][0-9]+>"  # the underscore lost
    r"|(?<!<)\b(?:PERSON|LOCATION|EMAIL_ADDRESS|PHONE_NUMBER)_?[0-9]+"  # the brackets lost
    r"|<[A-Za-z_]+_[0-9]+(?![0-9>])"  # cut
    r"|<(?:Person|person|Location|location)_[0-9]+>"  # re-cased
)


def observe(*turns: tuple[str, str], previous: tuple[str, ...] = ()) -> ObserverOutput:
    return ExtractiveEngine().observe(
        source_messages(*turns), previous_observations=previous, now=TUESDAY
    )


def labels_in(output: ObserverOutput) -> list[str]:
    return [label for text in texts(output) for label in LABEL.findall(text)]


def assert_whole(output: ObserverOutput, expected: set[str]) -> None:
    joined = "\n".join(texts(output))
    assert not BROKEN.search(joined), joined
    assert set(labels_in(output)) == expected, joined


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # at the start of a sentence, and in the middle
        ([("user", "<PERSON_3> is my sister and she lives in <LOCATION_51>.")],
         {"<PERSON_3>", "<LOCATION_51>"}),
        # possessive
        ([("user", "My friend <PERSON_3>'s birthday is next Friday, I need to buy a gift.")],
         {"<PERSON_3>"}),
        # a list of three
        ([("user", "I invited <PERSON_3>, <PERSON_14> and <PERSON_5> to my wedding in "
                   "<LOCATION_2>.")],
         {"<PERSON_3>", "<PERSON_14>", "<PERSON_5>", "<LOCATION_2>"}),
        # after "I'm", and an e-mail label
        ([("user", "I'm <PERSON_12>. My email is <EMAIL_ADDRESS_3>.")],
         {"<PERSON_12>", "<EMAIL_ADDRESS_3>"}),
        # in a tool's JSON and in a tool's plain text
        ([("user", "I need a refund"),
          ("tool:lookup", '{"customer_name": "<PERSON_3>", "order_id": "A1", '
                          '"city": "<LOCATION_2>"}'),
          ("tool:crm", "Account has been pulled up for <PERSON_7>.")],
         {"<PERSON_3>", "<LOCATION_2>", "<PERSON_7>"}),
        # in an assistant's list items (bold, markdown) and its prose
        ([("user", "What can I cook tonight?"),
          ("assistant", "Here are some ideas:\n1. <PERSON_3>'s pie - classic\n"
                        "2. **<LOCATION_4> stew**: hearty\n\n"
                        "You could also ask <PERSON_5> at <LOCATION_6> for tips.")],
         {"<PERSON_3>", "<LOCATION_4>", "<PERSON_5>", "<LOCATION_6>"}),
        # two labels on one line do not make it read as code
        ([("user", "Who runs the bakery?"),
          ("assistant", "The owner is <PERSON_5>, who runs it with <PERSON_6> in <LOCATION_6> "
                        "since 2019.")],
         {"<PERSON_5>", "<PERSON_6>", "<LOCATION_6>"}),
        # a semicolon and two labels: still a sentence, not pasted code
        ([("user", "My parcel to <LOCATION_5> is two weeks late; <PERSON_2> needs it by "
                   "Friday.")],
         {"<LOCATION_5>", "<PERSON_2>"}),
    ],
)  # fmt: skip
def test_a_pseudonym_survives_observation_byte_for_byte(turns, expected):
    assert_whole(observe(*turns), expected)


def test_a_greeted_pseudonym_is_dropped_with_the_greeting_as_a_name_would_be():
    output = observe(("user", "Hi <PERSON_7>, I moved to <LOCATION_9> last week."))
    assert texts(output) == ["User moved to <LOCATION_9> the week of Feb 3"]


def test_a_message_opening_with_a_pseudonym_and_a_colon_is_that_person_speaking():
    output = observe(("user", "<PERSON_3>: I prefer tea over coffee."))
    assert texts(output) == ["<PERSON_3> prefers tea over coffee"]


def test_a_pseudonymous_speaker_is_named_by_the_label():
    messages = [
        replace(m, speaker="<PERSON_21>")
        for m in source_messages(("user", "I moved to <LOCATION_2> and I love it."))
    ]
    output = ExtractiveEngine().observe(messages, previous_observations=(), now=TUESDAY)
    assert texts(output) == ["<PERSON_21> moved to <LOCATION_2> and <PERSON_21> loves it"]


def test_a_known_fact_with_a_pseudonym_is_not_repeated():
    previous = ("User's sister <PERSON_3> lives in <LOCATION_51>",)
    output = observe(("user", "My sister <PERSON_3> lives in <LOCATION_51>."), previous=previous)
    assert texts(output) == []


def test_two_people_are_two_facts():
    previous = ("User's sister <PERSON_3> lives in <LOCATION_51>",)
    output = observe(("user", "My sister <PERSON_4> lives in <LOCATION_51>."), previous=previous)
    assert_whole(output, {"<PERSON_4>", "<LOCATION_51>"})


def test_the_replace_operator_label_is_kept_too():
    output = observe(("user", "My neighbour <PERSON> lent me a drill for the shelves."))
    assert "<PERSON>" in " ".join(texts(output))


def test_a_long_message_full_of_labels_keeps_every_label_whole():
    people = [f"<PERSON_{n}>" for n in range(1, 31)]
    content = " ".join(
        f"I met {person} in <LOCATION_{n}> on day {n}." for n, person in enumerate(people, 1)
    )
    output = observe(("user", content))
    joined = "\n".join(texts(output))
    assert not BROKEN.search(joined)
    assert labels_in(output), joined


def test_the_open_request_keeps_its_label():
    output = observe(("user", "Can you book a table for me and <PERSON_8> at <LOCATION_3>?"))
    assert output.current_task is not None
    assert "<PERSON_8>" in output.current_task and "<LOCATION_3>" in output.current_task


def test_text_that_only_looks_like_a_placeholder_is_left_alone():
    sources: list[SourceMessage] = source_messages(
        ("user", "My cat is called Zqpav and <PERSON_1> feeds her.")
    )
    output = ExtractiveEngine().observe(sources, previous_observations=(), now=TUESDAY)
    joined = " ".join(texts(output))
    assert "Zqpav" in joined and "<PERSON_1>" in joined


def test_a_label_glued_to_a_word_is_set_apart_and_stays_whole():
    output = observe(
        ("user", "Who holds the 100 metre record?"),
        ("assistant", "The record is held by <PERSON_12>Joyner of the USA since 1988."),
    )
    joined = "\n".join(texts(output))
    assert "<PERSON_12> Joyner" in joined
    assert not BROKEN.search(joined)
