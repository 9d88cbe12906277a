"""The ``openai`` engine: Observer and Reflector through an OpenAI-compatible endpoint.

Works with anything that speaks chat completions (OpenAI, Azure OpenAI, vLLM, Ollama,
llama.cpp server, LM Studio) through the official ``openai`` SDK.

Failure policy, explicit here rather than left to the SDK (which is built with
``max_retries=0``). The SDK's own ``max_retries`` retries the same statuses and honours
``Retry-After``, but inside one call: the shared breaker below would see one failure per
call instead of one per attempt (five calls of five attempts reach a dead provider 25
times before it opens, not 5), a half-open trial would become a series of retries, and
a ``Retry-After`` past ``retry_after_max`` would be slept through (the installed SDK
waits up to 120 s, its own constant, on a worker holding a run's lease) instead of
ending the call with the hint for the task queue. So the loop stays here:
- Connection errors, 408/409/429 and 5xx are retried with exponential backoff and
  jitter, at most ``max_retries`` times. A ``Retry-After`` header (seconds) is waited
  for; one longer than ``retry_after_max`` ends the call at once, because retrying
  earlier than the provider asked only burns an attempt. When the attempts run out the
  call raises ``ProviderUnavailable`` (an ``EngineError`` with ``retryable=True``).
- A timeout (``timeout``, MEMDESK_OPENAI_TIMEOUT) ends the call at once with
  ``ProviderUnavailable``: a provider that hangs would hold the worker for one timeout
  per attempt (five minutes with the defaults); the run is tried again later instead.
- Other 4xx answers (bad key, unknown model, context too long) and bodies that are not a
  chat completion are configuration problems: ``EngineError(retryable=False)`` at once.
- A circuit breaker per base URL, kept in Django's cache so every process of a deployment
  shares it, fails calls fast after ``breaker_failures`` consecutive failed attempts, for
  ``breaker_cooldown`` seconds; then one trial call at a time decides whether it closes.
  Its closing is what the pipeline waits for to send again the runs an outage failed
  past their retries (memory/pipeline/sweep.py).

Output validation (every rejection is ``retryable=False``, nothing is stored):
- Lines follow ``- [priority] (YYYY-MM-DD) text {refs: 1,2}`` (see ``prompts.py``).
  Lines that do not parse are skipped and counted; repeats of the same text are merged
  into one line with their refs united; output with no observation line is malformed.
- Degenerate output: the same line text 4 or more times, or a block of 1-32 words
  repeated back to back at least 4 times and over at least 32 words.
- Output that does not compress: output tokens >= input tokens (the rendered messages or
  observations). The Observer is held to it only from 200 input tokens up, where a
  summary line can no longer legitimately be as long as what it summarises.
- An empty reflection for a non-empty input (the Reflector's "nothing to condense"
  answer, ``prompts.NOTHING_TO_CONDENSE``, is no reflection, and legitimate).

Provenance: ``refs`` name the ``#seq`` of input messages (Observer) or the ``[N]`` index of
input observations (Reflector). Refs that name nothing in the input are dropped. An
observation line left with no valid ref is attributed to the whole input window: it was
certainly derived from that window, and dropping the line would lose memory for a
citation mistake. A reflection line left with none is dropped: what a reflection cites
leaves the context, so it would take out every observation, and dropping it loses
nothing (the observations stay).

Logs carry ids, counts, models, status codes and timings, never prompt or output text.
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from typing import Any
from urllib.parse import urlsplit

import openai
from django.core.cache import cache

from core.cache import cache_add, cache_incr
from memory.engines.base import (
    DEFAULT_FIDELITY,
    MEMORY_BLOCK_HEADER,
    PRIORITIES,
    DraftObservation,
    DraftReflection,
    EngineError,
    ObserverOutput,
    SourceMessage,
    SourceObservation,
)
from memory.engines.prompts import (
    NOTHING_TO_CONDENSE,
    OBSERVER_SYSTEM_PROMPT,
    PROMPT_VERSION,
    REFLECTOR_SYSTEM_PROMPT,
    observer_user_prompt,
    reflector_user_prompt,
    render_messages,
    render_observations,
)
from memory.tokens import token_count

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Local servers (Ollama, llama.cpp, vLLM) ignore the key, but the SDK refuses to start
# without one; OpenAI itself answers 401, which surfaces as a clear run error.
PLACEHOLDER_API_KEY = "no-key-configured"

OBSERVER_MIN_COMPRESSION_INPUT_TOKENS = 200
REPEATED_LINE_LIMIT = 4
REPEATED_BLOCK_MAX_WORDS = 32
REPEATED_BLOCK_MIN_REPEATS = 4
REPEATED_RUN_MIN_WORDS = 32
# The Observer sees the newest previously recorded observations so it does not restate
# them; more than this only costs tokens.
PREVIOUS_OBSERVATIONS_TOKEN_BUDGET = 4000
RETRYABLE_STATUSES = frozenset({408, 409, 429})


class ProviderUnavailable(EngineError):
    """The provider failed transiently (or the breaker is open); try again later.

    ``retry_after`` is the provider's own hint in seconds, when it gave one that was too
    long to wait for inside the call: a task queue should not retry before it.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, retryable=True)
        self.retry_after = retry_after


# --- Circuit breaker ----------------------------------------------------------------------


class CircuitBreaker:
    """Consecutive-failure breaker whose state lives in the shared Django cache.

    State is three keys: the failure count, the time until which the circuit is open, and
    a trial lock taken with ``cache.add`` so that only one caller, in any process, probes
    a provider that may still be down. Cache operations are not one transaction; a race
    can at worst let one extra request through or open the circuit one failure late.
    """

    def __init__(self, *, base_url: str, failure_threshold: int, cooldown: float, trial_ttl: float):
        # One breaker per provider: every engine (workspace) on the same base URL shares it.
        self.provider = base_url_hash(base_url)
        namespace = f"memdesk:openai-breaker:{self.provider}"
        self._failures_key = f"{namespace}:failures"
        self._open_until_key = f"{namespace}:open_until"
        self._trial_key = f"{namespace}:trial"
        self.failure_threshold = failure_threshold
        self.cooldown = cooldown
        # Cache timeouts are whole seconds on some backends (Redis); sub-second values
        # would expire at once, so expiry here is a safety net and times live in values.
        self._trial_ttl = max(1, int(trial_ttl) + 1)
        self._state_ttl = max(3600, int(cooldown) * 10)

    def before_call(self) -> bool:
        """Raise if the circuit is open; return True when this call is the half-open trial."""
        open_until = cache.get(self._open_until_key)
        if open_until is None:
            return False
        if time.time() < open_until:
            raise ProviderUnavailable(
                "circuit open: the provider failed repeatedly; calls resume after "
                f"{open_until - time.time():.1f} s",
                retry_after=max(0.0, open_until - time.time()),
            )
        # With the cache down no process can know who probes: let this call through.
        if not cache_add(self._trial_key, 1, self._trial_ttl, when_down=True):
            raise ProviderUnavailable("circuit open: a trial call to the provider is running")
        return True

    def record_success(self) -> None:
        cache.delete_many([self._failures_key, self._open_until_key, self._trial_key])

    def record_failure(self, *, trial: bool) -> bool:
        """Count a failed attempt; return True when the circuit is (now) open."""
        cache_add(self._failures_key, 0, self._state_ttl, when_down=False)
        failures = cache_incr(self._failures_key)
        if failures is None:  # expired between add and incr, or the cache is down
            cache.set(self._failures_key, 1, self._state_ttl)
            failures = 1
        if trial or failures >= self.failure_threshold:
            cache.set(self._open_until_key, time.time() + self.cooldown, self._state_ttl)
            cache.delete_many([self._trial_key])
            return True
        return False

    def is_open(self) -> bool:
        open_until = cache.get(self._open_until_key)
        return open_until is not None and time.time() < open_until

    def is_closed(self) -> bool:
        """No outage on record: the circuit never opened, or a call succeeded since it
        did. Open and past its cooldown it is neither: the next call is a trial."""
        return cache.get(self._open_until_key) is None


def _loggable_host(base_url: str) -> str:
    # Never the netloc as is: a URL may carry credentials (https://user:key@host).
    parts = urlsplit(base_url)
    return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)


def base_url_hash(base_url: str) -> str:
    return hashlib.sha256(base_url.rstrip("/").encode()).hexdigest()[:16]


# --- Output parsing -----------------------------------------------------------------------

_PRIORITY_ALIASES = {
    **{p: p for p in PRIORITIES},
    "med": "medium",
    "complete": "completed",
    "done": "completed",
}
_LINE = re.compile(
    r"""^\s*(?:[-*\u2022]|\d{1,3}[.)])?\s*
    \[\s*(?P<priority>[A-Za-z]+)\s*\]\s*
    (?:\(\s*(?P<date>[^)]*?)\s*\)\s*)?
    (?P<text>.*?)\s*
    (?:[{\[(]\s*refs?\s*:?\s*(?P<refs>[^})\]]*)[})\]])?\s*$""",
    re.VERBOSE,
)
# Models like to bold labels: "**Current task:**" and "**Current task**:" both count.
_LABEL = r"^\s*(?:[-*]\s*)?\**\s*{label}\s*\**\s*:\s*\**\s*(?P<value>.*)$"
_CURRENT_TASK = re.compile(_LABEL.format(label="current task"), re.I)
_SUGGESTED = re.compile(_LABEL.format(label="suggested (?:next )?response"), re.I)
_ISO_DAY = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})(?:[T ](?P<clock>\d{2}:\d{2}))?$")
_UNKNOWN_DATES = frozenset({"", "unknown", "n/a", "none", "-", "?"})
_NONE_VALUES = frozenset({"", "none", "n/a", "-", "nothing"})
_REF_RANGE = re.compile(r"(\d+)\s*[-\u2013]\s*(\d+)")
_REF_NUMBER = re.compile(r"\d+")
# A model citing "1-100000" must not make the parser build a huge list.
_MAX_REF_RANGE = 1000


@dataclass(frozen=True)
class ParsedLine:
    priority: str
    text: str
    referenced_at: datetime | None
    refs: tuple[int, ...]


@dataclass
class ParsedOutput:
    lines: list[ParsedLine] = field(default_factory=list)
    current_task: str | None = None
    suggested_response: str | None = None
    skipped_lines: int = 0


def parse_output(content: str, *, zone: tzinfo) -> ParsedOutput:
    parsed = ParsedOutput()
    for raw in content.splitlines():
        if not raw.strip():
            continue
        if match := _CURRENT_TASK.match(raw):
            parsed.current_task = _optional(match.group("value"))
        elif match := _SUGGESTED.match(raw):
            parsed.suggested_response = _optional(match.group("value"))
        elif line := _parse_line(raw, zone=zone):
            parsed.lines.append(line)
        else:
            parsed.skipped_lines += 1
    parsed.lines = _merge_duplicates(parsed.lines)
    return parsed


def _parse_line(raw: str, *, zone: tzinfo) -> ParsedLine | None:
    match = _LINE.match(raw)
    if match is None:
        return None
    priority = _PRIORITY_ALIASES.get(match.group("priority").lower())
    text = match.group("text").strip()
    date_text = (match.group("date") or "").strip()
    referenced_at = _parse_date(date_text, zone=zone)
    looks_like_date = _ISO_DAY.match(date_text) is not None  # even when invalid: 02-30
    if referenced_at is None and not looks_like_date and date_text.lower() not in _UNKNOWN_DATES:
        # "(urgent) refund ..." is part of the sentence, not a date the model mangled.
        text = f"({date_text}) {text}".strip()
    if priority is None or not text:
        return None
    return ParsedLine(priority, text, referenced_at, _parse_refs(match.group("refs") or ""))


def _parse_date(text: str, *, zone: tzinfo) -> datetime | None:
    match = _ISO_DAY.match(text)
    if match is None:
        return None
    try:
        day = date.fromisoformat(match.group("day"))
        hour, minute = (int(part) for part in (match.group("clock") or "00:00").split(":"))
        return datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone)
    except ValueError:  # 2026-02-30, 25:00
        return None


def _parse_refs(text: str) -> tuple[int, ...]:
    refs: list[int] = []
    for start, end in _REF_RANGE.findall(text):
        low, high = int(start), int(end)
        if low <= high and high - low <= _MAX_REF_RANGE:
            refs.extend(range(low, high + 1))
    refs.extend(int(number) for number in _REF_NUMBER.findall(_REF_RANGE.sub(" ", text)))
    return tuple(sorted(set(refs)))


def _optional(value: str) -> str | None:
    value = value.strip().strip("*").strip()
    return None if value.lower().rstrip(".") in _NONE_VALUES else value


def _normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _merge_duplicates(lines: list[ParsedLine]) -> list[ParsedLine]:
    """One line per distinct text; a repeat adds its refs to the first occurrence."""
    merged: dict[str, ParsedLine] = {}
    for line in lines:
        key = _normalised(line.text)
        first = merged.get(key)
        if first is None:
            merged[key] = line
        else:
            refs = tuple(sorted(set(first.refs + line.refs)))
            merged[key] = ParsedLine(first.priority, first.text, first.referenced_at, refs)
    return list(merged.values())


# --- Output validation --------------------------------------------------------------------


def degeneracy(content: str) -> str | None:
    """Why ``content`` looks like a model stuck in a loop, or None."""
    texts = []
    for raw in content.splitlines():
        match = _LINE.match(raw)
        text = match.group("text") if match else raw
        if text.strip():
            texts.append(_normalised(text))
    if texts:
        text, count = Counter(texts).most_common(1)[0]
        if count >= REPEATED_LINE_LIMIT:
            return f"the same line {count} times"
    return _repeated_block(content.split())


def _repeated_block(words: list[str]) -> str | None:
    for period in range(1, REPEATED_BLOCK_MAX_WORDS + 1):
        run = 0  # how many words in a row equal the word `period` places earlier
        for index in range(period, len(words)):
            run = run + 1 if words[index] == words[index - period] else 0
            covered = run + period
            if covered >= REPEATED_RUN_MIN_WORDS and covered >= REPEATED_BLOCK_MIN_REPEATS * period:
                return f"a block of {period} words repeated {covered // period} times"
    return None


def _check_not_degenerate(content: str, *, kind: str) -> None:
    reason = degeneracy(content)
    if reason:
        raise EngineError(f"{kind}: degenerate model output ({reason})", retryable=False)


# --- Provider calls -----------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    content: str
    truncated: bool


@dataclass(frozen=True)
class Failure:
    """A failed attempt worth retrying; ``retry_after`` is the provider's hint, if any.
    One that ``ends_call`` is retried by the run, later, not within this call."""

    reason: str
    retry_after: float | None = None
    ends_call: bool = False


class OpenAIEngine:
    name = "openai"
    prompt_version = PROMPT_VERSION

    def __init__(
        self,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str = "",
        observer_model: str = "gpt-4o-mini",
        reflector_model: str = "gpt-4o-mini",
        timeout: float = 60.0,
        max_retries: int = 4,
        breaker_failures: int = 5,
        breaker_cooldown: float = 60.0,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
        temperature: float | None = 0.0,
    ) -> None:
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.observer_model = observer_model
        self.reflector_model = reflector_model
        # Engine.model is one string; runs of reflect() should record reflector_model.
        self.model = observer_model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.retry_after_max = retry_after_max
        self.temperature = temperature
        self._host = _loggable_host(self.base_url)
        self._client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or PLACEHOLDER_API_KEY,
            timeout=timeout,
            max_retries=0,
        )
        self.breaker = CircuitBreaker(
            base_url=self.base_url,
            failure_threshold=breaker_failures,
            cooldown=breaker_cooldown,
            trial_ttl=timeout,
        )

    # --- Engine protocol ---

    def observe(
        self,
        messages: Sequence[SourceMessage],
        *,
        previous_observations: Sequence[str],
        now: datetime,
        fidelity: str = DEFAULT_FIDELITY,
    ) -> ObserverOutput:
        # The pipeline filters the injected memory block too; this is the second lock.
        window = [m for m in messages if not m.content.lstrip().startswith(MEMORY_BLOCK_HEADER)]
        if not window:
            return ObserverOutput(observations=[])
        rendered = render_messages(window)
        prompt = observer_user_prompt(
            rendered_messages=rendered,
            previous_observations=_newest_within_budget(previous_observations),
            now=now,
            fidelity=fidelity,
        )
        completion = self._complete(
            kind="observe", model=self.observer_model, system=OBSERVER_SYSTEM_PROMPT, user=prompt
        )
        _check_not_degenerate(completion.content, kind="observe")
        parsed = parse_output(completion.content, zone=_zone(now))
        if not parsed.lines:
            raise EngineError(
                "observe: malformed model output, no observation line in the expected format",
                retryable=False,
            )
        input_tokens = token_count(rendered)
        if input_tokens >= OBSERVER_MIN_COMPRESSION_INPUT_TOKENS:
            _check_compressed(completion.content, input_tokens=input_tokens, kind="observe")
        by_seq = {m.seq: m for m in window}
        observations = [
            DraftObservation(
                text=line.text,
                priority=line.priority,
                referenced_at=line.referenced_at,
                source_message_ids=_message_sources(line.refs, by_seq),
            )
            for line in parsed.lines
        ]
        logger.info(
            "openai observe parsed: messages=%d observations=%d skipped_lines=%d input_tokens=%d",
            len(window),
            len(observations),
            parsed.skipped_lines,
            input_tokens,
        )
        return ObserverOutput(
            observations=observations,
            current_task=parsed.current_task,
            suggested_response=parsed.suggested_response,
        )

    def reflect(
        self, observations: Sequence[SourceObservation], *, now: datetime
    ) -> list[DraftReflection]:
        if not observations:
            return []
        rendered = render_observations(observations)
        completion = self._complete(
            kind="reflect",
            model=self.reflector_model,
            system=REFLECTOR_SYSTEM_PROMPT,
            user=reflector_user_prompt(rendered_observations=rendered, now=now),
        )
        if not completion.content.strip():
            raise EngineError("reflect: the model returned an empty reflection", retryable=False)
        if completion.content.strip().rstrip(".").upper() == NOTHING_TO_CONDENSE:
            return []
        _check_not_degenerate(completion.content, kind="reflect")
        parsed = parse_output(completion.content, zone=_zone(now))
        if not parsed.lines:
            raise EngineError(
                "reflect: empty reflection, no line in the expected format", retryable=False
            )
        input_tokens = token_count(rendered)
        _check_compressed(completion.content, input_tokens=input_tokens, kind="reflect")
        reflections = [
            DraftReflection(
                text=line.text,
                priority=line.priority,
                referenced_at=line.referenced_at,
                source_observation_ids=sources,
            )
            for line in parsed.lines
            if (sources := _observation_sources(line.refs, observations))
        ]
        logger.info(
            "openai reflect parsed: observations=%d reflections=%d skipped_lines=%d "
            "input_tokens=%d",
            len(observations),
            len(reflections),
            parsed.skipped_lines,
            input_tokens,
        )
        return reflections

    # --- Calls with retries and the breaker ---

    def _complete(self, *, kind: str, model: str, system: str, user: str) -> Completion:
        attempts = self.max_retries + 1
        last_failure = ""
        for attempt in range(1, attempts + 1):
            trial = self.breaker.before_call()
            started = time.monotonic()
            try:
                outcome = self._attempt(model=model, system=system, user=user)
            except EngineError:
                # The provider answered (a 400, a body of the wrong shape): it is up, even
                # though this request cannot succeed.
                self.breaker.record_success()
                raise
            elapsed = time.monotonic() - started
            if isinstance(outcome, Completion):
                self.breaker.record_success()
                logger.info(
                    "openai %s ok: host=%s model=%s attempt=%d seconds=%.2f truncated=%s",
                    kind, self._host, model, attempt, elapsed, outcome.truncated,
                )  # fmt: skip
                return outcome
            last_failure = outcome.reason
            logger.warning(
                "openai %s failed: host=%s model=%s attempt=%d/%d seconds=%.2f error=%s",
                kind, self._host, model, attempt, attempts, elapsed, outcome.reason,
            )  # fmt: skip
            if self.breaker.record_failure(trial=trial):
                raise ProviderUnavailable(f"{kind}: {outcome.reason}; circuit opened")
            if outcome.ends_call:
                raise ProviderUnavailable(f"{kind}: {outcome.reason}")
            wait = outcome.retry_after
            if wait is not None and wait > self.retry_after_max:
                raise ProviderUnavailable(
                    f"{kind}: {outcome.reason}; provider asked to wait {wait:.0f} s",
                    retry_after=wait,
                )
            if attempt < attempts:
                time.sleep(wait if wait is not None else self._backoff(attempt))
        raise ProviderUnavailable(f"{kind}: {last_failure} (gave up after {attempts} attempts)")

    def _attempt(self, *, model: str, system: str, user: str) -> Completion | Failure:
        """One request: the completion or a retryable failure; raise when retrying is futile."""
        extra: dict[str, Any] = {}
        if self.temperature is not None:
            extra["temperature"] = self.temperature
        try:
            response = self._client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": user},
                ],
                **extra,
            )
        except openai.APITimeoutError:
            return Failure(f"timed out after {self.timeout:g} s", ends_call=True)
        except openai.APIConnectionError as exc:
            return Failure(f"connection error ({type(exc.__cause__).__name__})")
        except openai.APIStatusError as exc:
            if exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500:
                return Failure(f"HTTP {exc.status_code}", _retry_after(exc.response.headers))
            raise EngineError(
                f"provider rejected the request: HTTP {exc.status_code}{_error_code(exc.body)}"
                " (check the base URL, API key and model name)",
                retryable=False,
            ) from None
        except ValueError:  # a JSON content type with a body that is not JSON
            raise _malformed_body() from None
        return _completion_from(response)

    def _backoff(self, attempt: int) -> float:
        delay: float = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        # Jitter keeps workers that failed together from retrying in lockstep.
        return delay * random.uniform(0.5, 1.0)


def _completion_from(response: object) -> Completion:
    # The SDK returns the body as text when it is not JSON, and builds models leniently
    # (without validation) from JSON of the wrong shape: check what actually arrived.
    try:
        choice = response.choices[0]  # type: ignore[attr-defined]
        content = choice.message.content
        finish_reason = choice.finish_reason
    except (AttributeError, IndexError, KeyError, TypeError):
        raise _malformed_body() from None
    if content is None and getattr(choice.message, "refusal", None):
        raise EngineError("the model refused the request", retryable=False)
    if not isinstance(content, str):
        raise _malformed_body()
    truncated = finish_reason == "length"
    if truncated:
        # The last line was cut mid-sentence; the complete lines before it are usable.
        content = content.rsplit("\n", 1)[0] if "\n" in content else ""
    return Completion(content=content, truncated=truncated)


def _malformed_body() -> EngineError:
    return EngineError(
        "provider returned a body that is not a chat completion "
        "(is the base URL an OpenAI-compatible /v1 endpoint?)",
        retryable=False,
    )


def _retry_after(headers: Any) -> float | None:
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            seconds = float(raw) / divisor
        except ValueError:
            continue  # an HTTP date: rare from LLM providers, fall back to backoff
        if seconds >= 0:
            return seconds
    return None


def _error_code(body: object) -> str:
    # The code ("context_length_exceeded", "model_not_found") says what to fix; the
    # message is not logged or stored because some servers echo the input back in it.
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return f" {error['code']}"
    return ""


def _check_compressed(content: str, *, input_tokens: int, kind: str) -> None:
    output_tokens = token_count(content)
    if output_tokens >= input_tokens:
        raise EngineError(
            f"{kind}: output did not compress ({output_tokens} tokens out for {input_tokens} in)",
            retryable=False,
        )


def _message_sources(refs: Sequence[int], by_seq: dict[int, SourceMessage]) -> list[str]:
    cited = sorted(by_seq[ref].seq for ref in refs if ref in by_seq)
    seqs = cited or sorted(by_seq)
    return [by_seq[seq].id for seq in seqs]


def _observation_sources(
    refs: Sequence[int], observations: Sequence[SourceObservation]
) -> list[str]:
    indices = sorted({ref for ref in refs if 1 <= ref <= len(observations)})
    return [observations[index - 1].id for index in indices]


def _newest_within_budget(texts: Sequence[str]) -> list[str]:
    kept: list[str] = []
    budget = PREVIOUS_OBSERVATIONS_TOKEN_BUDGET
    for text in reversed(texts):
        budget -= token_count(text)
        if budget < 0:
            break
        kept.append(text)
    return kept[::-1]


def _zone(now: datetime) -> tzinfo:
    return now.tzinfo or UTC
