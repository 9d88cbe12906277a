"""What the extractive Observer keeps of an assistant's answer, and what each fidelity
level keeps: the things later questions ask about ("what was the 4th app you listed?",
"how long did you say to leave it on?")."""

from __future__ import annotations

from memory.engines.base import FIDELITIES, ObserverOutput
from memory.engines.extractive import ExtractiveEngine
from memory.tokens import token_count
from tests.memory.builders import TUESDAY, source_messages, texts

APPS = """Here are some language learning apps:

1. Duolingo - Duolingo offers gamified exercises to learn new words.
2. **Rosetta Stone**: immersive lessons with speech recognition.
3. Babbel - Babbel provides lessons in bite-sized chunks of 10 minutes.
4. Memrise - Memrise uses mnemonics to help learners memorize words and phrases.

Whichever you choose, practise a little every day!"""


def observe(*turns: tuple[str, str], fidelity: str = "balanced") -> ObserverOutput:
    return ExtractiveEngine().observe(
        source_messages(*turns), previous_observations=(), now=TUESDAY, fidelity=fidelity
    )


def test_a_list_answer_keeps_every_items_head_in_order_with_its_numbers():
    output = observe(("user", "Can you suggest some language learning apps?"), ("assistant", APPS))
    assert texts(output) == [
        "User asked Assistant to suggest some language learning apps; Assistant listed "
        "Duolingo; Rosetta Stone; Babbel (10 minutes); Memrise"
    ]
    assert output.observations[0].source_message_ids == ["m1", "m2"]


def test_prose_answers_keep_the_names_and_counted_numbers_they_mention():
    answer = (
        "There are many great food options near the Vatican. One popular option is "
        "Pizzarium. There's also Roscioli, a famous deli that serves the best cured meats. "
        "A study in the journal Music and Medicine involved 38 subjects."
    )
    (note,) = observe(
        ("user", "Where should I eat near the Vatican?"), ("assistant", answer)
    ).observations
    asked, answered = note.text.split("; Assistant ", 1)
    for kept in ("Pizzarium", "Roscioli", "Medicine", "38 subjects"):
        assert kept in answered
    assert "Vatican" in asked and "Vatican" not in answered  # said once is enough


def test_what_memory_already_holds_is_not_mentioned_again():
    output = ExtractiveEngine().observe(
        source_messages(("assistant", "Roscioli is open late and Pizzarium closes at 9 pm.")),
        previous_observations=["Assistant mentioned Roscioli"],
        now=TUESDAY,
    )
    assert texts(output) == ["Assistant mentioned Pizzarium, 9 pm"]


def test_names_in_code_and_quoted_dialogue_are_not_mentions():
    answer = (
        "Use this:\n```python\nHeight = Model(Name='Liver Disease')\n```\n"
        '"I love you too, kitten." said Lizzie.'
    )
    output = observe(("assistant", answer))
    joined = " ".join(texts(output))
    assert "Liver Disease" not in joined and "kitten" not in joined
    assert "Lizzie" in joined


def test_reactions_to_advice_and_question_fragments_are_not_notes():
    output = observe(
        ("user", "Those all sound like amazing memoirs. Or is a soft case sufficient?"),
        ("user", "I like the sound of those ingredients."),
    )
    assert texts(output) == []


def test_no_note_is_ever_cut_mid_thought():
    long_sentence = (
        "I recently started waking up at 7:00 AM, which is a big improvement from my usual "
        "8:30 AM wake-up call, and I want to make sure I'm fueling up with a nutritious "
        "breakfast, because my workouts at the gym on Elm Street start at 8 and last an hour"
    )
    for fidelity in FIDELITIES:
        for text in texts(observe(("user", long_sentence + "."), fidelity=fidelity)):
            assert "…" not in text and not text.endswith((",", ";", " and", " of"))


def test_fidelity_levels_trade_size_for_detail():
    turns = (
        ("user", "Can you suggest some language learning apps? I travel to Lisbon in May."),
        ("assistant", APPS + "\n\nIn Lisbon, the Instituto Camões runs courses of 30 hours."),
    )
    sizes = {}
    for fidelity in FIDELITIES:
        joined = " ".join(texts(observe(*turns, fidelity=fidelity)))
        sizes[fidelity] = token_count(joined)
        assert "Duolingo" in joined  # every level keeps the first items of a list
    assert sizes["compact"] < sizes["balanced"] < sizes["detailed"]
    detailed = " ".join(texts(observe(*turns, fidelity="detailed")))
    assert "mnemonics" in detailed  # an item's gist, beside its head
    assert "Instituto Camões" not in " ".join(texts(observe(*turns, fidelity="compact")))


def test_a_name_prefix_says_who_spoke():
    output = observe(("user", "Jo: I moved to Oslo last month and my dog hates the snow."))
    assert texts(output) == ["Jo moved to Oslo in January and Jo's dog hates the snow"]


def test_a_label_or_a_pasted_dialogue_is_not_a_speaker():
    labelled = observe(("user", "Note: I moved to Oslo in May."))
    assert texts(labelled)[0].startswith("User ") and "Note moved" not in texts(labelled)[0]
    # A speaker's name starts with a known first name: "Remember:" is not one.
    reminder = observe(("user", "Remember: I moved to Oslo in May."))
    assert not texts(reminder)[0].startswith("Remember ")
    dialogue = observe(("user", "Ann: I moved to Oslo in May.\nBob: I stayed in Rome."))
    assert all(text.startswith("User") for text in texts(dialogue))


def test_a_named_assistant_lists_under_its_name():
    output = ExtractiveEngine().observe(
        [
            *source_messages(("user", "Which apps should I try?")),
            *[
                m.__class__(**{**m.__dict__, "id": "m2", "seq": 2, "speaker": "Nova"})
                for m in source_messages(("assistant", APPS))
            ],
        ],
        previous_observations=(),
        now=TUESDAY,
    )
    assert texts(output)[0].endswith(
        "Nova listed Duolingo; Rosetta Stone; Babbel (10 minutes); Memrise"
    )


def test_pasted_code_is_not_noted_as_something_said():
    output = observe(
        (
            "user",
            'Update reply{\n  Ldap-Group-Name := "%{1}";\n}\n'
            "I want the reject message to name the group Finance.",
        )
    )
    joined = " ".join(texts(output))
    assert "Finance" in joined
    assert "Ldap" not in joined and "{" not in joined


def test_a_question_back_to_the_user_is_not_a_list_item():
    answer = "A few questions first:\n1. What's your budget?\n2. Sonos Beam - $299."
    joined = " ".join(texts(observe(("assistant", answer))))
    assert "Sonos Beam ($299)" in joined and "budget" not in joined
