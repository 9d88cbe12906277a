"""The ``openai`` engine against a real HTTP server: the SDK is not mocked."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory.engines import openai_engine_from_settings
from memory.engines.base import FIDELITIES, EngineError, SourceMessage, SourceObservation
from memory.engines.openai_engine import OpenAIEngine, ProviderUnavailable
from memory.engines.prompts import (
    FIDELITY_INSTRUCTIONS,
    OBSERVER_SYSTEM_PROMPT,
    PROMPT_VERSION,
    observer_user_prompt,
)
from tests.memory.fake_openai import (
    FakeOpenAI,
    client_error,
    completion,
    malformed,
    rate_limited,
    server_error,
    slow,
)

NOW = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)
SENT = datetime(2026, 2, 10, 9, 0, tzinfo=UTC)

GOOD_OBSERVER_OUTPUT = """\
- [high] (2026-02-17) User needs the refund for order 4521 before next Tuesday {refs: 1,3}
- [medium] (unknown) User prefers e-mail over phone calls {refs: 2}
- [completed] (2026-02-10) Assistant sent the return label {refs: 4, 99}
- [low] (2026-02-10) The user writes in English {refs: 42}
Current task: processing the refund for order 4521
Suggested response: Confirm to the user that the refund will arrive by 2026-02-17.
"""


def make_engine(fake: FakeOpenAI, **overrides: Any) -> OpenAIEngine:
    options: dict[str, Any] = {
        "base_url": fake.base_url,
        "api_key": "test-key",
        "observer_model": "observer-model",
        "reflector_model": "reflector-model",
        "timeout": 2.0,
        "max_retries": 2,
        "breaker_failures": 5,
        "breaker_cooldown": 60.0,
        "backoff_base": 0.01,
    }
    options.update(overrides)
    return OpenAIEngine(**options)


def message(seq: int, content: str, *, role: str = "user") -> SourceMessage:
    return SourceMessage(
        id=f"msg-{seq}",
        seq=seq,
        role=role,
        content=content,
        created_at=SENT + timedelta(minutes=seq),
    )


def support_window() -> list[SourceMessage]:
    return [
        message(0, "Relevant memory for this conversation\n- user likes cats", role="system"),
        message(1, "My refund for order 4521 has not arrived, I need it before next Tuesday."),
        message(2, "Please e-mail me, I do not take phone calls."),
        message(3, "I was promised the refund last week.", role="user"),
        message(4, "I have sent you the return label.", role="assistant"),
    ]


def observation(index: int, text: str) -> SourceObservation:
    return SourceObservation(
        id=f"obs-{index}",
        text=text,
        priority="medium",
        observed_at=SENT,
        referenced_at=None,
        token_count=0,
    )


def refund_observations() -> list[SourceObservation]:
    return [
        observation(1, "User asked on 2026-02-10 about the refund for order 4521 which is late."),
        observation(2, "User said the refund for order 4521 was promised last week by an agent."),
        observation(
            3, "User needs the refund for order 4521 before Tuesday 2026-02-17 at the latest."
        ),
        observation(4, "User prefers to be contacted by e-mail and does not take phone calls."),
    ]


def long_tool_window() -> list[SourceMessage]:
    rows = " ".join(f"sku-{n} qty={n * 7} bin=A{n % 9} status=ok;" for n in range(60))
    return [message(1, f"inventory dump: {rows}", role="tool")]


def verbose_output(lines: int) -> str:
    return "\n".join(
        f"- [low] (2026-02-10) Item {n} weighs {n * 3} kg and ships from warehouse "
        f"{chr(65 + n % 26)} on pallet {n * 11} {{refs: 1}}"
        for n in range(lines)
    )


# --- Parsing ------------------------------------------------------------------------------


def test_it_parses_priorities_dates_sources_task_and_suggested_response(fake_openai):
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))
    engine = make_engine(fake_openai)

    output = engine.observe(support_window(), previous_observations=[], now=NOW)

    assert [o.priority for o in output.observations] == ["high", "medium", "completed", "low"]
    assert [o.text for o in output.observations][:2] == [
        "User needs the refund for order 4521 before next Tuesday",
        "User prefers e-mail over phone calls",
    ]
    assert output.observations[0].referenced_at == datetime(2026, 2, 17, tzinfo=UTC)
    assert output.observations[1].referenced_at is None
    assert output.observations[0].source_message_ids == ["msg-1", "msg-3"]
    assert output.observations[2].source_message_ids == ["msg-4"]  # 99 is not in the input
    assert output.current_task == "processing the refund for order 4521"
    assert output.suggested_response == (
        "Confirm to the user that the refund will arrive by 2026-02-17."
    )


def test_a_line_citing_no_message_of_the_window_is_attributed_to_the_whole_window(fake_openai):
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))

    output = make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    # {refs: 42}: the injected memory block (seq 0) is never a source.
    assert output.observations[3].source_message_ids == ["msg-1", "msg-2", "msg-3", "msg-4"]


def test_it_sends_the_window_without_the_injected_memory_block(fake_openai):
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))
    engine = make_engine(fake_openai)

    engine.observe(support_window(), previous_observations=["User likes cats"], now=NOW)

    (request,) = fake_openai.requests
    assert request.path.endswith("/v1/chat/completions")
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.body["model"] == "observer-model"
    system, user = request.body["messages"]
    assert system == {"role": "system", "content": OBSERVER_SYSTEM_PROMPT}
    assert "#1 [user] (2026-02-10T09:01+00:00) My refund for order 4521" in user["content"]
    assert "#4 [assistant]" in user["content"]
    assert "Relevant memory for this conversation" not in user["content"]
    assert "Already recorded:\n- User likes cats" in user["content"]
    assert engine.prompt_version == PROMPT_VERSION


def test_it_tells_the_model_who_said_each_message_and_to_write_it(fake_openai):
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))
    window = [
        replace(message(1, "My parcel is late."), speaker="Maria Lopez"),
        replace(message(2, "A courier will call.", role="assistant"), speaker="Tom  Berg"),
        replace(message(3, "Refund approved.", role="assistant"), speaker="Priya Shah"),
        message(4, "Thanks.", role="user"),
    ]

    make_engine(fake_openai).observe(window, previous_observations=[], now=NOW)

    system, user = fake_openai.requests[0].body["messages"]
    assert "#1 [Maria Lopez (user)] (2026-02-10T09:01+00:00) My parcel is late." in user["content"]
    assert "#2 [Tom Berg (assistant)] (" in user["content"]
    assert "#3 [Priya Shah (assistant)] (" in user["content"]
    assert "#4 [user] (" in user["content"]
    assert "#SEQ [NAME (ROLE)] (TIMESTAMP) CONTENT" in system["content"]
    assert "never attribute one person's words to another" in system["content"]


@pytest.mark.parametrize(
    ("fidelity", "line"),
    [
        ("compact", "Detail: compact \u2014 one short line per topic"),
        ("balanced", "Detail: balanced \u2014 one line per fact"),
        ("detailed", "Detail: detailed \u2014 keep more of what was said"),
    ],
)
def test_the_prompt_says_how_much_detail_the_workspace_keeps(fake_openai, fidelity, line):
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))

    make_engine(fake_openai).observe(
        support_window(), previous_observations=[], now=NOW, fidelity=fidelity
    )

    system, user = fake_openai.requests[0].body["messages"]
    # The system prompt stays the same at every level (a provider caches it).
    assert system == {"role": "system", "content": OBSERVER_SYSTEM_PROMPT}
    assert user["content"].startswith(f"Now: 2026-02-10T12:00+00:00\n\n{line}")


def test_every_level_has_its_instruction_and_an_unknown_one_is_refused():
    assert set(FIDELITY_INSTRUCTIONS) == set(FIDELITIES)
    with pytest.raises(ValueError, match="compact, balanced, detailed"):
        observer_user_prompt(
            rendered_messages="#1 [user] hi", previous_observations=[], now=NOW, fidelity="all"
        )


def test_it_tolerates_common_format_drift_and_skips_lines_it_cannot_read(fake_openai):
    fake_openai.enqueue(
        completion(
            "Here are the observations:\n"
            "1. [HIGH] (urgent) refund for order 4521 is late (refs: 1, 3-4)\n"
            "* [Done] (2026-02-30) Return label sent [refs: 4]\n"
            "- [critical] (2026-02-10) not a priority we know {refs: 1}\n"
            "**Current task:** refund for order 4521\n"
            "**Suggested response**: none\n"
        )
    )

    output = make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    first, second = output.observations
    assert (first.priority, first.text) == ("high", "(urgent) refund for order 4521 is late")
    assert first.source_message_ids == ["msg-1", "msg-3", "msg-4"]
    assert (second.priority, second.referenced_at) == ("completed", None)  # no 30 February
    assert output.current_task == "refund for order 4521"
    assert output.suggested_response is None


def test_it_parses_a_reflection_with_observation_sources(fake_openai):
    fake_openai.enqueue(
        completion(
            "- [high] (2026-02-17) Refund for order 4521 is late, due 2026-02-17 {refs: 1-3}"
        )
    )
    engine = make_engine(fake_openai)

    (reflection,) = engine.reflect(refund_observations(), now=NOW)

    assert reflection.priority == "high"
    assert reflection.referenced_at == datetime(2026, 2, 17, tzinfo=UTC)
    assert reflection.source_observation_ids == ["obs-1", "obs-2", "obs-3"]
    assert fake_openai.requests[0].body["model"] == "reflector-model"
    assert (
        "[4] [medium] (2026-02-10) User prefers"
        in fake_openai.requests[0].body["messages"][1]["content"]
    )


def test_empty_input_makes_no_request(fake_openai):
    engine = make_engine(fake_openai)

    assert engine.reflect([], now=NOW) == []
    assert engine.observe([], previous_observations=[], now=NOW).observations == []
    assert fake_openai.request_count == 0


# --- Rejected output ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    ["Sure! Here is a summary of the conversation: the user wants a refund.", "", "```\n```"],
)
def test_malformed_output_is_rejected_and_not_retried(fake_openai, content):
    fake_openai.enqueue(completion(content))

    with pytest.raises(EngineError, match="malformed") as error:
        make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False
    assert fake_openai.request_count == 1


@pytest.mark.parametrize(
    "behaviour",
    [malformed(), malformed(b"<html>Gateway</html>", "text/html"), malformed(b'{"data": []}')],
    ids=["broken-json", "html", "wrong-shape"],
)
def test_a_body_that_is_not_a_chat_completion_is_rejected(fake_openai, behaviour):
    fake_openai.enqueue(behaviour)

    with pytest.raises(EngineError, match="not a chat completion") as error:
        make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False


def test_the_same_line_repeated_is_rejected_as_degenerate(fake_openai):
    looping = "\n".join(
        f"- [medium] (2026-02-10) User wants the refund {{refs: {n}}}" for n in range(1, 7)
    )
    fake_openai.enqueue(completion(looping))

    with pytest.raises(EngineError, match="degenerate.*same line 6 times") as error:
        make_engine(fake_openai).observe(long_tool_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False


def test_a_repeated_phrase_inside_a_line_is_rejected_as_degenerate(fake_openai):
    stuck = "- [high] (2026-02-10) The user " + "wants the refund now and " * 12 + "{refs: 1}"
    fake_openai.enqueue(completion(stuck))

    with pytest.raises(EngineError, match="degenerate.*block of 5 words") as error:
        make_engine(fake_openai).observe(long_tool_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False


def test_output_that_does_not_compress_is_rejected(fake_openai):
    fake_openai.enqueue(completion(verbose_output(60)))

    with pytest.raises(EngineError, match="did not compress") as error:
        make_engine(fake_openai).observe(long_tool_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False


def test_a_short_window_may_yield_an_observation_as_long_as_itself(fake_openai):
    fake_openai.enqueue(completion("- [low] (2026-02-10) The user greeted the assistant {refs: 1}"))

    output = make_engine(fake_openai).observe(
        [message(1, "hi there")], previous_observations=[], now=NOW
    )

    assert [o.text for o in output.observations] == ["The user greeted the assistant"]


def test_a_reflection_that_does_not_compress_is_rejected(fake_openai):
    fake_openai.enqueue(completion(verbose_output(8)))

    with pytest.raises(EngineError, match="did not compress"):
        make_engine(fake_openai).reflect(refund_observations(), now=NOW)


@pytest.mark.parametrize("content", ["", "   \n", "No reflections."])
def test_an_empty_reflection_is_rejected(fake_openai, content):
    fake_openai.enqueue(completion(content))

    with pytest.raises(EngineError, match="empty reflection") as error:
        make_engine(fake_openai).reflect(refund_observations(), now=NOW)

    assert error.value.retryable is False


def test_a_cut_off_last_line_is_dropped(fake_openai):
    fake_openai.enqueue(
        completion(
            "- [high] (2026-02-17) Refund for order 4521 due 2026-02-17 {refs: 1,3}\n"
            "- [medium] (unknown) User prefers e-m",
            finish_reason="length",
        )
    )

    reflections = make_engine(fake_openai).reflect(refund_observations(), now=NOW)

    assert [r.text for r in reflections] == ["Refund for order 4521 due 2026-02-17"]


# --- Provider failures --------------------------------------------------------------------


def test_a_provider_slower_than_the_timeout_ends_the_call_after_one_attempt(fake_openai):
    # A hanging provider holds the worker for one timeout, not one per attempt: the run
    # is tried again later, with the task's backoff.
    fake_openai.default = slow(5.0)
    engine = make_engine(fake_openai, timeout=0.3, max_retries=2)

    with pytest.raises(ProviderUnavailable, match="timed out") as error:
        engine.observe(support_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is True
    assert fake_openai.request_count == 1


def test_it_waits_for_retry_after_on_429_then_succeeds(fake_openai):
    fake_openai.enqueue(rate_limited("1"), completion(GOOD_OBSERVER_OUTPUT))

    output = make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    assert len(output.observations) == 4
    first, second = fake_openai.requests
    assert 0.95 <= second.received_at - first.received_at < 2.0


def test_a_retry_after_longer_than_the_cap_ends_the_call_with_the_hint(fake_openai):
    fake_openai.enqueue(rate_limited("120"))
    engine = make_engine(fake_openai, retry_after_max=5.0)

    with pytest.raises(ProviderUnavailable, match="wait 120 s") as error:
        engine.observe(support_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is True
    assert error.value.retry_after == 120.0
    assert fake_openai.request_count == 1


def test_server_errors_are_retried_then_reported_as_retryable(fake_openai):
    fake_openai.enqueue(server_error(502), server_error(503), completion(GOOD_OBSERVER_OUTPUT))

    output = make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    assert len(output.observations) == 4
    assert fake_openai.request_count == 3


def test_a_client_error_is_not_retried(fake_openai):
    fake_openai.enqueue(client_error(401, "invalid_api_key"))

    with pytest.raises(EngineError, match="HTTP 401 invalid_api_key") as error:
        make_engine(fake_openai).observe(support_window(), previous_observations=[], now=NOW)

    assert error.value.retryable is False
    assert fake_openai.request_count == 1


def test_an_unreachable_provider_is_a_retryable_connection_error(fake_openai):
    fake_openai.stop()
    engine = make_engine(fake_openai, max_retries=1)

    with pytest.raises(ProviderUnavailable, match="connection error"):
        engine.observe(support_window(), previous_observations=[], now=NOW)


# --- Circuit breaker ----------------------------------------------------------------------


def test_repeated_500s_open_the_breaker_until_a_trial_call_succeeds(fake_openai):
    fake_openai.default = server_error(500)
    engine = make_engine(fake_openai, max_retries=4, breaker_failures=3, breaker_cooldown=0.5)

    with pytest.raises(ProviderUnavailable, match="HTTP 500; circuit opened"):
        engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.request_count == 3  # the breaker cut the retries short

    # Another engine (another worker process, same cache) fails fast too.
    for caller in (engine, make_engine(fake_openai, breaker_failures=3, breaker_cooldown=0.5)):
        with pytest.raises(ProviderUnavailable, match="circuit open") as error:
            caller.observe(support_window(), previous_observations=[], now=NOW)
        assert error.value.retryable is True
    assert fake_openai.request_count == 3

    time.sleep(0.6)
    fake_openai.default = completion(GOOD_OBSERVER_OUTPUT)
    output = engine.observe(support_window(), previous_observations=[], now=NOW)

    assert len(output.observations) == 4
    assert fake_openai.request_count == 4
    assert engine.breaker.is_open() is False
    engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.request_count == 5


def test_a_failed_trial_call_opens_the_breaker_again(fake_openai):
    fake_openai.default = server_error(500)
    engine = make_engine(fake_openai, max_retries=4, breaker_failures=2, breaker_cooldown=0.3)
    with pytest.raises(ProviderUnavailable, match="circuit opened"):
        engine.observe(support_window(), previous_observations=[], now=NOW)
    time.sleep(0.4)

    with pytest.raises(ProviderUnavailable, match="circuit opened"):
        engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.request_count == 3  # one trial request, not a new series of retries

    with pytest.raises(ProviderUnavailable, match="circuit open"):
        engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.request_count == 3


# --- Settings -----------------------------------------------------------------------------


def test_the_factory_reads_settings_and_arguments_override_them(fake_openai, settings):
    settings.MEMDESK_OPENAI_BASE_URL = fake_openai.base_url
    settings.MEMDESK_OPENAI_API_KEY = "settings-key"
    settings.MEMDESK_OPENAI_OBSERVER_MODEL = "small-model"
    settings.MEMDESK_OPENAI_REFLECTOR_MODEL = "large-model"
    settings.MEMDESK_OPENAI_MAX_RETRIES = 0

    engine = openai_engine_from_settings()
    assert (engine.observer_model, engine.reflector_model) == ("small-model", "large-model")
    assert engine.max_retries == 0
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))
    engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.requests[-1].headers["authorization"] == "Bearer settings-key"

    workspace_engine = openai_engine_from_settings(api_key="workspace-key", model="ws-model")
    assert (workspace_engine.observer_model, workspace_engine.reflector_model) == (
        "ws-model",
        "ws-model",
    )
    fake_openai.enqueue(completion(GOOD_OBSERVER_OUTPUT))
    workspace_engine.observe(support_window(), previous_observations=[], now=NOW)
    assert fake_openai.requests[-1].headers["authorization"] == "Bearer workspace-key"
    assert fake_openai.requests[-1].body["model"] == "ws-model"
