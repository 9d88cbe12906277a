"""The extractive Reflector condenses: it merges what repeats, supersedes what a later
note updates, sums up a subject's notes in fewer words, and never repeats one
observation. Pure functions over plain dataclasses: no database, no network."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from memory.engines.base import DraftReflection, SourceObservation
from memory.engines.extractive import ExtractiveEngine
from memory.tokens import token_count
from tests.memory.builders import TUESDAY


def day(month: int, date: int) -> datetime:
    return datetime(2026, month, date, 12, 0, tzinfo=UTC)


def stored(*notes: tuple[str, str, datetime]) -> list[SourceObservation]:
    """Observations o1, o2, ... as the Reflector receives them: (text, priority, day)."""
    return [
        SourceObservation(
            id=f"o{number}",
            text=text,
            priority=priority,
            observed_at=when,
            referenced_at=None,
            token_count=token_count(text),
        )
        for number, (text, priority, when) in enumerate(notes, start=1)
    ]


def reflect(notes: list[SourceObservation]) -> list[DraftReflection]:
    return ExtractiveEngine().reflect(notes, now=TUESDAY)


def cited(reflections: list[DraftReflection]) -> set[str]:
    return {i for r in reflections for i in r.source_observation_ids}


# A history with something to condense: a museum outing talked over across two days,
# with long answers from the assistant, and two unrelated notes.
MUSEUM = (
    (
        "User went to the science museum with a friend who's a chemistry professor on Mar 2; "
        "asked for tips on museum memberships; Assistant listed Family membership ($120 a "
        "year); Individual membership ($75 a year); Free entry on first Sundays; Skip the "
        "queue; Bring snacks",
        "medium",
        day(3, 2),
    ),
    (
        "User asked whether the museum membership covers the special exhibits; Assistant said "
        "special exhibits cost $15 extra for members; listed Dinosaur Hall; Space Gallery; "
        "Check the calendar; Book ahead; Arrive early",
        "low",
        day(3, 2),
    ),
    (
        "User thinks User will buy the family membership for the museum before the Space "
        "Gallery opens; asked what else to see; Assistant listed Planetarium shows; "
        "Cafeteria; Gift shop; Garden",
        "medium",
        day(3, 3),
    ),
    ("User's cat is called Miso", "low", day(3, 4)),
    ("User is learning Portuguese", "medium", day(3, 5)),
)


def test_a_single_observation_is_never_copied_into_a_reflection():
    assert reflect(stored(("User likes tea", "low", day(2, 1)))) == []
    unrelated = stored(
        ("User's cat is called Miso", "low", day(2, 1)),
        ("User is learning Portuguese", "medium", day(2, 2)),
        ("Assistant promised a refund of $40 for the broken kettle", "high", day(2, 3)),
        ("User moved to Porto in January", "medium", day(2, 4)),
    )
    assert reflect(unrelated) == []
    notes = stored(*MUSEUM)
    reflections = reflect(notes)
    assert reflections
    texts = {n.id: n.text for n in notes}
    for reflection in reflections:
        assert len(reflection.source_observation_ids) >= 2
        assert reflection.text not in texts.values()


def test_an_observation_nothing_condenses_is_not_cited():
    notes = stored(*MUSEUM)
    reflections = reflect(notes)
    # The cat and the language course have nothing to condense with: no reflection
    # cites them, so the pipeline keeps serving them as observations.
    assert {"o4", "o5"}.isdisjoint(cited(reflections))
    assert all("Miso" not in r.text and "Portuguese" not in r.text for r in reflections)


def test_a_subjects_notes_become_one_shorter_line_keeping_qualifiers_amounts_and_dates():
    notes = stored(*MUSEUM)
    [museum] = reflect(notes)
    assert museum.source_observation_ids == ["o1", "o2", "o3"]
    assert "friend who's a chemistry professor" in museum.text
    assert "$15" in museum.text and "Space Gallery" in museum.text
    assert "(Mar 2)" in museum.text and "(Mar 3)" in museum.text  # each day's part dated
    assert "family membership" in museum.text
    sources = sum(n.token_count for n in notes if n.id in museum.source_observation_ids)
    assert token_count(museum.text) * 2 <= sources
    assert museum.tags == ["summary"] and museum.priority == "medium"


def test_repeats_merge_into_one_reflection_citing_every_repeat():
    notes = stored(
        ("User prefers email for updates", "medium", day(2, 1)),
        ("User's dog is called Rex", "medium", day(2, 2)),
        ("User prefers email for all updates", "medium", day(2, 3)),
    )
    [merged] = reflect(notes)
    assert merged.text == "User prefers email for all updates"
    assert merged.source_observation_ids == ["o1", "o3"]
    same = stored(*(("User likes tea", "low", day(2, d)) for d in range(1, 6)))
    [tea] = reflect(same)
    assert tea.source_observation_ids == ["o1", "o2", "o3", "o4", "o5"]


def test_a_speakers_name_is_no_part_of_what_two_notes_share():
    """Two things one speaker says are repeats when what they say is, not because the
    same name opens both: neither line is lost in a merge."""
    notes = stored(
        ("Ticket Agent can't do that", "low", day(3, 2)),
        ("Ticket Agent can't imagine why", "low", day(3, 2)),
        ("<PERSON_2> doesn't want the blue one", "low", day(3, 3)),
        ("<PERSON_2> doesn't want the blue one, really", "low", day(3, 3)),
    )
    [merged] = reflect(notes)
    assert merged.source_observation_ids == ["o3", "o4"]


def test_a_later_update_supersedes_with_the_date_of_the_change():
    notes = stored(
        ("Maria prefers e-mail over SMS", "medium", day(1, 5)),
        ("Maria's dog is called Rex", "medium", day(1, 6)),
        ("Maria now prefers SMS over e-mail", "medium", day(3, 2)),
    )
    [update] = reflect(notes)
    assert update.text == "Maria now prefers SMS over e-mail, since Mar 2"
    assert update.source_observation_ids == ["o1", "o3"]
    assert update.tags == ["update"]
    changed = stored(
        ("User's email is anna@old.example", "medium", day(1, 5)),
        ("User's email is anna@new.example", "medium", day(2, 9)),
    )
    [email] = reflect(changed)
    assert email.text == "User's email is anna@new.example (was anna@old.example), since Feb 9"
    assert email.source_observation_ids == ["o1", "o2"]


def test_what_a_speaker_does_not_know_changes_no_wish_of_theirs():
    """ "<PERSON_2> doesn't know" shares only its speaker with "<PERSON_2> wants to buy 5
    shares": it is no change of mind, and the wish is not struck out."""
    wish = (
        "<PERSON_1> is eating breakfast; <PERSON_2> wants to buy 5 shares of SGJ and <PERSON_2> "
        "wants to buy them now; <PERSON_1> said time is money"
    )
    notes = stored(
        (wish, "medium", day(3, 11)),
        ("<PERSON_2> doesn't know, <PERSON_2> lost it all", "low", day(3, 12)),
    )
    assert reflect(notes) == []
    changed = stored(
        ("<PERSON_2> wants to buy 5 shares of SGJ", "medium", day(3, 11)),
        ("<PERSON_2> no longer wants shares of SGJ", "medium", day(3, 12)),
    )
    [update] = reflect(changed)
    assert update.tags == ["update"] and "since Mar 12" in update.text


def test_different_amounts_are_different_facts():
    notes = stored(
        ("Assistant promised a refund of $129", "high", day(2, 1)),
        ("Assistant promised a refund of $130", "high", day(2, 2)),
    )
    assert reflect(notes) == []


def test_a_pseudonym_survives_reflection_byte_for_byte():
    notes = stored(
        (
            "<PERSON_12> said the parcel for order ORD-5521 never arrived; asked "
            "<PERSON_3>'s team for a refund; Assistant listed Track the parcel; Wait two "
            "days; Ask the neighbours; Check the post office",
            "high",
            day(3, 9),
        ),
        (
            "Assistant said order ORD-5521 left the <LOCATION_51> depot on Mar 2 and the "
            "courier <PERSON_3> marked it delivered; listed Refund; Replacement; Store "
            "credit; Voucher",
            "medium",
            day(3, 9),
        ),
        (
            "<PERSON_12> wants the refund for order ORD-5521 on the card, not store credit; "
            "said <PERSON_12>'s neighbour <PERSON_7> saw no courier; asked how long it takes; "
            "Assistant listed Five business days; Card statement; Email receipt",
            "medium",
            day(3, 10),
        ),
        ("User's cat is called Miso", "low", day(3, 11)),
    )
    reflections = reflect(notes)
    assert reflections and all(len(r.source_observation_ids) >= 2 for r in reflections)
    text = " ".join(r.text for r in reflections)
    labels = re.compile(r"<[A-Z]+(?:_[A-Z]+)*_\d+>")
    given = {label for n in notes for label in labels.findall(n.text)}
    kept = labels.findall(text)
    assert "<PERSON_12>" in kept and set(kept) <= given
    # Nothing label-like is left once the whole labels are taken out: no "<PERSON12>",
    # "PERSON_12", "<person_12>" or a label cut in two.
    assert not re.search(r"person|location|<|>|_\d", labels.sub("", text), re.IGNORECASE)


def test_an_id_a_group_is_about_is_said_once_at_its_head():
    notes = stored(
        (
            "User said the headphones of order ORD-5521 arrived broken, with a cracked left "
            "ear cup; asked for a refund; Assistant listed Refund; Replacement; Repair; "
            "Store credit",
            "high",
            day(3, 9),
        ),
        (
            "Assistant said order ORD-5521 is within the 30-day return window; listed "
            "Print the label; Pack the box; Drop it off; Keep the receipt",
            "medium",
            day(3, 9),
        ),
        ("User's cat is called Miso", "low", day(3, 11)),
        ("User is learning Portuguese", "medium", day(3, 12)),
    )
    [order] = reflect(notes)
    assert order.text.startswith("order ORD-5521: ")
    assert order.text.count("ORD-5521") == 1
    assert "cracked left ear cup" in order.text and "30-day return window" in order.text


def test_the_newest_notes_are_not_summed_up():
    # Four notes about the museum, the last of them among the newest quarter of memory.
    notes = stored(*MUSEUM[:3], ("User's cat is called Miso", "low", day(3, 4)))
    newest = stored(
        *MUSEUM,
        (
            "User asked about museum membership discounts for students; Assistant listed "
            "Student card; Half price; Weekday only",
            "low",
            day(3, 6),
        ),
    )
    assert cited(reflect(notes)) == {"o1", "o2", "o3"}
    assert "o6" not in cited(reflect(newest))


def test_money_a_deadline_or_a_promise_is_never_background():
    notes = stored(
        ("User's refund for order 4521 will arrive by Feb 17", "low", day(2, 1)),
        ("User's refund for order 4521 will arrive by Feb 17", "low", day(2, 2)),
        ("User watched a film at the Odeon", "low", day(2, 3)),
        ("User watched a film at the Odeon", "low", day(2, 4)),
    )
    priorities = {r.text: r.priority for r in reflect(notes)}
    assert priorities == {
        "User's refund for order 4521 will arrive by Feb 17": "medium",
        "User watched a film at the Odeon": "low",
    }


def test_the_same_observations_give_the_same_reflections():
    notes = stored(
        *((text, priority, when.replace(hour=n)) for n, (text, priority, when) in enumerate(MUSEUM))
    )
    assert reflect(notes) == reflect(list(reversed(notes))) == reflect(notes)


# --------------------------------------------------------------------------- openai engine


def test_the_openai_reflector_may_answer_that_nothing_condenses(fake_openai):
    from tests.memory.fake_openai import completion
    from tests.memory.test_openai_engine import make_engine, refund_observations

    fake_openai.enqueue(completion("NOTHING TO CONDENSE"))
    engine = make_engine(fake_openai)
    assert engine.reflect(refund_observations(), now=TUESDAY) == []
    prompt = fake_openai.requests[0].body["messages"][0]["content"]
    assert "Cite in refs every observation a reflection condenses" in prompt


def test_an_openai_reflection_that_cites_nothing_is_dropped_not_given_every_source(
    fake_openai,
):
    from tests.memory.fake_openai import completion
    from tests.memory.test_openai_engine import make_engine, refund_observations

    fake_openai.enqueue(
        completion(
            "- [high] (2026-02-17) Refund for order 4521 is late, due by Feb 17 {refs: 1-3}\n"
            "- [medium] (unknown) User is a loyal customer {refs: 9}"
        )
    )
    [reflection] = make_engine(fake_openai).reflect(refund_observations(), now=TUESDAY)
    assert reflection.source_observation_ids == ["obs-1", "obs-2", "obs-3"]


def test_a_person_the_user_names_is_a_subject_across_days_not_one_an_answer_lists():
    friend = (
        "User went hiking with User's friend <PERSON_5> on Mar 2, who is training for the "
        "Lisbon marathon; asked for trail snacks; Assistant listed Trail mix; Dried mango; "
        "Energy bars; Peanut butter sandwiches",
        "medium",
        day(3, 2),
    )
    later = (
        "User said <PERSON_5> finished the Lisbon marathon in 3 hours 50 minutes on Mar 20; "
        "asked for recovery meal ideas; Assistant listed Salmon and rice; Lentil soup; Greek "
        "yogurt bowl; Smoothies",
        "medium",
        day(3, 21),
    )
    tail = [("User's cat is called Miso", "low", day(3, 22)), ("User likes tea", "low", day(3, 23))]
    [about_friend] = reflect(stored(friend, later, *tail))
    assert about_friend.source_observation_ids == ["o1", "o2"]
    assert about_friend.topics == ["<PERSON_5>"]
    assert "3 hours 50 minutes" in about_friend.text and "(Mar 21)" in about_friend.text
    # The same label only in two of the assistant's lists, weeks apart: most likely a
    # product or a place the detector took for a person, and nothing to group by.
    listed = [
        (
            f"User asked for {topic}; Assistant listed <PERSON_5>; {a}; {b}; {c}",
            "low",
            when,
        )
        for topic, a, b, c, when in (
            ("running shoes", "Trail runners", "Stability shoes", "Racing flats", day(3, 2)),
            ("rain jackets", "Shell jackets", "Ponchos", "Insulated parkas", day(3, 21)),
        )
    ]
    assert reflect(stored(*listed, *tail)) == []


# Two unrelated notes after a group, so that it is older material the Reflector condenses.
TAIL = (
    ("Phoebe's guitar has a broken string", "low", day(3, 22)),
    ("Gunther closed the coffee house early", "low", day(3, 23)),
)


def on_two_days(first: str, second: str) -> list[SourceObservation]:
    """Two medium notes on Mar 2 and Mar 5, then the unrelated ``TAIL``."""
    return stored((first, "medium", day(3, 2)), (second, "medium", day(3, 5)), *TAIL)


def test_a_person_two_scenes_only_mention_glues_nothing_together():
    """A person named in two notes that share nothing else (two scenes of a sitcom, two
    agenda points of a meeting) is no subject: a line of both would glue unrelated
    events together and say a third of each. The friend above shares the marathon."""
    scenes = stored(
        (
            "Monica said dinner is at eight; Ross asked <PERSON_4> to pass the salt; "
            "Chandler spilled the gravy on the new rug",
            "low",
            day(3, 2),
        ),
        (
            "Rachel said the ferry to the island leaves at noon; <PERSON_4> laughed at the "
            "captain's hat; Joey bought three sandwiches for the trip",
            "low",
            day(3, 9),
        ),
        *TAIL,
    )
    assert reflect(scenes) == []


def test_a_sentence_with_a_subject_of_its_own_is_nobodys_words_in_a_line():
    """A stage direction inside someone's talk ("<PERSON_1> makes a sound") is written as
    its own sentence, not as the last speaker's ("<PERSON_2> <PERSON_1> makes ...")."""
    notes = on_two_days(
        "<PERSON_2> asked whether order ORD-5521 has shipped yet; <PERSON_1> makes a sound "
        "of absolute disgust; <PERSON_2> said the courier lost two parcels last month; "
        "<PERSON_2> asked for a refund by Friday",
        "<PERSON_2> said order ORD-5521 arrived broken at the door; The dog barks at the "
        "courier; <PERSON_2> asked for a replacement instead; <PERSON_2> said the receipt "
        "is in the drawer",
    )
    [order] = reflect(notes)
    assert order.text.startswith("order ORD-5521: <PERSON_1> makes a sound")
    assert not re.search(r"<PERSON_\d+> <PERSON_\d+>", order.text)


def test_a_speaker_named_after_a_role_keeps_the_whole_name():
    """A meeting's "User Interface" designer is not the role "User" saying "Interface
    said ..." when the line names the speaker once."""
    notes = on_two_days(
        "User Interface said prototype RC-2201 needs a bigger screen for the channel list; "
        "Marketing said users lose remotes under the sofa; User Interface said a locator "
        "beep would cost two Euros more per unit",
        "User Interface said prototype RC-2201 could show the channel name on screen; "
        "Marketing said a bigger screen costs more; User Interface said voice recognition "
        "is out of the twelve Euro budget",
    )
    [prototype] = reflect(notes)
    assert prototype.text.startswith("RC-2201: User Interface said")
    assert "Interface said" not in prototype.text.removeprefix("RC-2201: User Interface said")


def test_dropping_a_filler_never_makes_a_word_come_twice():
    """Speech that starts again ("for the for this meeting") keeps its "the": without it
    the line would stutter ("for for this meeting")."""
    notes = on_two_days(
        "Project Manager said for the for this meeting prototype RC-2201 gets a rubber "
        "case; Marketing said users lose remotes under the sofa; Marketing said a locator "
        "beep would cost two Euros more per unit",
        "Project Manager said if the if prototype RC-2201 stays under twelve Euros we keep "
        "the screen; Marketing said a bigger screen costs more; Marketing said voice "
        "recognition is out of the twelve Euro budget",
    )
    [prototype] = reflect(notes)
    assert "for the for this meeting" in prototype.text and "if the if" in prototype.text
    assert not re.search(r"\b(\w+) \1\b", prototype.text)


def test_a_possessive_is_written_with_its_owner_every_time():
    """ "<PERSON_49>'s brother" after "<PERSON_49>'s neighbour" in one line keeps its name:
    naming a speaker once per line must not leave "'s brother will bring the box"."""
    notes = on_two_days(
        "<PERSON_49> said parcel PK-4471 left the depot on Monday with the spare parts; "
        "<PERSON_49>'s neighbour signed for parcel PK-4471 at noon; <PERSON_49> asked "
        "whether anyone could collect it",
        "<PERSON_49> said parcel PK-4471 was opened and two parts are missing; "
        "<PERSON_49>'s brother will bring the box back on Friday; <PERSON_49> asked for "
        "a refund of the missing parts",
    )
    [parcel] = reflect(notes)
    assert "<PERSON_49>'s brother will bring" in parcel.text
    assert "; 's" not in parcel.text


def test_a_preference_for_another_way_to_be_reached_replaces_the_earlier_one():
    notes = stored(
        ("User usually prefers phone calls", "medium", day(2, 1)),
        ("User's dog is called Rex", "medium", day(2, 3)),
        ("User prefers SMS", "medium", day(2, 9)),
    )
    [update] = reflect(notes)
    assert update.source_observation_ids == ["o1", "o3"]
    assert update.text.startswith("User prefers SMS") and "since Feb 9" in update.text
    # A preference for something else is not a change of channel.
    unrelated = stored(
        ("User prefers green tea", "medium", day(2, 1)),
        ("User prefers SMS", "medium", day(2, 9)),
    )
    assert reflect(unrelated) == []


def test_a_memory_of_a_few_notes_is_condensed_whole():
    unrelated = (
        ("User's cat is called Miso", "low", day(2, 20)),
        ("User is learning Portuguese", "medium", day(2, 21)),
        ("User moved to Porto in January", "medium", day(2, 22)),
        ("User's sister plays the cello", "low", day(2, 23)),
        ("User bought a red bicycle", "low", day(2, 24)),
    )
    # Of eight notes, the last two museum notes are the newest quarter: held back.
    many = stored(*unrelated, *MUSEUM[:3])
    assert {"o7", "o8"}.isdisjoint(cited(reflect(many)))
    # Of four, there is no older part: the museum notes are condensed together.
    few = stored(unrelated[0], *MUSEUM[:3])
    assert cited(reflect(few)) == {"o2", "o3", "o4"}


PARTY = (
    ("User is planning a dinner party", "medium", day(3, 2)),
    (
        "User requested a vegetarian main course for eight people for the party; Assistant "
        "said a mushroom and chestnut wellington would serve eight",
        "low",
        day(3, 2),
    ),
    ("User's sister is allergic to peanuts", "low", day(3, 2)),
)


def test_short_notes_about_one_thing_become_one_line_that_keeps_the_answer():
    """ "the party" refers back to the dinner party: two short notes about it become one
    line, shorter than the two, that keeps what was asked and what was suggested."""
    notes = stored(*PARTY)
    [party] = reflect(notes)
    assert party.source_observation_ids == ["o1", "o2"]
    assert "dinner party" in party.text and "vegetarian main course" in party.text
    assert "wellington would serve eight" in party.text
    assert len(party.text.split()) < len(PARTY[0][0].split()) + len(PARTY[1][0].split())


def test_a_note_is_not_condensed_into_a_line_that_leaves_out_why_it_is_there():
    """Grouped for Lisbon, a note whose line would keep the user's name and drop the move
    to Lisbon (its best part, about what the line is about) stays as it is."""
    notes = stored(
        (
            "User's name is Dana; User moved to Lisbon the week of Nov 27 and User prefers "
            "tea over coffee",
            "medium",
            day(2, 1),
        ),
        ("Tool call: weather(Lisbon): 21C and sunny", "low", day(2, 1)),
    )
    assert "o1" not in cited(reflect(notes))


def test_a_speaker_who_opens_one_note_is_still_named_alone():
    """In a line of several people's talk, "<PERSON_60> said ..." is <PERSON_60>'s, not
    the line's first speaker's: no reflection reads "<PERSON_53> <PERSON_60> said"."""
    notes = stored(
        (
            "<PERSON_53> asked how <PERSON_60> knew about the Knicks game; had a doctor, a "
            "nurse and a helper guy; <PERSON_60> said the Knicks won by 10",
            "low",
            day(3, 5),
        ),
        ("<PERSON_53> said the Knicks game was on at the hospital", "low", day(3, 6)),
        ("<PERSON_53> asked who won the Knicks game", "low", day(3, 7)),
    )
    lines = [r.text for r in reflect(notes)]
    assert lines
    assert not any(re.search(r"<PERSON_\d+> <PERSON_\d+> said", line) for line in lines)
    told = [line for line in lines if "won by 10" in line]
    assert all("<PERSON_60> said the Knicks won by 10" in line for line in told)
