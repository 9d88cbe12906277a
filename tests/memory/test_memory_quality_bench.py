"""bench/memory_quality.py (its package bench/quality/) on hand-made inputs (no data
files): its scoring functions, baselines and loaders, and its ingest, which plays the
sweeper in message time. The figures it reports are only as good as these."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from bench.memory_quality import parse_args
from bench.quality.baselines import (
    Bm25Turns,
    first_k_text,
    first_words,
    salient_m_text,
    salient_words,
    take_within_budget,
)
from bench.quality.datasets import (
    SCRIPT_START,
    History,
    Question,
    Session,
    Turn,
    load_abcd,
    load_friendsqa,
    load_longmemeval,
    load_qmsum,
    parse_dataset_date,
)
from bench.quality.pipeline import Pipeline, split_context
from bench.quality.scoring import (
    LabelCost,
    content_word_list,
    content_words,
    coverage,
    garbled_reason,
    interpolate_curve,
    label_cost,
    main_people,
    normalise_dates,
    people_labels,
    person_of,
    read_back,
    relative_coverage,
)
from governance.redaction.labels import malformed_pseudonyms


@pytest.mark.parametrize(
    "text", ["May 3", "3 May", "2023/05/03", "2023-05-03", "May 3rd, 2023", "the 3rd of May"]
)
def test_it_gives_every_spelling_of_a_date_the_same_word(text: str) -> None:
    assert "date-05-03" in content_words(text)


def test_it_keeps_a_given_year_beside_the_day() -> None:
    assert content_words("May 3rd, 2023") == {"date-05-03", "2023"}
    assert normalise_dates("on 2023/13/45 at noon") == "on 2023/13/45 at noon"


def test_numbers_as_words_and_digits_are_equal() -> None:
    assert content_words("three postcards") == content_words("3 postcard")
    assert content_words("$5,850") == {"5850"}


def test_stopwords_case_and_possessives_do_not_count() -> None:
    assert content_words("The user's Spotify playlist") == {"spotify", "playlist"}


def test_a_label_or_a_mask_is_no_word_of_an_answer() -> None:
    served = content_words("User met <PERSON_3> and <LOCATION_12>; <EMAIL_ADDRESS> wrote")

    assert served == {"met", "wrote"}
    assert coverage("3 people", served) == 0.0


def test_coverage_is_the_share_of_answer_words_found() -> None:
    memory = content_words("2023-08-11 User added 25 postcards to the collection")
    assert coverage("25", memory) == 1.0
    assert coverage("Summer Vibes", content_words("playlist Summer Hits")) == 0.5
    assert coverage("the", memory) is None  # nothing to look for


def test_relative_coverage_is_a_ratio_of_sums_without_questions_raw_misses() -> None:
    result = relative_coverage([(0.5, 1.0), (1.0, 1.0), (0.0, 0.5), (0.3, 0.0)])
    assert result.ratio == pytest.approx(1.5 / 2.5)
    assert result.memory == pytest.approx(0.5)
    assert result.raw == pytest.approx(2.5 / 3)
    assert (result.counted, result.raw_zero) == (3, 1)
    assert relative_coverage([(0.0, 0.0)]).ratio == 0.0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("User said the laptop won't boot since …", "cut"),
        ("User is planning a trip to Rome and...", "cut"),
        ("User asked about flights and", "cut"),
        ("User mentioned the new bike because;", "cut"),
        ("User wants to visit the park with the", "cut"),
        ("User's User's sister lives in Denver.", "repeat"),
        ("User bought the the blue jacket.", "repeat"),
        ("User listed milk; ; eggs.", "empty item"),
        ("Tools: hammer, , saw.", "empty item"),
        ("Laptop won't boot since ; fan is loud.", "empty item"),
    ],
)
def test_it_flags_garbled_lines(line: str, reason: str) -> None:
    assert garbled_reason(line) == reason


@pytest.mark.parametrize(
    "line",
    [
        "User said that that plan is fine.",
        "User had had a cold for 3 days.",
        "Assistant recommended the 7th job: transcriptionist.",
        "User created a Spotify playlist called Summer Vibes",
        "User's sister lives in Denver (moved in 2022)",
        "User ran 5 km on 10 10 intervals",
        "User lost a glove and hasn't found it since",
        "User asked Assistant to walk User through that",
    ],
)
def test_it_passes_sound_lines(line: str) -> None:
    assert garbled_reason(line) is None


def test_baseline_curve_is_interpolated_in_log_compression() -> None:
    points = [(5.0, 0.8), (20.0, 0.4), (10.0, 0.6)]
    assert interpolate_curve(points, 10.0) == pytest.approx(0.6)
    assert interpolate_curve(points, (10.0 * 20.0) ** 0.5) == pytest.approx(0.5)
    assert interpolate_curve(points, 2.0) == 0.8  # nearest measured size outside the range
    assert interpolate_curve(points, 50.0) == 0.4


def test_baselines_take_the_first_words_and_the_salient_words_of_a_turn() -> None:
    turn = "I created a playlist on Spotify called Summer Vibes with 42 wonderful songs."
    assert first_words(turn, 3) == "I created a"
    assert salient_words(turn, 10) == "I created playlist Spotify Summer Vibes 42 wonderful"
    assert salient_words(turn, 2) == "I created"


def test_it_splits_memory_from_the_recent_tail() -> None:
    text = "## Reflections\nr1\n\n## Observations\no1\no2\n\n## Recent Messages\n[user] hi"
    memory, recent = split_context(text)
    assert "r1" in memory and "o2" in memory and "hi" not in memory
    assert recent == "Recent Messages\n[user] hi"


def test_it_reads_the_dataset_dates_as_utc() -> None:
    assert parse_dataset_date("2023/08/11 (Fri) 15:58") == datetime(2023, 8, 11, 15, 58, tzinfo=UTC)


# --- ingest: the product's pipeline, the sweeper played in message time -----------------------

DAY = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)


def _question(starts: list[datetime], asked: datetime) -> History:
    sessions = [
        Session(
            start,
            [
                Turn("user", f"I adopted a cat named Miso{n} and bought 3 toys."),
                Turn("assistant", f"Congratulations on Miso{n}! Cats love toys."),
            ],
        )
        for n, start in enumerate(starts)
    ]
    return History("q1", sessions, [Question("q1", "single-session-user", "cat?", "Miso0")], asked)


def _runs(conversation: Any) -> list[tuple[str, int | None, int | None]]:
    return list(
        conversation.observer_runs.order_by("created_at").values_list(
            "trigger", "window_start_seq", "window_end_seq"
        )
    )


def test_the_default_variant_observes_each_session_once_the_conversation_went_quiet(db):
    pipeline = Pipeline()
    question = _question([DAY, DAY + timedelta(days=1)], asked=DAY + timedelta(days=2))

    conversation, _ = pipeline.ingest(pipeline.workspace("default"), question, sweep=True)

    # Before the second session (a day later) and at the question's date: two idle
    # observations by the sweeper, each of one session, dated when it was said.
    assert _runs(conversation) == [("sweeper", 1, 2), ("sweeper", 3, 4)]
    assert conversation.observations.count() >= 2
    for observation in conversation.observations.all():
        session = DAY + timedelta(days=0 if observation.window_end_seq <= 2 else 1)
        assert session <= observation.observed_at <= session + timedelta(minutes=1)
    served = pipeline.served(conversation, 0.0, 0.0)
    assert "Miso0" in served.memory_text and served.recent_text == ""


def test_sessions_closer_than_the_idle_time_are_observed_together(db):
    pipeline = Pipeline()
    question = _question([DAY, DAY + timedelta(hours=2)], asked=DAY + timedelta(days=1))

    conversation, _ = pipeline.ingest(pipeline.workspace("default"), question, sweep=True)

    assert _runs(conversation) == [("sweeper", 1, 4)]


def test_without_the_sweeper_a_short_history_stays_recent(db):
    pipeline = Pipeline()
    question = _question([DAY, DAY + timedelta(days=1)], asked=DAY + timedelta(days=2))

    conversation, _ = pipeline.ingest(pipeline.workspace("threshold"), question, sweep=False)

    assert _runs(conversation) == []
    served = pipeline.served(conversation, 0.0, 0.0)
    assert "Miso" not in served.memory_text
    assert "Miso0" in served.recent_text


def test_a_fidelity_workspace_hands_its_level_to_the_engine(db, monkeypatch, settings):
    from memory.engines.extractive import ExtractiveEngine

    levels: list[str] = []
    observe = ExtractiveEngine.observe

    def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
        levels.append(kwargs["fidelity"])
        return observe(self, *args, **kwargs)

    monkeypatch.setattr(ExtractiveEngine, "observe", recording)
    pipeline = Pipeline()
    question = _question([DAY], asked=DAY + timedelta(days=1))

    compact = pipeline.workspace("compact", fidelity="compact")
    pipeline.ingest(compact, question, sweep=True)
    pipeline.ingest(pipeline.workspace("default"), question, sweep=True)

    assert compact.fidelity == "compact"
    assert levels == ["compact", settings.MEMDESK_OBSERVER_FIDELITY]
    with pytest.raises(ValueError, match="fidelity must be one of"):
        pipeline.workspace("bad", fidelity="verbose")


# --- baselines -------------------------------------------------------------------------------


def _words(text: str) -> int:
    return len(text.split())


def _cut_words(text: str, n: int) -> str:
    return " ".join(text.split()[:n])


def test_the_budget_takes_whole_turns_then_cuts_the_one_that_crosses_it() -> None:
    ranked = ["one two three", "four five", "six seven eight nine"]
    # 3 words, then 1 for the line break and 2 words: 6; the third gets 8 - 6 - 1 = 1 word.
    assert take_within_budget(ranked, 8, count=_words, cut=_cut_words) == (
        "one two three\nfour five\nsix"
    )
    assert take_within_budget(ranked, 6, count=_words, cut=_cut_words) == "one two three\nfour five"
    assert take_within_budget(ranked, 2, count=_words, cut=_cut_words) == "one two"
    assert take_within_budget(ranked, 0, count=_words, cut=_cut_words) == ""


def test_bm25_ranks_the_turns_that_answer_the_question_first_and_keeps_order_on_ties() -> None:
    turns = [
        "Monica: I bought a new couch yesterday.",
        "Ross: Dinosaurs are my whole life.",
        "Rachel: The coffee house is closed today.",
        "Joey: I got a part in a play.",
        "Chandler: Could this meeting be any longer?",
    ]
    index = Bm25Turns(turns)

    assert index.ranked("Who talks about dinosaurs?")[0] == 1
    assert index.ranked("Where did Joey get a part in a play?")[0] == 3
    assert index.ranked("nothing matches this")[:3] == [0, 1, 2]
    text = index.within_budget("Which couch did Monica buy?", 6, count=_words, cut=_cut_words)
    assert text == "Monica: I bought a new couch"


def test_a_conversation_of_stopwords_only_ranks_in_its_own_order() -> None:
    assert Bm25Turns(["and the", "of a"]).ranked("the") == [0, 1]


def test_the_word_baselines_keep_the_speaker_in_front() -> None:
    turns = [Turn("user", "I bought a Philips lamp for the bedroom yesterday", name="Maria")]
    assert first_k_text(turns, 2) == "Maria: I bought"
    assert salient_m_text(turns, 2) == "Maria: I Philips"
    assert first_k_text([Turn("user", "I bought a lamp")], 2) == "I bought"


def test_bm25_counts_repeated_words() -> None:
    assert content_word_list("Couch, couch and the couches") == ["couch", "couch", "couche"]


# --- pseudonyms ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Philips Hue White Starter <PERSON180>", ["<PERSON180>"]),
        ("User told PERSON131 about it", ["PERSON131"]),
        ("User met <PERSON_12 at the door", ["<PERSON_12"]),
        ("Ask person_3> and PERSON_4 later", ["person_3>", "PERSON_4"]),
        ("<LOCATION59>, <EMAIL_ADDRESS_2", ["<LOCATION59>", "<EMAIL_ADDRESS_2"]),
    ],
)
def test_it_finds_malformed_pseudonyms(text: str, found: list[str]) -> None:
    assert malformed_pseudonyms(text) == found


@pytest.mark.parametrize(
    "text",
    [
        "<PERSON_12> met <LOCATION_3> and <PERSONAL_ID_4>.",
        "<PERSON_12>'s order",
        "A person 3 doors down listened to mp3 files; the <PERSON> operator replaces.",
        "PERSONAL is a word, so is PERSONNEL5",
    ],
)
def test_well_formed_pseudonyms_and_ordinary_words_are_not_malformed(text: str) -> None:
    assert malformed_pseudonyms(text) == []


def test_read_back_puts_the_mapping_values_in_place_of_the_labels() -> None:
    values = {"<PERSON_3>": "Monica Geller", "<LOCATION_1>": "Central Perk"}
    text = "<PERSON_3> met <PERSON_9> at <LOCATION_1>; <PERSON_3> paid."
    assert (
        read_back(text, values)
        == "Monica Geller met <PERSON_9> at Central Perk; Monica Geller paid."
    )
    assert read_back("no labels here", values) == "no labels here"
    answer_words = content_words("Monica Geller")
    assert coverage("Monica Geller", content_words(text)) == 0.0
    assert answer_words <= content_words(read_back(text, values))


def test_label_cost_counts_every_occurrence_and_what_its_value_would_take() -> None:
    values = {"<PERSON_3>": "Monica Geller", "<LOCATION_1>": "Central Perk Cafe"}
    text = "<PERSON_3> met <PERSON_9> at <LOCATION_1>; <PERSON_3> paid. Not PERSON_4."

    def characters(piece: str) -> int:  # a stand-in tokenizer: one token per character
        return len(piece)

    cost = label_cost(text, values, characters)

    # 3 well-formed labels' 4 occurrences; the unknown one counts as itself
    assert cost.labels == 4
    assert cost.label_tokens == 2 * len(" <PERSON_3>") + len(" <PERSON_9>") + len(" <LOCATION_1>")
    assert cost.value_tokens == (
        2 * len(" Monica Geller") + len(" <PERSON_9>") + len(" Central Perk Cafe")
    )
    assert label_cost("no labels here", values, characters) == LabelCost(0, 0, 0)


def test_a_value_goes_to_the_known_person_whose_name_holds_it() -> None:
    people = {"Monica Geller": 40, "Ross Geller": 55, "Fake Monica": 5, "Joey Tribbiani": 30}
    assert person_of("Monica", people) == ("Monica Geller", True)  # she speaks more
    assert person_of("Fake Monica", people) == ("Fake Monica", True)  # shares two words
    assert person_of("Geller", people) == ("Ross Geller", True)  # the one who speaks most
    assert person_of("Mr. Geller", people) == ("Ross Geller", True)
    assert person_of("monica's", people) == ("Monica Geller", True)
    assert person_of("JOEY TRIBBIANI", people) == ("Joey Tribbiani", True)
    assert person_of("Tell Joey Tribbiani", people) == ("Joey Tribbiani", False)  # overlong
    assert person_of("Philips Hue", people) is None
    assert person_of("Dr.", people) is None
    assert person_of("No. 1", {"Casting Director No. 1": 1}) is None


def test_it_counts_pseudonyms_per_known_person_and_false_people() -> None:
    people = {"Maria Gonzalez": 10, "Tom Berg": 4}
    values = {
        "<PERSON_1>": "Maria Gonzalez",
        "<PERSON_2>": "Maria",
        "<PERSON_3>": "I'm Maria Gonzalez",  # the span swallowed "I'm": one more for her
        "<PERSON_4>": "Tom",
        "<PERSON_5>": "Kafka",
        "<PERSON_6>": "Sep",
        "<LOCATION_1>": "La Mer",
        "<LOCATION_2>": "Berg",
        "<EMAIL_ADDRESS_1>": "maria@example.com",
        "<PERSON12>": "not a label",
    }
    found = people_labels(values, people)

    assert found.by_person == {
        "Maria Gonzalez": ["<PERSON_1>", "<PERSON_2>", "<PERSON_3>"],
        "Tom Berg": ["<PERSON_4>"],
    }
    assert (found.people_labelled, found.labels_on_people, found.overlong) == (2, 4, 1)
    assert found.per_person == pytest.approx(2.0)
    assert (found.false_person, found.false_location, found.person_as_location) == (2, 1, 1)
    assert (found.person_labels, found.location_labels) == (6, 2)
    assert people_labels({}, people).per_person == 0.0
    assert found.per_person_among(["Maria Gonzalez", "Nobody"]) == (1, 3.0)


def test_main_people_speak_at_least_a_share_of_the_turns() -> None:
    people = {"Monica Geller": 97, "Ross Geller": 68, "Man": 1, "Girl 1": 2}
    assert main_people(people, share=0.02) == ["Monica Geller", "Ross Geller"]
    assert main_people(people, share=0.0) == ["Girl 1", "Man", "Monica Geller", "Ross Geller"]
    assert main_people({}) == []


# --- loaders ---------------------------------------------------------------------------------


def _write(tmp_path: Path, name: str, data: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _scripted(ids: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "id": episode,
            "speakers": ["Maria Lopez", "Tom Berg", "Narrator"],
            "sessions": [
                {
                    "date": None,
                    "turns": [
                        {"speaker": "Maria Lopez", "text": "My parcel to Berlin is late."},
                        {"speaker": "Narrator", "text": "(Tom picks up the phone)"},
                        {"speaker": "Tom Berg & Maria Lopez", "text": "Hello!"},
                        {"speaker": "Tom Berg", "text": "   "},
                    ],
                },
                {
                    "date": None,
                    "turns": [{"speaker": "Tom Berg", "text": "A courier calls Friday."}],
                },
            ],
            "qa": [
                {"question": "When does the courier call?", "answer": "Friday", "category": "When"}
            ],
        }
        for episode in ids
    ]


def test_friendsqa_becomes_named_user_turns_in_scenes_a_day_apart(tmp_path: Path) -> None:
    path = _write(tmp_path, "friendsqa.json", _scripted(["e1", "e2", "e3"]))

    histories = load_friendsqa(path, limit=2)

    assert [h.history_id for h in histories] == ["e1", "e2"]
    history = histories[0]
    assert [s.began for s in history.sessions] == [SCRIPT_START, SCRIPT_START + timedelta(days=1)]
    assert history.sessions[0].turns == [
        Turn("user", "My parcel to Berlin is late.", name="Maria Lopez"),
        Turn("user", "(Tom picks up the phone)", name="Narrator"),
        Turn("user", "Hello!", name="Tom Berg & Maria Lopez"),
    ]
    assert history.texts[0] == "Maria Lopez: My parcel to Berlin is late."
    assert history.turn_step == timedelta(minutes=1)
    assert history.people == {"Maria Lopez": 2, "Tom Berg": 2}  # no Narrator
    assert history.questions == [Question("e1-0", "When", "When does the courier call?", "Friday")]
    assert history.asked_at > history.sessions[-1].began


def test_qmsum_series_name_their_roles_but_no_people(tmp_path: Path) -> None:
    path = _write(tmp_path, "qmsum.json", _scripted(["ES2002", "ES2003"]))

    histories = load_qmsum(path)

    assert len(histories) == 2
    assert histories[0].people == {}
    assert histories[0].turn_step == timedelta(seconds=10)
    assert histories[0].sessions[1].began - histories[0].sessions[0].began == timedelta(days=1)
    assert histories[0].turns[0].name == "Maria Lopez"


def test_abcd_dialogues_become_support_conversations_with_their_customer(tmp_path: Path) -> None:
    dialogue = {
        "convo_id": 7,
        "scenario": {"personal": {"customer_name": "maria  lopez"}},
        "original": [
            ["agent", "How can I help?"],
            ["customer", "My refund is late."],
            ["action", "Searching the FAQ pages ..."],
            ["customer", " "],
        ],
    }
    (history,) = load_abcd(_write(tmp_path, "abcd.json", [dialogue]))

    assert history.history_id == "abcd-7"
    assert history.turns == [
        Turn("assistant", "How can I help?"),
        Turn("user", "My refund is late."),
        Turn("tool", "Searching the FAQ pages ...", tool_name="crm"),
    ]
    assert history.people == {"Maria Lopez": 1}
    assert history.questions == []


def test_longmemeval_sorts_sessions_by_date_and_leaves_out_abstentions(tmp_path: Path) -> None:
    def question(qid: str) -> dict[str, Any]:
        return {
            "question_id": qid,
            "question_type": "temporal-reasoning",
            "question": "When did I adopt Miso?",
            "answer": 3,
            "question_date": "2023/06/01 (Thu) 10:00",
            "haystack_dates": ["2023/05/02 (Tue) 09:00", "2023/05/01 (Mon) 09:00"],
            "haystack_sessions": [
                [{"role": "user", "content": "later"}, {"role": "assistant", "content": ""}],
                [{"role": "user", "content": "earlier"}],
            ],
        }

    path = _write(tmp_path, "lme.json", [question("a"), question("b_abs"), question("c")])

    histories, abstentions = load_longmemeval(path)

    assert abstentions == 1
    assert [h.history_id for h in histories] == ["a", "c"]
    assert [t.content for t in histories[0].turns] == ["earlier", "later"]
    assert histories[0].questions[0].answer == "3"
    assert histories[0].asked_at == datetime(2023, 6, 1, 10, 0, tzinfo=UTC)
    assert len(load_longmemeval(path, sample=1, seed=3)[0]) == 1
    assert [h.history_id for h in load_longmemeval(path, limit=1)[0]] == ["a"]


def test_it_refuses_an_unknown_dataset_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["--datasets", "friendsqa,qmsum"]).datasets == ["friendsqa", "qmsum"]
    with pytest.raises(SystemExit):
        parse_args(["--datasets", "friends"])
    assert "--datasets takes names from lme_s" in capsys.readouterr().err


def test_variants_are_chosen_by_name_and_a_wrong_name_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_args([]).variants == []  # both
    assert parse_args(["--variants", "reflection-only"]).variants == ["reflection-only"]
    with pytest.raises(SystemExit):
        parse_args(["--variants", "private"])
    assert "--variants takes names from default, reflection-only" in capsys.readouterr().err


def test_named_turns_reach_the_messages_as_their_name(db):
    pipeline = Pipeline()
    history = History(
        "e1",
        [
            Session(
                DAY,
                [
                    Turn("user", "I ordered a lamp.", name="Maria Lopez"),
                    Turn("user", "It ships Friday.", name="Tom Berg"),
                ],
            )
        ],
        [],
        DAY + timedelta(days=1),
    )
    workspace = pipeline.workspace("named", redact_before_observation=False)

    conversation, _ = pipeline.ingest(workspace, history, sweep=True)

    assert list(conversation.messages.values_list("role", "name", "created_at")) == [
        ("user", "Maria Lopez", DAY),
        ("user", "Tom Berg", DAY + timedelta(minutes=1)),
    ]
    served = pipeline.served(conversation, 0.0, 0.0)
    assert served.notes and served.recent_text == ""
