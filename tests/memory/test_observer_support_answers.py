"""Short support dialogues: the Observer keeps what the agent decided (an ETA, a policy, a
refusal and its reason, a promise, a state) and what the customer gave when asked (each
value with what it is), and nothing a reader could not use (a login name, a bare number,
"User asked nicely"). Pure engine tests: no database."""

from __future__ import annotations

from memory.engines.base import ObserverOutput
from memory.engines.extractive import ExtractiveEngine
from tests.memory.builders import TUESDAY, source_messages, texts


def observe(*turns: tuple[str, str]) -> ObserverOutput:
    return ExtractiveEngine().observe(
        source_messages(*turns), previous_observations=(), now=TUESDAY
    )


def joined(output: ObserverOutput) -> str:
    return "\n".join(texts(output))


REFUND_CHAT = (
    ("assistant", "Good morning, what can I do for you?"),
    ("user", "hey, just wanted to check where my refund is"),
    ("assistant", "sure, may I have your full name please?"),
    ("user", "Dana Whitfield"),
    ("assistant", "thanks Dana. Can you give me the order number and your email?"),
    ("user", "Order number: 55102934"),
    ("user", "dana.w@example.com"),
    ("assistant", "I found it. The refund was approved and is being processed back to your card."),
    ("user", "how long will it take"),
    ("assistant", "about five business days"),
    ("user", "ok thanks"),
)


def test_the_eta_the_agent_gives_shares_the_line_of_the_question():
    output = observe(*REFUND_CHAT)
    assert "User asked how long will it take; Assistant said about five business days" in (
        texts(output)
    )


def test_each_detail_given_is_noted_with_what_it_is_on_one_line():
    notes = texts(observe(*REFUND_CHAT))
    assert (
        "User's full name is Dana Whitfield; User's order number is 55102934; "
        "User's email is dana.w@example.com"  # as written, not re-cased
    ) in notes


def test_the_reason_for_contact_and_the_state_of_the_refund_are_kept():
    notes = joined(observe(*REFUND_CHAT))
    assert "User wanted to check where User's refund is" in notes
    assert "the refund was approved and is being processed back to User's card" in notes


def test_nothing_is_noted_of_the_pleasantries():
    notes = joined(observe(*REFUND_CHAT))
    assert "Good morning" not in notes and "thanks" not in notes.lower()


def test_a_policy_is_kept_whole_with_its_condition():
    output = observe(
        ("user", "Do your gift cards expire?"),
        ("assistant", "Yes, all gift cards expire after 12 months without exception."),
    )
    notes = joined(output)
    assert "all gift cards expire after 12 months without exception" in notes
    assert "mentioned 12 months" not in notes
    # A rule is not a day: "after 12 months" is not turned into a date.
    assert all(o.referenced_at is None for o in output.observations)


def test_a_refusal_keeps_its_reason():
    output = observe(
        ("user", "I'd like to exchange the boots I bought in March."),
        ("assistant", "ok, unfortunately because the boots were worn outside we cannot "
                      "exchange them. Is there anything else I can help with?"),
    )  # fmt: skip
    refusal = [o for o in output.observations if "exchange them" in o.text]
    assert [o.text for o in refusal] == [
        "Assistant said we cannot exchange them because the boots were worn outside"
    ]
    assert refusal[0].priority == "high"


def test_a_refusal_with_its_reason_after_it_reads_as_said():
    output = observe(
        ("user", "Can I return the blender?"),
        ("assistant", "I'm sorry, but we can't accept opened appliances because of hygiene "
                      "rules."),
    )  # fmt: skip
    assert "Assistant said we can't accept opened appliances because of hygiene rules" in (
        texts(output)
    )


def test_an_apology_is_not_a_refusal():
    output = observe(
        ("user", "Thanks for trying."),
        ("assistant", "Sorry I couldn't be of more help! Have a good evening."),
    )
    assert texts(output) == []


def test_a_problem_and_the_agents_escalation_both_become_notes():
    output = observe(
        ("user", "My suitcase sent to Lisbon is ten days late; I need it before my flight "
                 "on Saturday."),
        ("assistant", "I have escalated the claim; a driver will deliver it tomorrow."),
    )  # fmt: skip
    notes = {o.text: o for o in output.observations}
    problem = (
        "User's suitcase sent to Lisbon is ten days late; User needs it before User's flight "
        "on Feb 14"
    )
    promise = "Assistant has escalated the claim; a driver will deliver it on Feb 11"
    assert set(notes) == {problem, promise}
    assert notes[problem].priority == "high" and notes[promise].priority == "high"
    assert notes[promise].referenced_at is not None
    assert notes[promise].referenced_at.date().isoformat() == "2026-02-11"


def test_a_promise_made_by_someone_else_is_kept():
    output = observe(
        ("user", "Is anyone going to contact me about the damaged sofa?"),
        ("assistant", "OK, I have told my supervisor, she will call you on Thursday."),
    )
    assert "Assistant has told Assistant's supervisor, she will call User on Feb 12" in (
        texts(output)
    )


def test_a_promise_is_never_cut_inside_a_phrase():
    output = observe(
        ("user", "Where is my replacement?"),
        ("assistant", "Your replacement will be packed and shipped from our Denver warehouse."),
    )
    assert (
        "Assistant said User's replacement will be packed and shipped from our Denver warehouse"
        in texts(output)
    )


def test_a_login_name_is_not_a_fact_about_the_user():
    output = observe(
        ("assistant", "may I have your username and phone number?"),
        ("user", "Username: jwhit88"),
        ("user", "(415) 555-0199"),
    )
    assert texts(output) == ["User's phone number is (415) 555-0199"]


def test_a_login_name_given_unasked_is_not_kept_either():
    output = observe(("user", "username: kbarnes_77"))
    assert "kbarnes_77" not in joined(output)


def test_an_id_nobody_asked_for_is_not_stored_without_what_it_identifies():
    output = observe(
        ("assistant", "How can I help?"),
        ("user", "88213409"),
        ("user", "mwood51"),
    )
    assert texts(output) == []


def test_a_labelled_id_is_stored_with_its_label():
    output = observe(("user", "Ticket ID: 4471-KD"))
    assert texts(output) == ["User's ticket ID is 4471-KD"]


def test_a_short_answer_to_what_was_asked_says_what_it_answers():
    output = observe(
        ("assistant", "Got it. What is your membership tier, Paul?"),
        ("user", "I'm a gold"),
    )
    assert texts(output) == ["User's membership tier is gold"]


def test_agreeing_is_not_a_detail():
    output = observe(
        ("assistant", "What's your order? Here it is on the screen."),
        ("user", "That looks right"),
    )
    assert "looks right" not in joined(output)


def test_asking_nicely_is_not_a_note():
    output = observe(
        ("assistant", "We cannot extend the warranty because it ended in May."),
        ("user", "What if I ask really, really politely?"),
    )
    assert "politely" not in joined(output)


def test_details_given_under_pseudonyms_keep_their_labels():
    output = observe(
        ("assistant", "Can I have your name and email address please?"),
        ("user", "<PERSON_4>"),
        ("user", "<EMAIL_ADDRESS_2>"),
    )
    assert texts(output) == ["User's name is <PERSON_4>; User's email address is <EMAIL_ADDRESS_2>"]


def test_a_long_advice_answer_is_not_read_as_a_refusal_or_an_eta():
    advice = (
        "Great question! Sourdough takes patience. You can't rush the starter: feed it "
        "every 12 hours for about two weeks, and keep it somewhere warm. Most people see "
        "bubbles after 3 days, but don't worry if yours takes longer. Once it doubles "
        "within 8 hours of a feeding, it is ready to bake with. Use a kitchen scale, keep "
        "notes on the temperature, and try a simple loaf first before you experiment with "
        "rye or whole wheat flours."
    )
    output = observe(("user", "How do I start a sourdough starter?"), ("assistant", advice))
    notes = joined(output)
    assert "can't rush" not in notes and "two weeks" not in notes


def test_a_state_is_kept_as_the_answer_to_what_was_asked_not_as_a_sign_off():
    asked = observe(
        ("user", "can you let me know where my package is"),
        ("assistant", "It is in transit and should reach the depot soon."),
    )
    assert "Assistant said it is in transit" in joined(asked)
    told = observe(
        ("user", "That's my order, thanks."),
        ("assistant", "Your order is submitted and it's being prepared."),
    )
    assert "being prepared" not in joined(told)


def test_tell_me_what_asks_what():
    output = observe(("user", "Can you tell me what's in the Cold Brew?"))
    assert texts(output) == ["User asked what's in the Cold Brew"]


def test_a_promise_keeps_the_condition_it_is_made_on():
    # Only the clause with the promise was kept: "Assistant said we'll reverse it
    # manually", without when, which is what the customer holds the agent to.
    output = observe(
        ("user", "I was charged twice. What if the second charge doesn't drop off?"),
        (
            "assistant",
            "If it's still there on Monday, reply to this thread and we'll reverse it manually.",
        ),
    )
    assert (
        "Assistant said if it's still there on Feb 16, reply to this thread and we'll "
        "reverse it manually"
    ) in joined(output)


def test_what_a_rule_grants_is_kept_when_nothing_was_asked():
    # "A broken zip is covered by the warranty" answers a complaint, not a question: no
    # cue read it, and the way to a repair was lost.
    output = observe(
        ("user", "That's ridiculous, the jacket has a broken zip."),
        ("assistant", "A broken zip is covered by the warranty, though."),
    )
    assert "Assistant said a broken zip is covered by the warranty" in joined(output)


def test_what_never_came_and_what_keeps_going_wrong_are_the_problem():
    # Neither named a problem word: the reason for the call was kept low ("still hasn't
    # arrived") or not at all ("keeps logging me out").
    late = observe(
        ("user", "I ordered a standing desk three weeks ago and it still hasn't arrived."),
        ("assistant", "I'm sorry to hear that."),
    )
    looping = observe(
        ("user", "My app keeps logging me out every few minutes."),
        ("assistant", "Which version are you on?"),
    )
    for output, said in ((late, "still hasn't arrived"), (looping, "keeps logging User out")):
        [problem] = [o for o in output.observations if said in o.text]
        assert problem.priority == "high"


def test_a_day_an_answer_names_is_one_mention_in_its_place():
    answer = (
        "There is a lot to see in Paris this spring. The Louvre reopens on March 1 after "
        "its renovation, and the Orsay shows Monet until April 15, 2026. Versailles is an "
        "hour away by train, and the gardens are worth a whole day when the weather is fine."
    )
    output = observe(("user", "What can I see in Paris in March?"), ("assistant", answer))
    # It read "Assistant mentioned March, 1": the month as a name, the day as a number.
    assert "Louvre, March 1, Orsay, Monet, April 15 2026" in joined(output)


def test_the_terms_of_a_cancellation_are_kept_with_whom_they_bind():
    output = observe(
        ("user", "I want to cancel my subscription."),
        (
            "assistant",
            "Note that your plan renews on March 1, and cancelling now means you keep "
            "access until then with no further charges.",
        ),
    )
    assert (
        "Assistant said note that User's plan renews on March 1, and cancelling now means "
        "User keeps access until then with no further charges"
    ) in joined(output)


def test_what_the_agent_found_wrong_and_the_workaround_are_kept():
    # Only the release date was kept: the cause ("a known bug") and what to do until the
    # fix ("until then, turning off ...") are what the customer calls back about.
    output = observe(
        ("user", "My app keeps logging me out every few minutes."),
        (
            "assistant",
            "That's a known bug in 4.2.1. Until then, turning off battery optimisation for "
            "the app stops the logouts.",
        ),
    )
    notes = joined(output)
    assert "Assistant said that's a known bug in 4.2.1" in notes
    assert "until then, turning off battery optimisation for the app stops the logouts" in notes


def test_a_service_that_is_down_is_the_problem_a_price_that_went_down_is_not():
    output = observe(
        ("user", "My internet has been down since last night. The price went down by $5 too."),
        ("assistant", "Let me check."),
    )
    [outage] = [o for o in output.observations if "internet has been down" in o.text]
    assert outage.priority == "high"
    assert all(o.priority != "high" for o in output.observations if "price" in o.text)


def test_what_the_customer_is_asked_to_do_stays_with_the_promise_it_unlocks():
    output = observe(
        ("user", "And if it isn't fixed by tonight?"),
        ("assistant", "Then call us back and we'll send a technician at no cost."),
    )
    assert "call us back and we'll send a technician at no cost" in joined(output)
