"""Named speakers: the notes say who by name ("Maria asked for a refund"), an agent's role
beside its name when two named people talk, and three or more people each stay apart,
never merged into "User". A pseudonym as a speaker's name reads the same way. Pure engine
tests: no database."""

from __future__ import annotations

import re
from dataclasses import replace

from memory.engines.base import ObserverOutput, SourceMessage
from memory.engines.extractive import ExtractiveEngine
from tests.memory.builders import TUESDAY, source_messages, texts


def said(*turns: tuple[str, str, str]) -> list[SourceMessage]:
    """Messages from (role, speaker, content)."""
    messages = source_messages(*[(role, content) for role, _, content in turns])
    return [replace(m, speaker=name) for m, (_, name, _) in zip(messages, turns, strict=True)]


def observe(messages: list[SourceMessage]) -> ObserverOutput:
    return ExtractiveEngine().observe(messages, previous_observations=(), now=TUESDAY)


def noted(*turns: tuple[str, str, str]) -> list[str]:
    """The notes the Observer writes of these (role, speaker, content) turns."""
    return texts(observe(said(*turns)))


def noted_text(*turns: tuple[str, str, str]) -> str:
    """The same notes, one per line."""
    return "\n".join(noted(*turns))


SUPPORT = said(
    ("user", "Maria", "Hi, I'm Maria. I was charged twice for order 5521 and I need a refund."),
    ("assistant", "Tom", "I'm sorry about that. I will refund the duplicate charge of $49 by "
                         "Friday and I'll email you the receipt."),
    ("user", "Maria", "Thanks Tom, please call me back if anything changes."),
    ("assistant", "Tom", "I'll call you back by Friday."),
)  # fmt: skip


def test_the_customer_and_the_agent_are_named():
    notes = texts(observe(SUPPORT))
    assert "Maria was charged twice for order 5521 and Maria needs a refund" in notes
    assert "Tom will call Maria back by Feb 13" in notes


def test_the_agent_is_introduced_with_its_role_once():
    notes = texts(observe(SUPPORT))
    assert notes[1] == (
        "Tom, the agent, will refund the duplicate charge of $49 by Feb 13 and Tom will "
        "email Maria the receipt"
    )
    assert sum("the agent" in n for n in notes) == 1


def test_a_speaker_introducing_themselves_is_not_a_note():
    assert not any("name is" in n for n in texts(observe(SUPPORT)))


def test_nobody_named_is_called_user_or_assistant():
    joined = " ".join(texts(observe(SUPPORT)))
    assert "User" not in joined and "Assistant" not in joined


def test_an_agent_already_introduced_in_memory_is_not_introduced_again():
    output = ExtractiveEngine().observe(
        SUPPORT[2:],
        previous_observations=("Tom, the agent, will refund the duplicate charge",),
        now=TUESDAY,
    )
    assert "Tom will call Maria back by Feb 13" in texts(output)


MEETING = said(
    ("user", "Anna", "I think we should launch the beta in March."),
    ("user", "Ben", "I disagree, the login flow is broken and we need two more weeks."),
    ("user", "Chloe", "Ben, can you fix the login flow by Friday?"),
    ("user", "Ben", "Yes, I will fix it by Friday."),
    ("user", "Anna", "Okay, then I prefer a launch on March 20."),
)


def test_three_people_in_a_meeting_stay_apart():
    output = observe(MEETING)
    notes = texts(output)
    joined = "\n".join(notes)
    assert "Ben disagrees, the login flow is broken and we need two more weeks" in joined
    assert "Chloe asked Ben to fix the login flow by Feb 13" in joined
    assert "Ben will fix it by Feb 13" in joined
    assert "Anna prefers a launch on March 20" in joined
    assert "User" not in joined


def test_a_meetings_turns_share_lines_instead_of_one_line_each():
    output = observe(MEETING)
    assert len(output.observations) < len(MEETING)
    cited = [i for o in output.observations for i in o.source_message_ids]
    assert sorted(cited) == sorted(set(cited))  # each turn in one line only


def test_a_question_a_colleague_answers_is_not_left_pending():
    output = observe(MEETING)
    assert output.current_task is None
    question = next(o for o in output.observations if "m3" in o.source_message_ids)
    assert question.priority != "high"


def test_you_in_a_conversation_of_named_people_is_who_spoke_before():
    output = observe(
        said(
            ("user", "Priya", "I finally finished the quarterly report."),
            ("user", "Omar", "Can you send me your draft before lunch?"),
        )
    )
    assert "Omar asked Priya to send Omar Priya's draft before lunch" in texts(output)


def test_you_among_three_people_is_they_unless_someone_is_named():
    """Among three or more people "you" is anyone ("if you can't select channels") or one
    of several: not the last speaker's name, and not a "you" an agent reading its memory
    would take for itself. It is "they" (or "them"); a turn that names whom it asks ("Ben,
    can you ...") still says who."""
    notes = noted_text(
        ("user", "Anna", "The remote gets a rubber case in three colours, blue, red and grey."),
        (
            "user",
            "Ben",
            "I mean there's no way anybody's gonna buy a remote control these days if you "
            "can't select channels one by one.",
        ),
        ("user", "Chloe", "Ben, can you check the price of the rubber by Friday?"),
        ("user", "Ben", "Sure, and I like your colours a lot, they suit the case."),
        ("user", "Anna", "Can you send me the price list after the meeting?"),
    )
    assert "a remote control these days if they can't select channels" in notes
    assert "Chloe asked Ben to check the price of the rubber by Feb 13" in notes
    assert "Ben likes their colours a lot" in notes
    assert "Anna asked them to send Anna the price list after the meeting" in notes
    assert "Anna can't" not in notes and "Chloe's colours" not in notes
    assert not re.search(r"\b[Yy]ou(?:r)?\b", notes)


def test_you_among_several_people_after_a_verb_and_before_a_quantifier_is_them():
    """ "I like you both" said among several people is "likes them both", not "likes they
    both": a quantifier or an adverb after "you" marks it an object, as a determiner
    does (before a verb it is still the subject: the test above, "if they can't")."""
    notes = noted_text(
        ("user", "Anna", "The remote gets a rubber case in three colours, blue, red and grey."),
        ("user", "Ben", "I like you both, and I love the grey one so much."),
        ("user", "Chloe", "I will call you tomorrow about the price of the rubber case."),
        ("user", "Dan", "I'm sure my boss is gonna like you better than me."),
    )
    assert "Ben likes them both" in notes
    assert "Chloe will call them" in notes
    assert "gonna like them better than Dan" in notes
    assert "they both" not in notes and "call they" not in notes


def test_pseudonyms_as_speakers_read_as_names():
    output = observe(
        said(
            ("user", "<PERSON_3>", "I moved to <LOCATION_2> last month and I love it."),
            ("user", "<PERSON_4>", "Do you like the weather there?"),
            ("user", "<PERSON_3>", "I hate the rain, but my job at <ORGANIZATION_1> pays well."),
        )
    )
    assert texts(output) == [
        "<PERSON_3> moved to <LOCATION_2> in January and <PERSON_3> loves it; hates the rain, "
        "but <PERSON_3>'s job at <ORGANIZATION_1> pays well"
    ]


def test_an_unnamed_chat_still_reads_user_and_assistant():
    output = observe(
        said(
            ("user", "", "Please email me the invoice for order 88."),
            ("assistant", "", "I'll email you the invoice for order 88 today."),
        )
    )
    assert texts(output) == [
        "User asked to email User the invoice for order 88",
        "Assistant will email User the invoice for order 88",
    ]


def test_a_full_name_is_written_once_then_the_first_name():
    output = observe(
        said(
            ("user", "Rachel Green", "Monica Geller, you lost your keys at the coffee house."),
            ("user", "Monica Geller", "I paid for new keys twice, I'm so tired."),
            ("user", "Monica Geller", "I moved my spare key to my sister's flat in Queens."),
        )
    )
    assert texts(output) == [
        "Rachel Green said Monica Geller lost Monica's keys at the coffee house",
        "Monica paid for new keys twice, Monica is so tired",
        "Monica moved Monica's spare key to Monica's sister's flat in Queens",
    ]


def test_two_people_with_one_first_name_keep_their_full_names():
    output = observe(
        said(
            ("user", "Anna Berg", "I booked the venue for the launch on Friday."),
            ("user", "Anna Lopez", "I ordered the catering for Friday."),
            ("user", "Anna Berg", "I will print the badges tomorrow."),
        )
    )
    assert texts(output) == [
        "Anna Berg booked the venue for the launch on Feb 6; will print the badges on Feb 11",
        "Anna Lopez ordered the catering for Feb 6",
    ]


def test_speech_fillers_are_not_written_down():
    output = observe(
        said(
            ("user", "Project Manager", "Um, we're gonna sell this remote for twenty five "
                                        "Euro, uh, and we want the the cost under twelve Euro."),
            ("user", "Marketing", "Mm-hmm."),
        )
    )  # fmt: skip
    joined = " ".join(texts(output))
    assert "twenty five Euro" in joined and "twelve Euro" in joined
    assert not any(f in joined.lower().split() for f in ("um", "uh", "um,", "uh,", "mm-hmm"))
    assert "the the" not in joined


def test_a_colleagues_short_reply_is_not_taken_for_a_detail_asked():
    output = observe(
        said(
            ("user", "Project Manager", "What's your idea for the shape?"),
            ("user", "Industrial Designer", "Maybe round"),
        )
    )
    assert texts(output) == [
        "Project Manager asked what's Industrial Designer's idea for the shape"
    ]


def test_a_name_said_to_is_who_the_sentence_asks():
    output = observe(
        said(
            ("user", "Joey Tribbiani", "Look how much they spent on my card!"),
            ("user", "Rachel Green", "Monica, would you calm down?"),
        )
    )
    assert "Rachel Green asked Monica to calm down" in " ".join(texts(output))


def test_a_pseudonym_said_to_stays_in_the_note_when_nobody_is_named():
    output = observe(said(("user", "", "<PERSON_1>, would you calm down?")))
    assert texts(output) == ["User asked <PERSON_1> to calm down"]


def test_a_long_meeting_is_noted_as_minutes_without_its_questions():
    people = ("Project Manager", "Marketing", "Industrial Designer")
    chatter = [
        ("user", people[n % 3], f"Is option {n} the one with the blue case?") for n in range(160)
    ]
    decided = [
        ("user", "Project Manager", "We decided the remote will cost twenty five Euro."),
        ("user", "Marketing", "I prefer a rubber case in lemon yellow."),
        ("user", "Industrial Designer", "The production cost is 12.50 Euro per unit."),
        ("user", "Marketing", "We're gonna have like individual work and then a meeting."),
    ]
    output = observe(said(*decided, *chatter, ("user", "Marketing", "Okay.")))
    notes = texts(output)
    joined = " ".join(notes)
    assert "Project Manager said we decided the remote will cost twenty five Euro" in joined
    assert "Marketing prefers a rubber case in lemon yellow" in joined
    assert "production cost is 12.50 Euro per unit" in joined  # a fact with its amount
    assert "blue case" not in joined
    # "like" said in passing is no preference, and an aside the minutes leave out.
    assert "individual work" not in joined


def test_a_short_scene_keeps_its_questions():
    output = observe(
        said(
            ("user", "Joey Tribbiani", "How could someone get a hold of your credit card number?"),
            ("user", "Monica Geller", "I have no idea."),
        )
    )
    assert "credit card number" in " ".join(texts(output))


def test_a_name_at_the_end_of_a_long_sentence_is_an_apposition_not_who_is_spoken_to():
    output = observe(
        said(
            ("user", "Ana", "The film follows an unemployed father who struggles to raise his "
                            "son, Christopher."),
        )
    )  # fmt: skip
    assert "Christopher" in " ".join(texts(output))


def test_a_scene_heading_says_where_and_a_stage_direction_what_happens():
    """A transcript's bracketed lines are not said by anyone, whatever name the turn
    carries: a scene heading is a note of where the talk is, an action is an event as
    written (FriendsQA asks what happened: "What did Carol suddenly do?"), and a word or
    two of direction ("(Music starts)") is no note."""
    notes = noted(
        ("user", "Narrator", "[Scene: Central Perk, Joey and Chandler are on the couch.]"),
        ("user", "Joey", "I bought the tickets for the play on Friday."),
        ("user", "Narrator", "(The waitress brings their coffee.)"),
        ("user", "Chandler", "Can you pass me the sugar?"),
        ("user", "Narrator", "(Music starts)"),
        ("user", "Chandler", "I'm allergic to peanuts."),
        ("user", "Narrator", "[Scene: The Auditorium, Ross and Rachel are about to...]"),
        ("user", "Narrator", "(Carol suddenly screams in pain and grabs Chandler by the shirt.)"),
        ("user", "Ross", "I bought the flowers for Emily yesterday."),
    )
    joined = "\n".join(notes)
    assert "Scene: Central Perk, Joey and Chandler are on the couch" in joined
    assert "Scene: The Auditorium" in joined
    assert not any("about to" in note for note in notes)  # no clause left cut short
    assert "The waitress brings their coffee" in joined
    assert "Carol suddenly screams in pain and grabs Chandler by the shirt" in joined
    assert "Narrator" not in joined and "Music" not in joined
    assert "asked Narrator" not in joined  # the turn after a direction is said to nobody


def test_a_word_said_twice_in_speech_is_written_once():
    """Transcribed speech stutters ("the the", "I, I", "we just we'll"); the
    note says it once, and a name said twice ("Bora Bora") stays whole."""
    notes = noted_text(
        ("user", "Anna", "Um I think we just we'll go for the the rubber case."),
        ("user", "Ben", "I, I really prefer the the yellow one, that's, that's sure."),
        ("user", "Anna", "Or or we could launch it in Bora Bora in March."),
    )
    assert "we'll go for the rubber case" in notes
    assert "Ben prefers the yellow one" in notes
    assert "Bora Bora" in notes
    assert not re.search(r"\b(\w+),? \1\b", notes.replace("Bora Bora", ""), re.IGNORECASE)


def test_a_word_begun_again_after_its_first_letter_is_written_once():
    """A script writes a stammer as letters and hyphens ("I-I-I've"); the note is not
    "Ross-Ross-Ross has been on standby", and a t-test stays one."""
    notes = noted_text(
        ("user", "Ross", "I-I-I have been on standby for a flight home for hours."),
        ("user", "Rachel", "W-w-we need the t-test results by Friday."),
    )
    assert "Ross has been on standby for a flight home for hours" in notes
    assert "Rachel said we need the t-test results" in notes


def test_a_word_cut_off_and_said_whole_is_written_whole():
    """A transcript keeps what was begun and dropped ("th the white board", "if they pr
    they press"); the note writes the word once. A short word of its own, or a
    capitalised one (a name: "Wes Western"), stays."""
    notes = noted_text(
        ("user", "Anna", "So I need th the white board by Friday for the launch."),
        ("user", "Ben", "I prefer that they pr they press the red button twice."),
        ("user", "Chloe", "We pay payment fees on the car cart too, and Wes Western agrees."),
        ("user", "Dan", "I'm missing the red button, I prefer the grey case."),
    )
    assert "the white board" in notes and "th the" not in notes
    assert "they press the red button" in notes and " pr " not in notes
    assert "pay payment fees on the car cart" in notes and "Wes Western" in notes
    assert "Dan is missing the red button" in notes  # "'m" is no fragment of "missing"


def test_speech_outside_ascii_is_read_as_ascii_speech_is():
    """Accents and curly quotes take the Unicode patterns (ASCII text takes faster twins):
    a stutter goes, a line break or a closing quote still ends a sentence."""
    notes = noted_text(
        ("user", "Zoë", "Um I want the the café to open at nine."),
        ("user", "Zoë", "I prefer the “Crème” logo\nThe brûlée box is broken."),
    )
    assert "Zoë requested the café to open at nine" in notes
    assert "the the" not in notes
    assert "Zoë prefers the “Crème” logo" in notes
    assert "Zoë said the brûlée box is broken" in notes  # a sentence of its own


def test_you_guys_is_everyone_listening_and_alone_is_no_verb():
    """ "You guys" is said to everyone, not to whoever spoke last ("Marketing guys"); a
    word after "you" that is no verb does not agree with it ("Marketing alones")."""
    notes = noted_text(
        ("user", "Marketing", "What colour should the case be?"),
        ("user", "Project Manager", "You guys have to decide the colour by Friday."),
        ("user", "Marketing", "Okay."),
        ("user", "Project Manager", "You alone need to send the price list by Monday."),
    )
    assert "Project Manager said you guys have to decide the colour" in notes
    assert "Marketing guys" not in notes
    assert "Marketing alone needs to send the price list" in notes
    assert "alones" not in notes


def test_you_know_in_the_middle_of_a_clause_is_an_aside():
    """ "people are you know used to it": an aside, not the listener knowing
    ("Marketing know"); "let you know" is meant."""
    notes = noted_text(
        ("user", "Marketing", "What should the case be made of?"),
        ("user", "Industrial Designer", "I prefer rubber, it is you know soft and "
                                        "people are you know used to it."),
        ("user", "Marketing", "I want to let you know the price is twelve Euro."),
    )  # fmt: skip
    assert "it is soft and people are used to it" in notes
    assert "Marketing know" not in notes
    assert "let Industrial Designer know the price is twelve Euro" in notes


def test_a_word_after_i_that_is_no_present_verb_keeps_its_form():
    """ "when I first moved": "first" says when, and the verb after it keeps its tense;
    "once upon a time" is a phrase; "understood" is a past already."""
    notes = noted_text(
        ("user", "Anna", "I found it hard to read the menus when I first moved to Lyon."),
        ("user", "Anna", "I once upon a time studied in Lyon and I love the food."),
        ("user", "Anna", "I don't think I understood the concept, it is a problem."),
    )
    assert "when Anna first moved to Lyon" in notes
    assert "Anna once upon a time studied in Lyon" in notes
    assert "Anna understood the concept" in notes
    assert not any(w in notes for w in ("firsts", "onces", "upons", "understoods"))


def test_like_said_in_passing_is_kept_low_as_talk_not_as_a_preference():
    output = observe(
        said(
            ("user", "Monica Geller", "It's like starting on the fifteenth date!"),
            ("user", "Rachel Green", "I like the blue dress."),
        )
    )
    by_text = {o.text: o.priority for o in output.observations}
    [passing] = [t for t in by_text if "fifteenth date" in t]
    assert by_text[passing] == "low"
    [liked] = [t for t in by_text if "blue dress" in t]
    assert by_text[liked] == "medium" and "likes the blue dress" in liked


def test_speech_that_trails_off_leaves_no_word_hanging():
    """A transcript's "and...", "give me the..." or "we need to" is where someone stopped
    talking: the note keeps what they finished saying and never ends on the word they
    stopped on."""
    notes = noted(
        ("user", "Phoebe", "I wanted to tell you, but I kinda felt all floopy, and..."),
        ("user", "Rachel", "Hang up the phone Ross, give me the phone, give me the..."),
        ("user", "Gunther", "I was sort of..."),
        ("user", "Marketing", "The price is the main problem for our users, we need to"),
    )
    joined = "\n".join(notes)
    assert "Phoebe kinda felt all floopy" in joined  # not "kindas", and no "and"
    assert "give Rachel the phone" in joined
    assert joined.count("give Rachel the phone") == 1  # said three times, noted once
    assert not any(re.search(r"\b(and|the|of|to)$", note) for note in notes)
    assert "sort of" not in joined
    assert "the price is the main problem for our users" in joined  # "we need to" stopped


def test_an_exclamation_is_not_a_possession():
    [note] = texts(observe(said(("user", "Rachel", "Oh my God. I lost my keys at the café."))))
    assert "God" not in note
    assert note == "Rachel lost Rachel's keys at the café"


def test_a_speaker_named_for_their_role_keeps_the_role_words_they_say():
    """In a meeting whose speakers are named by role, "I'm the user interface designer"
    from User Interface says so once, not "User Interface Interface designer"; "in
    marketing I will" from Marketing is not "marketing Marketing will"; a spelt letter
    said twice ("T_ T_") is a stutter."""
    notes = noted_text(
        ("user", "User Interface", "I'm the user interface designer, so I'll be "
                                   "working on the buttons."),
        ("user", "Marketing", "In marketing I will look at what the trends are."),
        ("user", "Industrial Designer", "We need it for T_ T_ for the T_V_ remote, "
                                        "it should cost 12 Euro."),
    )  # fmt: skip
    assert "User Interface is the user interface designer" in notes
    assert "Interface Interface" not in notes
    assert "marketing Marketing" not in notes.replace("said in", "")
    assert "T_ for the T_V_ remote" in notes
    assert not re.search(r"\b(\w+) \1\b", notes, re.IGNORECASE)


def test_a_role_word_in_a_name_someone_says_stays_as_they_said_it():
    """ "the User Interface Developer" said by the Project Manager is a job title in the
    meeting, not the role "User" (whom the note would name "Project Manager")."""
    notes = noted_text(
        (
            "user",
            "Project Manager",
            "Right, so next the User Interface Developer will present the button layout "
            "after lunch.",
        ),
        ("user", "Marketing", "And I will show the survey, ninety users answered it."),
        ("user", "User Interface", "I think the user interface needs fewer buttons."),
    )
    assert "the User Interface Developer will present the button layout" in notes
    assert "Project Manager Interface" not in notes


def test_what_is_said_to_keep_talking_is_not_noted():
    """ "you know", "I mean" set off by commas, and a sentence begun again ("My name is
    I'm ...", "I and I think", "I th I think"), say nothing of anyone: no "Project
    Manager knows", no "name is I'm", no "Industrial Designer ands"."""
    notes = noted_text(
        ("user", "Project Manager", "You know, I think we should, you know, go "
                                    "for the yellow case by Friday."),
        ("user", "Marketing", "My name is I'm the marketing expert, I guess."),
        ("user", "Industrial Designer", "I and I prefer the rubber case, I th I will "
                                        "order it by Friday."),
        ("user", "User Interface", "It has to look nice you know like a phone. I guess "
                                   "I will order the buttons by Monday."),
    )  # fmt: skip
    assert "Project Manager thinks we should go for the yellow case by Feb 13" in notes
    assert "Industrial Designer prefers the rubber case, Industrial Designer will order" in notes
    assert "ands" not in notes and " th " not in notes
    assert "User Interface said it has to look nice like a phone" in notes
    assert "User Interface guesses User Interface will order the buttons" in notes
    assert "know" not in notes
    assert "name is" not in notes


def test_a_reported_sentence_opens_in_lowercase_unless_it_opens_with_a_name():
    """ "Slight problem ..." reported as "said Slight problem" reads as a name (and a
    redaction scan takes it for one): a word the window writes in lowercase elsewhere is
    lowercased after "said"; a name stays as written."""
    notes = noted_text(
        ("user", "Project Manager", "Slight problem we had was that we are four "
                                    "Euros over budget."),
        ("user", "Marketing", "We're not lacking in ideas, that was not the problem."),
        ("user", "Marketing", "London is where the problem is, a slight delay."),
    )  # fmt: skip
    assert "Project Manager said slight problem we had" in notes
    assert "Marketing said we're not lacking in ideas" in notes
    assert "Marketing said London is where the problem is" in notes


def test_a_call_opened_with_this_is_and_an_agents_own_name_are_no_notes():
    """ "Hi, this is Dana" from Dana said only who she is ("Dana Whitfield said this is
    Dana"); "Lee here from billing" had the answer note mention Lee."""
    notes = noted_text(
        ("user", "Dana Whitfield", "Hi, this is Dana. My internet is down."),
        (
            "assistant",
            "Lee",
            "Hi Dana, Lee here from billing: it shows on your invoice of March 1.",
        ),
    )
    assert "this is Dana" not in notes
    assert "mentioned Lee" not in notes and "mentioned March 1" in notes


def test_this_is_a_name_from_someone_unnamed_is_their_name():
    assert noted(("user", "", "Hi, this is Dana from Acme."), ("assistant", "", "Hello Dana!")) == [
        "User's name is Dana"
    ]
