"""bench/memory_quality.py on hand-made inputs (no data files): its scoring functions,
and its ingest, which plays the sweeper in message time. The figures it reports are only
as good as these."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bench.memory_quality import (
    Pipeline,
    Question,
    content_words,
    coverage,
    first_words,
    garbled_reason,
    interpolate_curve,
    normalise_dates,
    parse_dataset_date,
    relative_coverage,
    salient_words,
    split_context,
)


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


def _question(starts: list[datetime], asked: datetime) -> Question:
    sessions = [
        (
            start,
            [
                {"role": "user", "content": f"I adopted a cat named Miso{n} and bought 3 toys."},
                {"role": "assistant", "content": f"Congratulations on Miso{n}! Cats love toys."},
            ],
        )
        for n, start in enumerate(starts)
    ]
    return Question("q1", "single-session-user", "Miso0", asked, sessions)


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
