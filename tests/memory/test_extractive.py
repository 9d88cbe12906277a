"""Behaviour of the extractive Observer and Reflector and of date resolution.

Pure functions over plain dataclasses: no database, no network.
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from memory.engines.base import (
    MEMORY_BLOCK_HEADER,
    DraftObservation,
    ObserverOutput,
    SourceMessage,
    SourceObservation,
)
from memory.engines.dates import find_dates, resolve_date
from memory.engines.extractive import ExtractiveEngine
from memory.engines.extractive.sentences import third_person
from memory.tokens import token_count
from tests.memory.builders import TUESDAY, source_messages, texts


def engine() -> ExtractiveEngine:
    return ExtractiveEngine()


def observe(*turns: tuple[str, str], previous: tuple[str, ...] = ()) -> ObserverOutput:
    messages = source_messages(*turns)
    return engine().observe(messages, previous_observations=previous, now=TUESDAY)


def only(output: ObserverOutput) -> DraftObservation:
    assert len(output.observations) == 1, texts(output)
    return output.observations[0]


def stored(*notes: tuple[str, str, datetime]) -> list[SourceObservation]:
    """Observations o1, o2, ... as the Reflector receives them: (text, priority, day)."""
    return [
        SourceObservation(
            id=f"o{number}",
            text=text,
            priority=priority,
            observed_at=day,
            referenced_at=None,
            token_count=token_count(text),
        )
        for number, (text, priority, day) in enumerate(notes, start=1)
    ]


# --------------------------------------------------------------------------- dates


def day(year: int, month: int, date: int) -> datetime:
    return datetime(year, month, date, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("yesterday", day(2026, 2, 9)),
        ("today", day(2026, 2, 10)),
        ("tomorrow", day(2026, 2, 11)),
        ("tonight", day(2026, 2, 10)),
        ("this morning", day(2026, 2, 10)),
        ("last night", day(2026, 2, 9)),
        ("the day after tomorrow", day(2026, 2, 12)),
        ("the day before yesterday", day(2026, 2, 8)),
        # weekday arithmetic from Tuesday 2026-02-10
        ("next Tuesday", day(2026, 2, 17)),
        ("next Wednesday", day(2026, 2, 11)),
        ("next Monday", day(2026, 2, 16)),
        ("last Friday", day(2026, 2, 6)),
        ("last Tuesday", day(2026, 2, 3)),
        ("on Friday", day(2026, 2, 13)),
        ("on Tuesday", day(2026, 2, 10)),
        ("this Sunday", day(2026, 2, 15)),
        # relative amounts
        ("in 3 days", day(2026, 2, 13)),
        ("in two weeks", day(2026, 2, 24)),
        ("in a week", day(2026, 2, 17)),
        ("in a couple of days", day(2026, 2, 12)),
        ("3 days ago", day(2026, 2, 7)),
        ("a week ago", day(2026, 2, 3)),
        ("two months ago", day(2025, 12, 10)),
        ("within 5 business days", day(2026, 2, 17)),
        ("last week", day(2026, 2, 3)),
        ("next week", day(2026, 2, 17)),
        ("next month", day(2026, 3, 10)),
        ("last month", day(2026, 1, 10)),
        ("next year", day(2027, 2, 10)),
        ("this weekend", day(2026, 2, 14)),
        ("next weekend", day(2026, 2, 21)),
        ("end of the month", day(2026, 2, 28)),
        # absolute dates
        ("on March 3rd", day(2026, 3, 3)),
        ("March 3", day(2026, 3, 3)),
        ("Mar. 3", day(2026, 3, 3)),
        ("the 3rd of March", day(2026, 3, 3)),
        ("3 March 2027", day(2027, 3, 3)),
        ("March 3, 2027", day(2027, 3, 3)),
        ("2026-03-03", day(2026, 3, 3)),
        ("December 28", day(2025, 12, 28)),  # nearer than 2026-12-28
        ("04/13/2026", day(2026, 4, 13)),
        ("13/04/2026", day(2026, 4, 13)),
        ("on 13/04", day(2026, 4, 13)),
        ("03/03/26", day(2026, 3, 3)),
    ],
)
def test_it_resolves_a_date_against_the_message_time(expression, expected):
    assert resolve_date(expression, anchor=TUESDAY) == expected


@pytest.mark.parametrize(
    "expression",
    ["03/04", "03/04/2026", "24/7", "3/4", "may 5", "someday", "next time", "February 30"],
)
def test_it_refuses_ambiguous_or_impossible_dates(expression):
    assert resolve_date(expression, anchor=TUESDAY) is None


@pytest.mark.parametrize(
    ("anchor", "expression", "expected"),
    [
        (day(2026, 12, 31), "tomorrow", day(2027, 1, 1)),
        (day(2026, 12, 31), "in 2 days", day(2027, 1, 2)),
        (day(2026, 12, 31), "next Monday", day(2027, 1, 4)),
        (day(2026, 12, 31), "next month", day(2027, 1, 31)),
        (day(2026, 1, 1), "yesterday", day(2025, 12, 31)),
        (day(2026, 1, 1), "last week", day(2025, 12, 25)),
        (day(2026, 1, 1), "last month", day(2025, 12, 1)),
        (day(2026, 1, 1), "last Friday", day(2025, 12, 26)),
        (day(2026, 1, 31), "next month", day(2026, 2, 28)),  # clamped to the month's end
        (day(2024, 2, 28), "tomorrow", day(2024, 2, 29)),  # leap day
        (day(2024, 2, 29), "next year", day(2025, 2, 28)),
        (day(2026, 3, 1), "3 days ago", day(2026, 2, 26)),
        (day(2026, 2, 13), "within 1 business day", day(2026, 2, 16)),  # Friday -> Monday
        (day(2026, 2, 27), "end of the month", day(2026, 2, 28)),
    ],
)
def test_it_crosses_month_and_year_boundaries(anchor, expression, expected):
    assert resolve_date(expression, anchor=anchor) == expected


def test_the_tense_of_each_clause_picks_the_weekday():
    mentions = find_dates(
        "I went to the dentist on Friday, and I'll see the surgeon on Friday too.", anchor=TUESDAY
    )
    assert [m.value for m in mentions] == [day(2026, 2, 6), day(2026, 2, 13)]


def test_a_month_and_day_without_a_year_follows_the_tense_across_new_year():
    new_years_eve = day(2026, 12, 28)
    assert find_dates("I'll call you on January 5.", anchor=new_years_eve)[0].value == day(
        2027, 1, 5
    )
    assert find_dates("We met on December 20.", anchor=new_years_eve)[0].value == day(2026, 12, 20)


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I need it before the 20th.", day(2026, 2, 20)),
        ("That refund was issued on the 3rd.", day(2026, 2, 3)),
        ("We will charge you on the 31st.", day(2026, 3, 31)),  # February has none
        ("My plan renewed on the 28th.", day(2026, 1, 28)),  # past: last month's
    ],
)
def test_a_day_of_the_month_after_a_preposition_is_a_date(sentence, expected):
    # A support call's "before the 20th" was no date at all: only a day with its month
    # was read.
    [mention] = find_dates(sentence, anchor=TUESDAY)
    assert mention.text.startswith("the ") and mention.value == expected


@pytest.mark.parametrize("sentence", ["It was the 3rd time.", "Art of the 20th century."])
def test_an_ordinal_that_is_no_day_of_the_month_is_no_date(sentence):
    assert find_dates(sentence, anchor=TUESDAY) == []


def test_results_are_aware_and_in_the_message_time_zone():
    berlin = ZoneInfo("Europe/Berlin")
    late_evening = datetime(2026, 2, 10, 23, 30, tzinfo=berlin)
    assert resolve_date("tomorrow", anchor=late_evening) == datetime(2026, 2, 11, tzinfo=berlin)
    naive = datetime(2026, 2, 10, 12, 0)
    assert resolve_date("tomorrow", anchor=naive) == day(2026, 2, 11)
    timestamp = resolve_date("2026-03-03T10:00:00Z", anchor=late_evening)
    assert timestamp == datetime(2026, 3, 3, 11, 0, tzinfo=berlin)


def test_it_finds_every_date_in_a_sentence_with_its_span():
    text = "Paid 2026-02-01, the refund comes in 5 days, and we talk next Tuesday."
    mentions = find_dates(text, anchor=TUESDAY)
    assert [text[m.start : m.end] for m in mentions] == ["2026-02-01", "in 5 days", "next Tuesday"]
    assert find_dates("I may 2 or 3 things.", anchor=TUESDAY) == []


@pytest.mark.parametrize(
    "text",
    [
        "I wear my dance shoes every Tuesday.",
        "If any of my friends gets married, or has a birthday, or a Tuesday.",
        "The market opens every Wednesday and Saturday evening.",
        "Post on a fixed day (e.g., every Monday, Wednesday, Friday).",
        "I started my business on a Sunday morning.",
        "Seurat painted A Sunday on La Grande Jatte.",
        "Any Friday works for me, or some Monday.",
        "It's a bit nuts to get the Monday Tuesday Wednesday, you know.",
        "I was there the Sunday before the wedding.",
    ],
)
def test_a_weekday_that_means_any_such_day_is_no_date(text):
    assert find_dates(text, anchor=TUESDAY) == []


def test_a_weekday_that_means_one_day_is_still_a_date_beside_one_that_does_not():
    text = "We meet every Monday, and next Friday I fly out; see you Thursday."
    mentions = find_dates(text, anchor=TUESDAY)
    assert [m.text for m in mentions] == ["next Friday", "Thursday"]


# --------------------------------------------------------------------------- observer


def test_engine_identifies_itself():
    assert (engine().name, engine().model, engine().prompt_version) == ("extractive", "", "")


def test_it_drops_greetings_thanks_and_filler():
    output = observe(
        ("user", "Hi there! How are you?"),
        ("assistant", "Hello! I'm great, thanks for asking. How can I help you today?"),
        ("user", "Okay, thanks a lot. See you tomorrow!"),
        ("assistant", "You're welcome, have a nice day!"),
    )
    assert output.observations == []


def test_it_rewrites_facts_in_the_third_person():
    output = observe(
        ("user", "Hello, my name is Anna Berg. I prefer email over SMS."),
        ("assistant", "Noted, Anna."),
    )
    # One note per message and priority.
    note = only(output)
    assert note.text == "User's name is Anna Berg; User prefers email over SMS"
    assert note.priority == "medium"
    assert note.source_message_ids == ["m1"]


def test_the_term_of_a_rule_stays_as_said_and_a_deadline_becomes_a_date():
    rule = observe(
        ("user", "Can I return the blender I bought in May?"),
        ("assistant", "Yes: returns are accepted within 30 days of delivery, with the receipt."),
    )
    deadline = observe(
        ("user", "How long do I have?"),
        ("assistant", "You must return it within 14 days."),
    )

    assert "returns are accepted within 30 days of delivery" in only(rule).text
    assert only(deadline).text == (
        "User asked how long does User have; Assistant said User must return it by Feb 24"
    )


def test_a_note_keeps_a_weekday_that_means_any_such_day_as_said():
    # Before, "every Tuesday" (the message's own weekday) lost its weekday as "today" does,
    # and "every Wednesday and Saturday" became "every on Feb 11 and on Feb 14".
    output = observe(
        ("user", "I wear my dance shoes every Tuesday, so they get scuffed."),
        ("user", "The market is every Wednesday and Saturday evening; I'll go next Saturday."),
        ("assistant", "Okay."),
    )
    [shoes, market] = texts(output)
    assert "every Tuesday, so they get scuffed" in shoes
    assert "every Wednesday and Saturday evening; User will go on Feb 14" in market


def test_a_part_of_the_day_the_note_is_dated_keeps_its_part():
    # The note is dated the message's day, so "today" goes; "tonight" went with it and
    # "I have a flight home tonight" read "User has a flight home".
    output = observe(
        ("user", "I have a flight home tonight."),
        ("user", "I went for a run this morning and my knee hurts."),
        ("user", "I bought the knee brace today."),
        ("assistant", "Okay."),
    )
    notes = " | ".join(texts(output))
    assert "User has a flight home that night" in notes
    assert "User went for a run that morning" in notes
    assert "User bought the knee brace" in notes and "today" not in notes


@pytest.mark.parametrize(
    "said, written",
    [
        # After a preposition "in" was added all the same: "from in January".
        ("I'm still waiting for the refund from last month.", "the refund from January"),
        ("I moved here in March last year.", "moved here in March 2025"),
        ("I have been sick for the last month.", "sick for the month before Feb 10"),
        ("Over the next year I want to run a marathon.", "over the year after Feb 10"),
        ("I moved here last year.", "moved here in 2025"),
    ],
)
def test_a_month_or_a_year_reads_as_the_words_before_it_let_it(said, written):
    [note] = texts(observe(("user", said), ("assistant", "Okay.")))
    assert written in note


def test_a_period_after_the_reads_once():
    output = observe(
        ("user", "How do I track my online orders from the last week?"),
        ("assistant", "Check your e-mail."),
    )
    assert "orders from the week of Feb 3" in texts(output)[0]


@pytest.mark.parametrize(
    "said, noted",
    [
        (
            "I've been waiting for my refund for two weeks.",
            "User has been waiting for User's refund for two weeks",
        ),
        (
            "I've been on standby for a flight home for hours.",
            "User has been on standby for a flight home for hours",
        ),
    ],
)
def test_i_ve_been_is_noted_as_i_have_been_is(said, noted):
    # The cue for "I have been" was written for "I've been" too, but read "'ve" only
    # after a space: the contraction, how people write, was dropped.
    assert texts(observe(("user", said), ("assistant", "Okay."))) == [noted]


@pytest.mark.parametrize(
    "said, noted",
    [
        ("I'm still waiting for my refund.", "User is still waiting for User's refund"),
        ("We're waiting on the courier.", "User said we're waiting on the courier"),
        (
            "I have an EMG test with my neurologist.",
            "User has an EMG test with User's neurologist",
        ),
    ],
)
def test_what_a_customer_waits_for_or_has_booked_is_noted(said, noted):
    # Nothing in these named a problem, a plan or an event: a support call's "I'm still
    # waiting for my refund" wrote no note at all.
    assert texts(observe(("user", said), ("assistant", "Okay."))) == [noted]


def test_a_question_about_a_bill_is_not_something_booked():
    assert (
        texts(observe(("user", "I have a question about my bill."), ("assistant", "Sure."))) == []
    )


def test_a_request_joined_on_after_a_comma_is_written_without_its_joining_word():
    output = observe(
        ("user", "I have a yoga class every Thursday at 7:30 pm, so can you set a reminder?"),
        ("assistant", "Done."),
    )
    assert "User asked Assistant to set a reminder" in texts(output)


@pytest.mark.parametrize("said", ["Huh?", "Yeah?", "Whoa?"])
def test_a_bare_interjection_asked_is_no_note(said):
    # "User asked Huh" was a note: a question is kept as a request unless it is small
    # talk, and nothing said an interjection is no content.
    assert texts(observe(("user", said), ("assistant", "Yes."))) == []


def test_an_imperative_reads_as_a_verb_after_asked_to():
    # "Get" was left capitalised ("User asked to Get a lot of liquor") unless the window
    # wrote "get" in lowercase elsewhere: an imperative's first word is its verb.
    output = observe(("user", "Get a lot of liquor."), ("assistant", "Okay."))
    assert texts(output) == ["User asked to get a lot of liquor"]


def test_a_word_that_opens_a_sentence_is_lowercase_after_said_a_name_is_not():
    # "said Look, face it": the word was looked up with its comma, and "unless", "look",
    # "listen" were not among the words that open sentences.
    output = observe(
        ("user", "Look, face it, my father is not going to pay for the barbecue."),
        ("user", "Unless we give her the gifts, she will be upset and I will pay."),
        ("user", "Monica, they obviously have a problem."),
        ("user", "Except, my sister lost her job and can't pay for the trip."),
        ("assistant", "Okay."),
    )
    notes = " | ".join(texts(output))
    assert "User said except, User's sister lost her job" in notes
    assert "User said look, face it, User's father is not going to pay" in notes
    assert "User said unless we give her the gifts" in notes
    assert "User said Monica, they obviously have a problem" in notes


def test_a_question_names_who_asks_with_a_verb_that_agrees():
    output = observe(
        ("user", "Do I need a receipt to return the blender? Why am I charged twice?"),
        ("assistant", "Yes, bring the receipt. The second charge is a hold."),
    )

    [note] = texts(output)
    assert "User asked whether User needs a receipt" in note  # reported, as a yes/no is
    assert "why is User charged twice" in note


@pytest.mark.parametrize(
    "said, noted",
    [
        (
            "Can I return the jacket I bought in November?",
            "User asked whether User can return the jacket User bought in November",
        ),
        ("Does it come in blue?", "User asked whether it comes in blue"),
        ("Has my refund been processed?", "User asked has User's refund been processed"),
        ("Did they call you?", "User asked did they call Assistant"),
    ],
)
def test_a_yes_no_question_is_reported_as_asked(said, noted):
    # "User asked can User return the jacket": the question's order, not a report of it.
    # A subject with more than one word, and "did" (the verb would change tense), are
    # left in the question's order.
    assert texts(observe(("user", said), ("assistant", "Okay."))) == [noted]


@pytest.mark.parametrize(
    "said, written",
    [
        ("Are you ready for the trip?", "Is Assistant ready for the trip?"),
        ("Don't I get a refund?", "Doesn't User get a refund?"),
        ("So have you seen my keys?", "So has Assistant seen User's keys?"),
        # A verb with its object, not a question: nothing to agree with.
        ("We want to have you over.", "We want to have Assistant over."),
        ("I do think so.", "User does think so."),
    ],
)
def test_an_auxiliary_before_i_or_you_agrees_with_the_name(said, written):
    assert third_person(said, "user") == written


@pytest.mark.parametrize(
    "said, written",
    [
        (
            "I like the Western Digital My Passport, Your Honor.",
            "User likes the Western Digital My Passport, Your Honor.",
        ),
        # Where a sentence starts, "My" is the speaker's.
        ("My Passport is full.", "User's Passport is full."),
    ],
)
def test_my_inside_a_name_is_a_word_of_the_name(said, written):
    assert third_person(said, "user") == written


def test_a_problem_is_high_priority():
    output = observe(
        ("user", "My order ORD-123 still hasn't arrived and I need it urgently."),
        ("assistant", "I'm sorry to hear that."),
    )
    note = only(output)
    assert note.priority == "high"
    assert "ORD-123" in note.text
    assert note.text.startswith("User's order")


def test_an_assistant_promise_is_high_priority_and_dated():
    output = observe(
        ("user", "The blender arrived broken."),
        ("assistant", "I'm sorry! I'll process a refund of $129 within 5 business days."),
    )
    promise = output.observations[-1]
    assert promise.text == "Assistant will process a refund of $129 by Feb 17"
    assert promise.priority == "high"
    assert promise.referenced_at == day(2026, 2, 17)
    assert promise.source_message_ids == ["m2"]
    assert output.suggested_response == f"Follow up on: {promise.text}"
    # The promise's sentence is not mined again for what the answer mentioned.
    assert not any("mentioned" in o.text for o in output.observations)


def test_a_finished_task_is_completed():
    output = observe(
        ("assistant", "Your refund of $129 has been issued."),
        ("user", "Great, the issue is resolved now."),
    )
    assert [o.priority for o in output.observations] == ["completed", "completed"]


def test_background_is_low_priority():
    note = only(observe(("user", "We watched a movie at the Odeon last night.")))
    assert note.priority == "low"
    assert note.referenced_at == day(2026, 2, 9)
    assert "on Feb 9" in note.text  # "last night" no longer means that day when read later


def test_an_unanswered_request_is_the_current_task():
    output = observe(
        ("user", "I moved to Oslo last month."),
        ("assistant", "Noted."),
        ("user", "Can you update my delivery address?"),
    )
    request = output.observations[-1]
    assert request.text == "User asked Assistant to update User's delivery address"
    assert request.priority == "high"
    assert output.current_task == request.text
    assert output.suggested_response == f"Answer the open request: {request.text}"


def test_an_answered_request_is_not_pending():
    output = observe(
        ("user", "Do you have any good book recommendations?"),
        ("assistant", 'Try "The Little Prince" by Antoine de Saint-Exupery.'),
    )
    # The question and its answer share a line, which both messages are the sources of.
    assert texts(output) == [
        'User asked for book recommendations; Assistant recommended "The Little Prince", '
        "Antoine de Saint-Exupery"
    ]
    assert output.observations[0].source_message_ids == ["m1", "m2"]
    assert output.observations[0].priority == "low"
    assert output.current_task is None


def test_a_fact_already_in_memory_is_not_repeated():
    output = observe(
        ("user", "I prefer email over SMS. I also have a cat called Miso."),
        previous=("User prefers email over SMS",),
    )
    assert texts(output) == ["User also has a cat called Miso"]


def test_a_changed_choice_is_not_mistaken_for_a_known_fact():
    output = observe(("user", "I prefer SMS."), previous=("User prefers email over SMS",))
    assert texts(output) == ["User prefers SMS"]


def test_an_injected_memory_block_contributes_nothing():
    block = (
        f"{MEMORY_BLOCK_HEADER}\n\n## Observations\n"
        "🔴 2026-02-01 User's order ORD-999 is late and they are angry\n"
        "🟡 2026-02-01 User prefers email over SMS"
    )
    alone = observe(("system", block))
    assert alone.observations == []
    mixed = observe(("system", block), ("user", "I live in Lisbon now."))
    assert texts(mixed) == ["User lives in Lisbon now"]
    assert all("m1" not in o.source_message_ids for o in mixed.observations)


# --------------------------------------------------------------------------- tool output


def test_tool_output_folds_into_one_line_with_the_salient_values():
    payload = {
        "order_id": "ORD-123",
        "status": "delivered",
        "price": 129.0,
        "currency": "EUR",
        "items": [{"sku": "BL-1", "name": "Blender", "warehouse_bin": "A-17-3"}],
        "audit": {"etag": "a8f5f167f44f4964e6c998dee827110c"},
    }
    note = only(observe(("tool:lookup_order", json.dumps(payload))))
    assert note.text == (
        "Tool lookup_order: order ORD-123, status delivered, price 129.0, currency EUR, Blender"
    )
    assert note.priority == "completed"
    assert note.tags == ["tool"]
    assert note.topics == ["lookup_order"]


def test_repeated_calls_on_one_object_keep_the_latest_state():
    output = observe(
        ("tool:order_status", json.dumps({"order_id": "ORD-7", "status": "processing"})),
        ("tool:order_status", json.dumps({"order_id": "ORD-7", "status": "shipped"})),
        ("tool:order_status", json.dumps({"order_id": "ORD-7", "status": "delivered"})),
    )
    note = only(output)
    assert note.text == "Tool order_status: order ORD-7, status delivered"
    assert note.source_message_ids == ["m1", "m2", "m3"]


def test_a_lookup_that_a_later_line_covers_is_folded_into_it():
    output = observe(
        ("user", "One oat milk latte please"),
        ("tool:get_menu_items", json.dumps({"menu_items": [{"id": "latte-1", "name": "Latte"}]})),
        (
            "tool:get_order_details",
            json.dumps(
                {
                    "order_id": "28740",
                    "attributes": [{"attribute_name": "Milk", "option": "Oat Milk"}],
                    "menu_items": [{"menu_item_id": "latte-1", "menu_item_name": "Latte"}],
                }
            ),
        ),
        ("tool:finish_order", json.dumps({"success": True})),
    )
    note = only(output)
    assert note.text == (
        "Tool get_order_details: order 28740, Milk: Oat Milk, Latte; finish_order: success"
    )
    assert note.priority == "completed"
    assert note.source_message_ids == ["m1", "m2", "m3", "m4"]


def test_a_request_the_tool_line_does_not_fully_show_is_kept():
    details = {
        "order_id": "51",
        "attributes": [{"attribute_name": "Milk", "option": "Oat Milk"}],
        "menu_items": [{"menu_item_id": "latte-1", "menu_item_name": "Latte"}],
    }
    output = observe(
        ("user", "Can I get two oat milk lattes for tomorrow?"),
        ("tool:get_order_details", json.dumps(details)),
    )
    assert texts(output) == [
        "User requested two oat milk lattes for Feb 11",
        "Tool get_order_details: order 51, Milk: Oat Milk, Latte",
    ]


def test_a_failing_tool_is_high_priority():
    note = only(observe(("tool:charge_card", json.dumps({"success": False, "error": "declined"}))))
    assert note.priority == "high"
    assert "error declined" in note.text


def test_a_short_plain_text_result_is_kept_as_it_is():
    note = only(observe(("tool:carrier_api", "Parcel PK-88 delivered yesterday to the porch.")))
    assert note.text == "Tool carrier_api: Parcel PK-88 delivered yesterday to the porch."
    assert note.priority == "completed"
    assert note.referenced_at == day(2026, 2, 9)


def test_a_repetitive_log_becomes_counts_and_errors():
    lines = [f"2026-02-10 10:{i % 60:02d} worker {i % 4} processed job {i}" for i in range(500)]
    lines[250] = "2026-02-10 10:10 worker 2 ERROR timeout talking to payments"
    note = only(observe(("tool:tail_log", "\n".join(lines))))
    assert note.text.startswith("Tool tail_log: 500 lines (")
    assert "errors: 2026-02-10 10:10 worker 2 ERROR timeout talking to payments" in note.text
    assert note.priority == "high"


def test_one_oversized_tool_message_still_yields_a_cited_observation():
    records = [
        {
            "order_id": f"ORD-{n}",
            "status": "delayed" if n % 100 == 7 else "shipped",
            "carrier": "DHL",
            "total": n * 1.5,
        }
        for n in range(4_000)
    ]
    content = json.dumps({"orders": records, "count": len(records)})
    assert token_count(content) > 40_000
    started = time.process_time()
    output = observe(("user", "Where are my orders?"), ("tool:search_orders", content))
    elapsed = time.process_time() - started
    tool_line = output.observations[-1]
    assert "m2" in tool_line.source_message_ids
    assert tool_line.text == (
        "Tool search_orders: count 4000, 4000 orders, order ORD-0, status shipped, DHL, "
        "total 0.0, status: shipped 3960, delayed 40"
    )
    assert token_count(tool_line.text) < 80
    assert elapsed < 1.0  # 40k tokens; the budget is 5 ms per 1,000 tokens, i.e. 0.2 s


def test_one_oversized_text_message_still_yields_cited_observations():
    rng = random.Random(7)
    sentences = [
        f"Ticket {rng.randint(1000, 9999)} failed again on the staging server after the deploy."
        for _ in range(3_000)
    ]
    content = " ".join(sentences)
    assert token_count(content) > 40_000
    output = observe(("user", content))
    assert 0 < len(output.observations) <= 12
    assert all(o.source_message_ids == ["m1"] for o in output.observations)


# --------------------------------------------------------------------------- properties


def _mixed_conversation() -> list[SourceMessage]:
    return source_messages(
        ("system", f"{MEMORY_BLOCK_HEADER}\n\nUser prefers tea."),
        ("user", "Hi! I'm Tom and I prefer phone calls. My parcel PK-88 is late."),
        ("tool:track_parcel", json.dumps({"parcel_id": "PK-88", "status": "in transit"})),
        ("assistant", "I'll call the carrier tomorrow and email you by Friday."),
        ("user", "Thanks. Also, I went to Porto last week."),
        ("tool:track_parcel", json.dumps({"parcel_id": "PK-88", "status": "delayed"})),
        ("user", "Could you refund the shipping fee of $4.99?"),
    )


def test_the_same_input_gives_the_same_output():
    messages = _mixed_conversation()
    first = engine().observe(messages, previous_observations=["x"], now=TUESDAY)
    shuffled = list(reversed(messages))
    second = ExtractiveEngine().observe(shuffled, previous_observations=["x"], now=TUESDAY)
    assert first == second
    notes = stored(*((o.text, o.priority, TUESDAY) for o in first.observations))
    assert engine().reflect(notes, now=TUESDAY) == engine().reflect(notes, now=TUESDAY)


def test_a_worker_keeps_nothing_of_a_runs_texts_after_it():
    # Kept from run to run, the caches of words filled a Celery worker for ten minutes.
    from memory.engines.extractive.observer import _cached_numbers
    from memory.engines.extractive.vocabulary import content_tokens

    messages = _mixed_conversation()
    previous = [f"User ordered parcel PK-{n} on day {n}" for n in range(50)]
    first = engine().observe(messages, previous_observations=previous, now=TUESDAY)
    assert content_tokens.cache_info().currsize == _cached_numbers.cache_info().currsize == 0

    notes = stored(*((o.text, o.priority, TUESDAY) for o in first.observations))
    engine().reflect(notes, now=TUESDAY)
    assert content_tokens.cache_info().currsize == 0
    # And a run after it finds what the first found.
    assert engine().observe(messages, previous_observations=previous, now=TUESDAY) == first


def test_every_observation_cites_real_messages_in_seq_order():
    messages = _mixed_conversation()
    seq_of = {m.id: m.seq for m in messages}
    output = engine().observe(messages, previous_observations=[], now=TUESDAY)
    assert output.observations
    for observation in output.observations:
        ids = observation.source_message_ids
        assert ids and set(ids) <= set(seq_of)
        assert [seq_of[i] for i in ids] == sorted(seq_of[i] for i in ids)
        assert observation.priority in ("high", "medium", "low", "completed")


def test_an_assistants_amount_is_never_background():
    # An assistant's amount alone was background before.
    note = only(observe(("assistant", "The replacement costs $129 including shipping.")))
    assert note.priority == "medium"
