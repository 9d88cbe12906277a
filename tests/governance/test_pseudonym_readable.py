"""Pseudonyms a person can read: products, brands, works, months and seasons stay as
written while people are still pseudonymised; a name's span is the name; one person is
one label, wherever and however often they are named, speaking or spoken of. The
dialogues are written for these tests, in the manner of support chats and chatty
assistant sessions."""

from __future__ import annotations

import re

import pytest
from django.db import transaction

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent, Pseudonym, RedactionFinding, RedactionPolicy
from governance.redaction.gates import (
    message_ingest,
    observer_reading,
    redaction_gate_for_reflection,
)
from governance.redaction.labels import malformed_pseudonyms
from governance.redaction.presidio import PolicySpec, engine
from governance.redaction.pseudonyms import WorkspacePseudonyms, value_digest
from governance.redaction.reveal import pseudonym_reveal
from memory.models import Conversation, Message, Observation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.factories import ObservationFactory

LABEL = re.compile(r"<[A-Z_]+_\d+>")


def _preview(client, text: str) -> dict:
    """The preview ``client``'s key gets. The tests of labels use a compliance key's: an
    agent key is told each value's type, never its pseudonym."""
    response = client.post("/v1/redaction/preview", {"text": text}, format="json")
    assert response.status_code == 200
    return response.json()


def _labels(text: str) -> list[str]:
    return LABEL.findall(text)


# --- one person, one label ------------------------------------------------------------------


def test_the_preview_gives_both_mentions_of_maria_lopez_one_label(compliance_api):
    body = _preview(
        compliance_api,
        "Maria Lopez called about her order. Later Maria Lopez wrote again, and Tom Berg replied.",
    )

    assert body["redactedText"] == (
        "<PERSON_1> called about her order. Later <PERSON_1> wrote again, and <PERSON_2> replied."
    )
    assert body["newPseudonyms"] == ["<PERSON_1>", "<PERSON_2>"]


def test_a_name_after_i_am_is_the_name_alone(compliance_api):
    body = _preview(compliance_api, "Hi, I'm Maria Gonzalez and my parcel is late.")

    assert body["redactedText"] == "Hi, I'm <PERSON_1> and my parcel is late."


def test_a_possessive_stays_outside_the_label(compliance_api):
    body = _preview(compliance_api, "Priya Raman wrote back. Priya Raman's parcel is in Leeds.")

    assert body["redactedText"].startswith("<PERSON_1> wrote back. <PERSON_1>'s parcel is in ")


def test_a_first_name_alone_is_the_full_names_person_when_only_one_has_it(compliance_api):
    body = _preview(
        compliance_api,
        "Maria Lopez called about her refund. Maria wants it by Friday, Tom Berg said.",
    )

    assert body["redactedText"] == (
        "<PERSON_1> called about her refund. <PERSON_1> wants it by Friday, <PERSON_2> said."
    )


def test_a_first_name_two_people_share_keeps_a_label_of_its_own(compliance_api):
    body = _preview(
        compliance_api,
        "Maria Lopez and Maria Gonzalez called. Maria wants a refund, said Tom Berg.",
    )

    labels = _labels(body["redactedText"])
    assert len(labels) == 4
    lopez, gonzalez, maria, _tom = labels
    assert len({lopez, gonzalez, maria}) == 3


def test_a_name_the_workspace_holds_is_found_where_the_tagger_misses_it(compliance_api, workspace):
    # Alone, the small pipeline reads "Zorbo Quill again?" as an organisation: nothing
    # is found in a workspace that never met her.
    assert _preview(compliance_api, "Zorbo Quill again?")["findings"] == []
    [label] = _labels(
        _read(workspace, [MessageInput(role="user", content="Is Zorbo Quill home?")]).contents[0]
    )

    body = _preview(compliance_api, "Zorbo Quill again?")

    assert body["redactedText"] == f"{label} again?"
    assert [f["recognizer"] for f in body["findings"]] == ["KnownPseudonym"]
    assert body["newPseudonyms"] == []


def test_a_speakers_first_name_is_theirs_inside_a_title_too(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Ross Geller", content="I have news."),
            MessageInput(
                role="user",
                name="Narrator",
                content="[The next clip is from The One Where Ross Finds Out.]",
            ),
        ],
    )

    ross = reading.speakers[0]
    assert reading.contents[1] == f"[The next clip is from The One Where {ross} Finds Out.]"


def test_an_agent_key_is_not_told_that_the_workspace_holds_a_name(api, workspace):
    before = _preview(api, "Zorbo Quill again?")
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="Is Zorbo Quill home?")],
    )
    reading = observer_reading(
        conversation=conversation, messages=list(conversation.messages.all()), tool_outputs=[]
    )
    assert _labels(reading.contents[0])  # the workspace now holds her pseudonym

    after = _preview(api, "Zorbo Quill again?")

    # Only the mapping would find her here: the agent's answer is the one it got before.
    assert after == before
    assert (after["findings"], after["redactedText"]) == ([], "Zorbo Quill again?")


# --- things are not people ------------------------------------------------------------------

SHOPPING_CHAT = (
    "I bought the Philips Hue White Starter Kit on Sep 10 and a moisturizer from La Mer. "
    "We saw the new T-Rex skeleton at the museum last Winter, and on Monday my book club "
    "started Kafka on the Shore. The Citi Double Cash Card was charged twice. "
    "My name is Priya Raman, and my colleague Tom Berg lives in Leeds."
)


def test_products_brands_works_months_and_seasons_are_not_people_or_places(compliance_api):
    redacted = _preview(compliance_api, SHOPPING_CHAT)["redactedText"]

    for kept in (
        "Philips Hue White Starter Kit",
        "Sep 10",
        "from La Mer",
        "T-Rex skeleton",
        "last Winter",
        "on Monday",
        "Kafka on the Shore",
        "Citi Double Cash Card",
    ):
        assert kept in redacted
    assert "Priya" not in redacted and "Raman" not in redacted and "Tom Berg" not in redacted
    assert "Leeds" not in redacted


def test_things_with_first_names_in_them_are_not_people(compliance_api):
    text = "The Brooklyn Museum and the Green Party both use Amazon Alexa, said Dana Whitfield."

    redacted = _preview(compliance_api, text)["redactedText"]

    assert "Brooklyn Museum" in redacted and "Green Party" in redacted
    assert "Amazon Alexa" in redacted
    assert _labels(redacted) == ["<PERSON_1>"]


@pytest.mark.parametrize(
    "text, person",
    [
        # Words cut out of longer names, and a heading
        (
            "**General Tips:** back up to Google Cloud Storage weekly. Ask Lighthouse "
            "Builders Inc. for a quote. Dana Whitfield agreed.",
            "Dana Whitfield",
        ),
        # Lower case with no word a name list knows ("kung pao"), a capitalised common
        # word alone ("Peel"), and a name made of common words only ("Kidney Injury"):
        # the small pipeline calls each of these a person.
        (
            "Grandma made kung pao chicken with vanilla powder. Zest the Lemon, then add "
            "the Peel. My dad had an Acute Kidney Injury last year, so Tom Berg covered "
            "for him.",
            "Tom Berg",
        ),
    ],
)
def test_common_words_and_words_cut_out_of_names_are_not_people(compliance_api, text, person):
    redacted = _preview(compliance_api, text)["redactedText"]

    assert redacted == text.replace(person, "<PERSON_1>")


@pytest.mark.parametrize(
    "text, person",
    [
        # The pipeline calls "Instagram" an organisation twice and a person once.
        (
            "Here is what to try on Instagram. Use Instagram Stories daily. I love "
            "Instagram. Tom Berg agrees.",
            "Tom Berg",
        ),
        # A brand's name with a capitalised common word last, no surname.
        (
            "Tips: 1. **Instagram Shopping**: tag your products. 2. **Facebook Live**: "
            "stream a demo. Ask Dana Whitfield first.",
            "Dana Whitfield",
        ),
        # A name that says what kind of thing a common noun after it is.
        ("I finished two courses, and Tom Berg took the Wix classes with me.", "Tom Berg"),
    ],
)
def test_brands_and_products_no_name_list_knows_are_not_people(compliance_api, text, person):
    redacted = _preview(compliance_api, text)["redactedText"]

    assert redacted == text.replace(person, "<PERSON_1>")


def test_a_name_list_word_at_the_end_of_a_products_name_is_no_person(compliance_api):
    # The small pipeline calls "Hue White" and "Color Starter Kit" people; the words of
    # the lexicon before "White" and "Kit" were cut off as words before a name, which
    # left a surname and a first name: "Philips Hue <PERSON_1> and Color Starter
    # <PERSON_2> (2, $99.99)".
    text = "The best set is the Philips Hue White and Color Starter Kit (2, $99.99), Tom Berg said."

    redacted = _preview(compliance_api, text)["redactedText"]

    assert redacted == text.replace("Tom Berg", "<PERSON_1>")


@pytest.mark.parametrize(
    "text, name",
    [
        # One word of the lexicon before a name, after a word in lower case.
        ("We went to see Big Mike play on Friday.", "Mike"),
        # Words of the lexicon where a sentence starts.
        ("Grumpy Old Tom left early.", "Tom"),
    ],
)
def test_a_name_after_a_capitalised_word_is_still_a_person(compliance_api, text, name):
    redacted = _preview(compliance_api, text)["redactedText"]

    assert name not in redacted and _labels(redacted) == ["<PERSON_1>"]


def test_a_name_that_ends_with_a_kind_of_place_is_a_place(compliance_api):
    text = "The hike to Kegon Falls takes an hour. After Kegon Falls, Tom Berg had lunch."

    redacted = _preview(compliance_api, text)["redactedText"]

    assert redacted == (
        "The hike to <LOCATION_1> takes an hour. After <LOCATION_1>, <PERSON_1> had lunch."
    )


@pytest.mark.parametrize(
    "text, person",
    [
        # After "called" or "by" comes a person's name, but no one is called "The" anything.
        ("The venue is called The Fillmore, and Tom Berg loved it.", "Tom Berg"),
        ("The Daily, by The New York Times, is what Tom Berg hears.", "Tom Berg"),
        # A pet's name, wherever the text names the pet, is no person's ...
        ("Tom Berg got my cat Luna a scratching post; Luna sleeps on it.", "Tom Berg"),
        ("Our horse, Luna, needs her shots, and a dog named Max too, Tom Berg said.", "Tom Berg"),
        ("My cat's name is Luna, and Luna hates Tom Berg.", "Tom Berg"),
        # ... and a duration or a recipe's measure is no street address.
        ("My commute is 45 minutes each way, Tom Berg says.", "Tom Berg"),
    ],
)
def test_works_pets_and_measures_are_not_people_or_addresses(compliance_api, text, person):
    redacted = _preview(compliance_api, text)["redactedText"]

    assert redacted == text.replace(person, "<PERSON_1>")


def test_whose_pet_it_is_decides_not_the_animal_word_alone(compliance_api):
    redacted = _preview(compliance_api, "The cat Maria adopted is shy.")["redactedText"]

    assert redacted == "The cat <PERSON_1> adopted is shy."


def test_a_town_is_found_again_in_the_names_of_its_sights(compliance_api):
    # The lexicon holds "Denver" as it holds "chicken": a place is found wherever it
    # recurs all the same, or the town its zoo names would tell where she lives.
    redacted = _preview(
        compliance_api, "My sister lives in Denver. Denver Zoo and the Denver Museum are near."
    )["redactedText"]

    assert "Denver" not in redacted


def test_a_town_the_tagger_once_called_a_person_is_still_found_in_its_sights(
    compliance_api, workspace
):
    with transaction.atomic():
        mapping = WorkspacePseudonyms(workspace.pk)
        mapping.label("PERSON", "Denver")
        mapping.label("LOCATION", "Denver")

    redacted = _preview(compliance_api, "Denver Zoo and the Denver Museum are near.")[
        "redactedText"
    ]

    assert "Denver" not in redacted


def test_a_town_the_workspace_once_took_for_a_person_is_a_place_elsewhere(
    compliance_api, workspace
):
    # Another conversation's text once had the tagger call "Denver" a person; the
    # mapping holds it so. Where the town is named as a town, it reads as a place.
    with transaction.atomic():
        WorkspacePseudonyms(workspace.pk).label("PERSON", "Denver")

    redacted = _preview(compliance_api, "My sister moved to Denver last spring.")["redactedText"]

    assert "Denver" not in redacted
    assert _labels(redacted) == ["<LOCATION_1>"]


@pytest.mark.parametrize(
    "text, labels",
    [
        # Name lists hold "London" and "India" as first names: a town that is the subject
        # of a verb is still the town the text puts somewhere.
        ("We spent a week in London. London is expensive.", ["<LOCATION_1>"] * 2),
        ("I'm flying back to India in May. India has festivals then.", ["<LOCATION_1>"] * 2),
        # ... and a name the text calls a person is that person where tagged as a place.
        ("I talked to Lydia yesterday. Lydia is lovely.", ["<PERSON_1>"] * 2),
    ],
)
def test_one_name_in_one_text_is_one_kind_of_label(compliance_api, text, labels):
    assert _labels(_preview(compliance_api, text)["redactedText"]) == labels


def _a_label_then_a_later_reading(workspace, first: MessageInput, then: MessageInput):
    """The one label the Observer reads in ``first``, and its reading of ``then``, a
    message written later to the same conversation (a window of its own)."""
    conversation, messages = _chat(workspace, [first])
    [label] = _labels(
        observer_reading(conversation=conversation, messages=messages, tool_outputs=[]).contents[0]
    )
    messages_append(conversation=conversation, items=[then])
    later = list(conversation.messages.filter(seq__gt=messages[-1].seq))
    return label, observer_reading(conversation=conversation, messages=later, tool_outputs=[])


def test_a_name_tagged_as_a_place_is_the_person_where_the_conversation_names_them(workspace):
    person, reading = _a_label_then_a_later_reading(
        workspace,
        MessageInput(role="user", content="Denver said the parcel left on Monday."),
        MessageInput(role="user", content="I wrote to Denver about the refund."),
    )

    assert person.startswith("<PERSON_")
    assert reading.contents[0] == f"I wrote to {person} about the refund."


def test_a_common_word_after_a_word_of_kinship_is_still_a_name(compliance_api):
    text = "I would like to remove my kid Mali from the will, and my friend Sky from the list."

    redacted = _preview(compliance_api, text)["redactedText"]

    assert "Mali" not in redacted and "Sky" not in redacted
    assert _labels(redacted) == ["<PERSON_1>", "<PERSON_2>"]


@pytest.mark.parametrize(
    "text, person",
    [
        # The small pipeline calls these an organisation and a place.
        ("Ludwig van Beethoven wrote it for Elise.", "Ludwig"),
        ("(The girls wait. Phoebe settles it)", "Phoebe"),
        ("Alice's email bounced again.", "Alice"),
    ],
)
def test_a_name_the_tagger_mislabels_is_still_a_person(compliance_api, text, person):
    redacted = _preview(compliance_api, text)["redactedText"]

    assert person not in redacted
    assert _labels(redacted)[0].startswith("<PERSON_")


def test_a_place_is_a_place_where_something_is_placed(compliance_api):
    redacted = _preview(
        compliance_api, "The party starts at 8 PM at the City Hall, Tom Berg said."
    )["redactedText"]

    assert "City Hall" not in redacted and "Tom Berg" not in redacted


# --- speakers -------------------------------------------------------------------------------


def _chat(workspace, items: list[MessageInput]) -> tuple[Conversation, list[Message]]:
    conversation = conversation_create(workspace=workspace, user_id="maria")
    messages_append(conversation=conversation, items=items)
    return conversation, list(conversation.messages.order_by("seq"))


def _read(workspace, items: list[MessageInput]):
    """The Observer's reading of ``items``, written to a conversation of their own."""
    conversation, messages = _chat(workspace, items)
    return observer_reading(conversation=conversation, messages=messages, tool_outputs=[])


SUPPORT_CHAT = [
    MessageInput(role="user", name="Maria Gonzalez", content="My parcel to Leeds is late."),
    MessageInput(
        role="assistant",
        name="Tom Berg (agent)",
        content="Sorry, Maria. I escalated it for Maria Gonzalez; a courier calls tomorrow.",
    ),
    MessageInput(role="user", name="Maria Gonzalez", content="Thanks Tom!"),
]


def test_the_observer_reads_speakers_as_the_label_their_mentions_get(workspace):
    reading = _read(workspace, SUPPORT_CHAT)

    maria, tom, maria_again = reading.speakers
    assert re.fullmatch(r"<PERSON_\d+>", maria) and maria_again == maria
    assert re.fullmatch(r"<PERSON_\d+> \(agent\)", tom)
    tom_label = tom.removesuffix(" (agent)")
    assert tom_label != maria
    assert reading.contents[1] == (
        f"Sorry, {maria}. I escalated it for {maria}; a courier calls tomorrow."
    )
    assert reading.contents[2] == f"Thanks {tom_label}!"
    assert Pseudonym.objects.filter(workspace=workspace, entity_type="PERSON").count() == 2


def test_a_first_name_in_a_speakers_qualifier_is_redacted_as_the_name_is(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Rachel Green", content="This is my date."),
            MessageInput(role="user", name="Carl (Rachel's date)", content="Hi, everyone."),
            MessageInput(role="assistant", name="Dana (Boss)", content="Welcome."),
            MessageInput(role="user", name="Luis (José’s son)", content="Hola."),
        ],
    )

    rachel, carl, dana, luis = reading.speakers
    assert re.fullmatch(rf"<PERSON_\d+> \({re.escape(rachel)}'s date\)", carl)
    # A first name that is also a word of the lexicon is a name only as someone's.
    assert re.fullmatch(r"<PERSON_\d+> \(Boss\)", dana)
    # Any first name the lists hold, accents and a curly apostrophe too.
    assert re.fullmatch(r"<PERSON_\d+> \(<PERSON_\d+>’s son\)", luis)


def test_a_participants_name_spelt_with_a_letter_doubled_or_single_is_that_participant(
    workspace,
):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Joey Tribbiani", content="Who ate my sandwich?"),
            MessageInput(
                role="user",
                name="Ross Geller",
                content="Joey Tribianni, nobody touched it. Ask Mark Johnston, not Mark Johnson.",
            ),
        ],
    )

    joey = reading.speakers[0]
    assert reading.contents[1].startswith(f"{joey}, nobody touched it.")
    # A letter more is another name: two people, two labels.
    johnston, johnson = _labels(reading.contents[1])[1:]
    assert johnston != johnson


def test_without_redaction_the_observer_reads_speakers_as_stored(workspace):
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_before_observation": False}
    )
    reading = _read(workspace, SUPPORT_CHAT)

    assert list(reading.speakers) == ["Maria Gonzalez", "Tom Berg (agent)", "Maria Gonzalez"]
    assert not Pseudonym.objects.exists()


def test_a_later_window_gives_a_first_name_the_label_of_the_conversations_person(workspace):
    lopez, reading = _a_label_then_a_later_reading(
        workspace,
        MessageInput(role="user", content="This is Maria Lopez, order 5521."),
        MessageInput(role="assistant", content="Maria, your refund is on its way."),
    )

    assert reading.contents[0] == f"{lopez}, your refund is on its way."


def _kate_before_and_after(conversation, messages):
    """The label the Observer reads for "Kate" before Kate Miller speaks, and its reading
    of a later window in which she does."""
    [before] = _labels(
        observer_reading(conversation=conversation, messages=messages, tool_outputs=[]).contents[0]
    )
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(role="user", name="Kate Miller", content="Sorry I'm late, the slides."),
            MessageInput(role="assistant", name="Tom Berg", content="Thanks, Kate."),
        ],
    )
    later = list(conversation.messages.filter(seq__gt=messages[-1].seq))
    return before, observer_reading(conversation=conversation, messages=later, tool_outputs=[])


def test_a_first_name_said_before_its_person_speaks_is_their_label_once_they_do(workspace):
    conversation, messages = _chat(
        workspace, [MessageInput(role="user", content="Is Kate coming to the budget meeting?")]
    )

    kate, reading = _kate_before_and_after(conversation, messages)

    # One person, one label: the full name takes the label its first name was given.
    assert reading.speakers[0] == kate
    assert reading.contents[1] == f"Thanks, {kate}."
    row = Pseudonym.objects.get(workspace=workspace, entity_type="PERSON", number=_number(kate))
    assert (
        pseudonym_reveal(
            workspace_id=workspace.id, label=kate, actor=SYSTEM_ACTOR, reason="test"
        ).value
        == "Kate Miller"
    )
    assert row.digest == value_digest(
        workspace_id=workspace.id, entity_type="PERSON", value="kate miller"
    )
    event = AuditEvent.objects.get(action="redaction.pseudonym.name")
    assert event.target_id == kate and "Kate" not in str(event.after)


def test_a_first_name_also_said_in_another_conversation_keeps_its_own_label(workspace):
    elsewhere, _ = _chat(
        workspace, [MessageInput(role="user", content="Kate called about her order.")]
    )
    observer_reading(
        conversation=elsewhere, messages=list(elsewhere.messages.all()), tool_outputs=[]
    )
    conversation, messages = _chat(
        workspace, [MessageInput(role="user", content="Is Kate coming to the budget meeting?")]
    )

    kate, reading = _kate_before_and_after(conversation, messages)

    # That "Kate" may be someone else: Kate Miller is a label of her own, "Kate" stays "Kate".
    miller = reading.speakers[0]
    assert re.fullmatch(r"<PERSON_\d+>", miller) and miller != kate
    assert reading.contents[1] == f"Thanks, {miller}."
    assert (
        pseudonym_reveal(
            workspace_id=workspace.id, label=kate, actor=SYSTEM_ACTOR, reason="test"
        ).value
        == "Kate"
    )
    assert not AuditEvent.objects.filter(action="redaction.pseudonym.name").exists()


def _number(label: str) -> int:
    return int(label.rstrip(">").rsplit("_", 1)[1])


def test_a_speakers_first_name_is_their_label_where_the_tagger_misses_it(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Emily Waltham", content="I'm ready. Let's go."),
            # The small pipeline reads "Emily" as an adverb here, a name nowhere,
            MessageInput(
                role="user",
                name="Narrator",
                content="(He turns and sees that not only has Emily arrived, but the ring too.)",
            ),
            # ... and here as a first name it is unsure of (the Observer reads both masked).
            MessageInput(role="user", name="Minister", content="Take thee, Emily. Repeat."),
        ],
    )

    emily = reading.speakers[0]
    assert re.fullmatch(r"<PERSON_\d+>", emily)
    assert reading.contents[1] == (
        f"(He turns and sees that not only has {emily} arrived, but the ring too.)"
    )
    assert reading.contents[2] == f"Take thee, {emily}. Repeat."


def test_a_speakers_first_name_in_a_note_is_labelled_not_left_for_review(workspace):
    conversation, messages = _chat(
        workspace, [MessageInput(role="user", name="Emily Waltham", content="I'm ready.")]
    )
    emily = observer_reading(
        conversation=conversation, messages=messages, tool_outputs=[]
    ).speakers[0]
    # The name-list recognizer alone is unsure of "Emily" here (the review band).
    note = ObservationFactory(conversation=conversation, text="Minister said take thee, Emily.")

    redaction_gate_for_reflection(conversation=conversation, observations=[note])

    note.refresh_from_db()
    assert note.text == f"Minister said take thee, {emily}."
    assert not RedactionFinding.objects.filter(
        target_id=note.pk, status=RedactionFinding.Status.PENDING_REVIEW
    ).exists()


def test_a_speakers_first_word_is_no_name_where_it_is_a_word_or_the_speaker_a_role(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Will Turner", content="Hello there."),
            MessageInput(role="user", name="Gate Agent", content="Boarding now."),
            MessageInput(role="assistant", content="Will you send the receipt?"),
            MessageInput(role="assistant", content="Your Ticket is at the Gate, ask the Agent."),
        ],
    )

    assert list(reading.contents[2:]) == [
        "Will you send the receipt?",
        "Your Ticket is at the Gate, ask the Agent.",
    ]


def test_a_first_name_in_a_typed_note_is_the_conversations_speaker(workspace, curator_api):
    conversation, messages = _chat(workspace, SUPPORT_CHAT)
    maria = observer_reading(
        conversation=conversation, messages=messages, tool_outputs=[]
    ).speakers[0]

    response = curator_api.post(
        f"/v1/conversations/{conversation.pk}/observations",
        {"text": "Maria prefers e-mail over SMS.", "priority": "medium"},
        format="json",
    )

    assert response.status_code == 201
    assert Observation.objects.get(pk=response.json()["id"]).text == (
        f"{maria} prefers e-mail over SMS."
    )


def test_redacting_at_ingest_stores_the_speakers_pseudonym_as_the_name(workspace):
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_at_ingest": True}
    )
    _, messages = _chat(workspace, SUPPORT_CHAT)

    maria, tom, _ = (m.name for m in Message.objects.order_by("seq"))
    assert re.fullmatch(r"<PERSON_\d+>", maria)
    assert tom.endswith(" (agent)") and "Tom" not in tom
    assert messages[1].content == (
        f"Sorry, {maria}. I escalated it for {maria}; a courier calls tomorrow."
    )


def test_ingest_without_redaction_stores_the_name_as_given(workspace):
    ingest = message_ingest(
        workspace_id=workspace.pk, contents=["hello"], redact=False, names=["Maria Gonzalez"]
    )

    with transaction.atomic():
        assert ingest.stored_contents() == ["hello"]
    assert ingest.stored_name(0) == "Maria Gonzalez"


def test_a_name_of_several_speakers_gives_each_their_label_and_roles_stay(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Maria Gonzalez", content="Hello."),
            MessageInput(role="user", name="Tom Berg", content="Hi."),
            MessageInput(role="user", name="Maria Gonzalez & Tom Berg", content="Bye!"),
            MessageInput(role="user", name="Narrator", content="They leave."),
            MessageInput(role="user", name="Project Manager", content="Next item."),
        ],
    )

    maria, tom, both, narrator, manager = reading.speakers
    assert both == f"{maria} & {tom}"
    assert (narrator, manager) == ("Narrator", "Project Manager")


def test_a_speaker_name_too_long_for_its_labels_keeps_whole_labels(workspace):
    names = "Ann Lee & Bo Kim & Cy Ng & Di Wu & Ed Li & Flo Ma & Gus Yu"
    conversation, messages = _chat(workspace, [MessageInput(role="user", name=names, content="Hi")])

    [speaker] = observer_reading(
        conversation=conversation, messages=messages, tool_outputs=[]
    ).speakers

    assert len(speaker) <= 64 and speaker.endswith(" …")
    assert malformed_pseudonyms(speaker) == [] and len(_labels(speaker)) >= 3


def test_a_surname_after_a_title_is_the_titled_speaker(workspace):
    reading = _read(
        workspace,
        [
            MessageInput(role="user", name="Dr. Okafor", content="Your results are in."),
            MessageInput(role="user", name="Maria Gonzalez", content="Thank you, Okafor."),
        ],
    )

    assert reading.contents[1] == f"Thank you, {reading.speakers[0]}."


def test_a_first_name_tagged_as_a_place_or_missed_is_the_person_the_mapping_holds(workspace):
    conversation, messages = _chat(
        workspace,
        [
            MessageInput(role="user", content="Hi Lydia, thanks for calling."),
            # The small pipeline calls her a place here,
            MessageInput(role="user", content="I talked to Lydia about the refund."),
        ],
    )
    reading = observer_reading(conversation=conversation, messages=messages, tool_outputs=[])
    [lydia] = _labels(reading.contents[0])
    assert lydia.startswith("<PERSON_")
    assert reading.contents[1] == f"I talked to {lydia} about the refund."
    # ... and an organisation here: the mapping finds her all the same.
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="(The girls wait. Lydia settles it)")],
    )
    later = list(conversation.messages.filter(seq__gt=messages[-1].seq))

    reading = observer_reading(conversation=conversation, messages=later, tool_outputs=[])

    assert reading.contents[0] == f"(The girls wait. {lydia} settles it)"


def test_an_observer_run_gives_the_engine_the_speakers_label(workspace, fake_engine):
    from memory.engines.base import ObserverOutput
    from memory.pipeline.observer import observer_run_execute
    from memory.pipeline.scheduling import observer_schedule

    class Capturing:
        name, model, prompt_version = "capturing", "", ""
        speakers: list[str] = []

        def observe(self, messages, **_):
            self.speakers = [m.speaker for m in messages]
            return ObserverOutput(observations=[])

    engine = fake_engine(Capturing())
    conversation, _ = _chat(workspace, SUPPORT_CHAT)

    observer_run_execute(run_id=observer_schedule(conversation=conversation, trigger="manual").pk)

    maria, tom, _ = engine.speakers
    assert re.fullmatch(r"<PERSON_\d+>", maria)
    assert re.fullmatch(r"<PERSON_\d+> \(agent\)", tom)


# --- the engine alone -----------------------------------------------------------------------


class _Known:
    def __init__(self, held: set[tuple[str, str]]) -> None:
        self.held_pairs = held
        self.asked: list[tuple[str, str]] = []

    def held(self, candidates):
        self.asked = list(candidates)
        return {pair for pair in candidates if pair in self.held_pairs}


def test_the_engine_asks_the_mapping_about_capitalised_runs_only_once_per_batch():
    known = _Known({("PERSON", "Zorbo Quill")})
    spec = PolicySpec(workspace_id="w", version=1)

    found = engine().detect(["Zorbo Quill again?", "nothing to see here"], spec=spec, known=known)

    assert [(d.entity_type, d.start, d.end) for d in found[0]] == [("PERSON", 0, 11)]
    assert found[1] == []
    assert ("PERSON", "Zorbo Quill") in known.asked
    assert all(value[:1].isupper() for _, value in known.asked)


# --- malformed labels -----------------------------------------------------------------------


def test_the_scan_before_reflection_keeps_every_label_a_note_holds(workspace):
    from governance.redaction.gates import redaction_gate_for_reflection
    from tests.memory.factories import ObservationFactory

    conversation = conversation_create(workspace=workspace, title="kayak trip")
    # The tagger reads "<LOCATION_3> Bay" as one place; its span once began at the
    # label's ">", and the replacement left "<LOCATION_3<LOCATION_5>".
    text = "Paddle from <LOCATION_1> to <LOCATION_2> Island, then <LOCATION_3> Bay."
    note = ObservationFactory(conversation=conversation, text=text)

    read = redaction_gate_for_reflection(conversation=conversation, observations=[note])

    note.refresh_from_db()
    for served in (read[str(note.pk)], note.text):
        assert malformed_pseudonyms(served) == []
        assert _labels(served)[:3] == ["<LOCATION_1>", "<LOCATION_2>", "<LOCATION_3>"]


@pytest.mark.parametrize(
    "text, malformed",
    [
        ("<PERSON_1> met <PERSON_22>.", []),
        ("<PERSON158> asked", ["<PERSON158>"]),
        ("User said PERSON131 called", ["PERSON131"]),
        ("<PERSON_145 and person_3> left", ["<PERSON_145", "person_3>"]),
        (
            "<PERSON_03> and < LOCATION_2 > and PERSON_7",
            ["<PERSON_03>", "< LOCATION_2 >", "PERSON_7"],
        ),
        ("<EMAIL_ADDRESS_2> and US_SSN_4", ["US_SSN_4"]),
        ("Person 3 said so; COVID19; MP3; <PERSON> was replaced", []),
        ("<TICKET_9> and <TICKET9>", ["<TICKET9>"]),
    ],
)
def test_malformed_pseudonyms_are_found_and_well_formed_ones_are_not(text, malformed):
    assert malformed_pseudonyms(text, entity_types=["TICKET"]) == malformed
