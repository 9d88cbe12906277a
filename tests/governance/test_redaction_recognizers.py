"""What the engine's own recognizers find, and what context words explain away
(governance/redaction/recognizers.py), through the engine with a workspace's default policy."""

from __future__ import annotations

import pytest

from governance.redaction import name_recognizers, recognizers
from governance.redaction.presidio import DEFAULT_ENTITIES, SUPPORTED_ENTITIES, PolicySpec, engine

SPEC = PolicySpec(workspace_id="w1", version=1)


def found(text: str) -> list[tuple[str, str, str]]:
    """(entity type, value, status) of each detection in ``text``."""
    [detections] = engine().detect([text], spec=SPEC)
    return [(d.entity_type, text[d.start : d.end], d.status) for d in detections]


def types_of(text: str, value: str) -> set[str]:
    return {kind for kind, found_value, _ in found(text) if value in found_value}


def test_the_new_types_are_detected_by_default_and_accepted_in_policies():
    for kind in ("ADDRESS", "USERNAME", "ACCOUNT_NUMBER", "PERSONAL_ID"):
        assert kind in DEFAULT_ENTITIES
        assert kind in SUPPORTED_ENTITIES


# --- cards -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "card",
    ["4111111111111111", "4111 1111 1111 1111", "4111-1111-1111-1111", "6011000990139424"],
)
def test_a_luhn_valid_card_is_found_with_or_without_separators(card):
    assert ("CREDIT_CARD", card, "applied") in found(f"Please charge {card} for the renewal.")


def test_a_luhn_valid_number_without_an_issuer_prefix_is_certain_only_next_to_a_card_word():
    number = "7992739871300008"
    assert found(f"My card is {number} thanks") == [("CREDIT_CARD", number, "applied")]
    assert found(f"We counted {number} grains.") == [("CREDIT_CARD", number, "pending_review")]


def test_a_luhn_invalid_sixteen_digit_order_number_is_not_a_card():
    text = "Your order 4111111111111112 has shipped."
    assert found(text) == []


def test_the_luhn_check():
    assert recognizers.luhn_valid("4111111111111111")
    assert not recognizers.luhn_valid("4111111111111112")


# --- IBAN, phone numbers ---------------------------------------------------------------------


@pytest.mark.parametrize("iban", ["DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432"])
def test_an_iban_is_found(iban):
    assert ("IBAN_CODE", iban, "applied") in found(f"Send it to IBAN {iban} please.")


@pytest.mark.parametrize(
    "phone", ["+44 20 7946 0958", "+33 1 42 68 53 00", "+4455667788", "(07) 5331 0577"]
)
def test_international_phone_numbers_are_found(phone):
    assert "PHONE_NUMBER" in types_of(f"You can reach me on {phone} after six.", phone)


def test_a_phone_number_named_as_one_is_redacted_without_review():
    assert ("PHONE_NUMBER", "212-555-0143", "applied") in found("My phone: 212-555-0143")


def test_an_order_number_is_not_a_phone_number():
    assert found("My order 5551234567 is late.") == []
    assert found("Ticket #48213 was closed.") == []


def test_a_us_phone_number_is_not_an_nhs_number():
    # 212-555-0140 passes the NHS checksum; no NHS word is near it.
    assert types_of("Call our desk at 212 555 0140 today.", "212 555 0140") == {"PHONE_NUMBER"}


# --- addresses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "address"),
    [
        (
            "I moved to 123 Elm Street, Springfield, IL 62701 last May.",
            "123 Elm Street, Springfield, IL 62701",
        ),
        ("Ship it to 42 Baker St. please", "42 Baker St."),
        ("Filip lives on Nassaustraat 123 now.", "Nassaustraat 123"),
        ("Meet me at the café on Oak Street tonight.", "Oak Street"),
        ("ZIP: 11164", "11164"),
    ],
)
def test_street_addresses_are_found(text, address):
    assert "ADDRESS" in types_of(text, address)


def test_an_address_after_an_address_cue_or_in_a_postal_block_is_found():
    cued = "Frank gave me his address: 46 Kirkegade 12, Hillerod"
    assert "ADDRESS" in types_of(cued, "46 Kirkegade 12, Hillerod")
    block = "Jo Lund\nAcme Ltd\n12 4 Strandvejen\nApt. 3\nKlampenborg\nDenmark 2930"
    [(kind, value, _)] = [item for item in found(block) if item[0] == "ADDRESS"]
    assert value == "12 4 Strandvejen\nApt. 3\nKlampenborg\nDenmark 2930"


def test_a_time_and_a_place_are_not_an_address():
    assert "ADDRESS" not in {kind for kind, _, _ in found("How about 7 PM at the Italian place?")}


# --- accounts, personal ids, usernames -------------------------------------------------------


def test_account_and_personal_numbers_named_by_their_words_are_found():
    text = "Account Number: 1234567890 | Student ID: 987654 | PESEL: 44051401458"
    assert ("ACCOUNT_NUMBER", "1234567890", "applied") in found(text)
    assert ("PERSONAL_ID", "987654", "applied") in found(text)
    assert ("PERSONAL_ID", "44051401458", "applied") in found(text)


def test_a_word_naming_the_value_wins_over_an_id_word_further_back():
    text = "Renewal of policy account 1234567890 is due."
    assert "ACCOUNT_NUMBER" in types_of(text, "1234567890")
    assert "PHONE_NUMBER" in types_of("Order questions? Call 555-123-4567", "555-123-4567")


def test_the_answer_to_an_account_question_is_an_account_number():
    text = "Agent: What is your account number?\nCustomer: Sure, it's 123456789."
    assert "ACCOUNT_NUMBER" in types_of(text, "123456789")


@pytest.mark.parametrize(
    ("text", "handle"),
    [
        ("username: dana_w", "dana_w"),
        ("My user name is jdoe42.", "jdoe42"),
        ("Follow my handle @dana.whitfield for updates", "@dana.whitfield"),
        ("Sure, my account ID is aphoenix939.", "aphoenix939"),  # ABCD's way of asking
    ],
)
def test_a_username_is_found(text, handle):
    assert "USERNAME" in types_of(text, handle)


def test_an_account_id_of_digits_is_an_account_number_not_a_username():
    assert types_of("Account ID 77812345", "77812345") == {"ACCOUNT_NUMBER"}


def test_words_after_login_are_not_usernames():
    text = "Your account was locked after failed login attempts; my username is incorrect."
    assert "USERNAME" not in {kind for kind, _, _ in found(text)}


# --- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("[10:15 AM] Priya: are we still on for lunch?", "Priya"),
        ("Thanks for the update, Bartholomew!", "Bartholomew"),
        ("Kind regards,\n  Ingrid Svensson", "Ingrid Svensson"),
        ("The contract was signed by Mr. Okonkwo yesterday.", "Okonkwo"),
        ("please transfer me to ms. Adaeze now", "Adaeze"),
        ("Hi Siobhan, your parcel is ready.", "Siobhan"),
    ],
)
def test_names_in_their_places_are_found(text, name):
    assert "PERSON" in types_of(text, name)


def test_a_first_name_from_the_list_is_found_with_its_surname():
    first_names, surnames = name_recognizers.name_lists()
    assert {"Emily", "Giovanni", "Agnieszka"} <= first_names
    assert "Kowalski" in surnames
    assert ("PERSON", "Agnieszka Kowalski", "applied") in found(
        "the form came back from Agnieszka Kowalski today"
    )


def test_a_label_with_a_digit_is_not_a_person():
    assert "PERSON" not in {kind for kind, _, _ in found("Please answer question4 and Step2.")}


def test_a_field_label_is_not_a_person():
    text = "Patient: Emily Davis, Email: emily.davis@example.com"
    people = [value for kind, value, _ in found(text) if kind == "PERSON"]
    assert people == ["Emily Davis"]


def test_a_place_named_like_a_person_stays_a_place():
    assert "PERSON" not in types_of("I just got back from my trip to Paris!", "Paris")


def test_a_json_field_name_in_tool_output_is_not_a_person():
    # spaCy's tagger takes "order_id" for a name (0.85); a field name is no one's name.
    text = '{"order_id": "ORD-123456", "status": "delivered", "total": 129.0}'
    assert [kind for kind, _, _ in found(text) if kind == "PERSON"] == []
    assert "PERSON" in types_of('{"customer": "Dana Pierce"}', "Dana Pierce")


@pytest.mark.parametrize(
    ("text", "name", "status"),
    [
        # A lone first name said to the person asked: the small pipeline calls it a product.
        ("What is your membership level Crystal?", "Crystal", "applied"),
        ("Where should we send the refund, Crystal?", "Crystal", "applied"),
        ("Where is my order, Crystal?", "Crystal", "applied"),  # not "order Jasper"
        ("Could you check the tracking page for me Ruby?", "Ruby", "applied"),
        ("Are you ready, Paris?", "Paris", "applied"),
        # Called out first, a name no list holds: held for review.
        ("Ifeoma, could you resend the invoice?", "Ifeoma", "pending_review"),
    ],
)
def test_a_name_the_speaker_addresses_is_a_person(text, name, status):
    assert ("PERSON", name, status) in found(text)


@pytest.mark.parametrize(
    "text",
    [
        "Is your membership level Crystal?",  # asks what the level is
        "Do you stock Crystal?",
        "Anyway, can you check my refund?",
        "Honestly, could you resend it?",
    ],
)
def test_a_word_at_the_end_or_the_start_of_a_question_is_not_always_a_name(text):
    assert "PERSON" not in {kind for kind, _, _ in found(text)}


def test_a_name_before_a_relative_is_a_person():
    assert "PERSON" in types_of("Amaka's husband called twice.", "Amaka")
    assert "PERSON" not in {kind for kind, _, _ in found("Google's friend suggestions are odd.")}


# --- places ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "place"),
    [
        ("When: Friday 3 PM\nWhere: Harborview Lodge", "Harborview Lodge"),
        ("He was born in Vila Nova de Cerveira in 1988.", "Vila Nova de Cerveira"),
        ("I grew up in ZLIN, then moved.", "ZLIN"),
        ("Our guests got back from Gozo yesterday.", "Gozo"),
        ("The courier arrived this morning from Kuressaare.", "Kuressaare"),
        ("Did you get to see the Veterans Harbor Memorial?", "Veterans Harbor Memorial"),
        ("The kids loved Sunny Pines Beach.", "Sunny Pines Beach"),
        ("He got his degree from the University of Bialystok in 2010.", "Bialystok"),
        ("B.S. in Nursing, University of Wisconsin, Oshkosh, 2019", "Oshkosh"),
        ("Let's meet at our usual spot, Café Aurora on 12th Street.", "Café Aurora"),
        ("We stayed two nights at Hotel Varnhagen.", "Hotel Varnhagen"),
        # Not a subject of study (below): no degree names it.
        ("She studied martial arts in Kyoto.", "Kyoto"),
        ("She did an exchange program in Berlin.", "Berlin"),
    ],
)
def test_a_place_named_where_a_place_goes_is_a_location(text, place):
    assert "LOCATION" in types_of(text, place)


@pytest.mark.parametrize(
    "text",
    [
        "Where: Online",
        "Education: B.S. in Chemistry, 2014",
        "Your PESEL is 92031504567.",
        "Parent's Name: Ana Lima",
        "She is in Grade 11 this year.",
        "I hold a Master's degree in Geology.",
        "Sarah Hill called about Jessica Park.",
        "He teaches at the University of Technology.",
    ],
)
def test_words_that_name_no_place_are_not_locations(text):
    assert "LOCATION" not in {kind for kind, _, _ in found(text)}


def test_the_place_cues_leave_a_name_with_a_possessive_to_the_person_it_names():
    # The memory of a meeting said "they used to live in Project Manager's house"; the
    # place cue labelled the role a place, and every later mention of it with it.
    text = "They used to live in Okonkwo's flat; she grew up in Okonkwo."
    artifacts = engine().nlp_engine.process_text(text, "en")
    spans = list(recognizers.PlaceCueRecognizer().find(text, artifacts))
    assert [text[start:end] for start, end, _ in spans] == ["Okonkwo"]
    assert spans[0][0] == text.rindex("Okonkwo")
