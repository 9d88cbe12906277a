"""Prompts of the ``openai`` engine and the line format its parser accepts.

``PROMPT_VERSION`` is recorded on every run: bump it whenever a prompt's wording or the
output format changes, so runs (and the memory they produced) can be traced to the prompt
that made them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory.engines.base import (
    DEFAULT_FIDELITY,
    FIDELITIES,
    MEMORY_BLOCK_HEADER,
    SourceMessage,
    SourceObservation,
)

PROMPT_VERSION = "2026-12-04.1"

# The Observer's user prompt says how much of the window to keep (the workspace's
# fidelity); the system prompt, and so a provider's prompt cache, stays the same.
FIDELITY_INSTRUCTIONS = {
    "compact": "Detail: compact — one short line per topic: only the facts, decisions "
    "and commitments the assistant needs later.",
    "balanced": "Detail: balanced — one line per fact, decision, preference, "
    "commitment or problem.",
    "detailed": "Detail: detailed — keep more of what was said: the assistant's "
    "answers and commitments too, with every name, number, amount and date.",
}

_LINE_FORMAT = """\
- [PRIORITY] (YYYY-MM-DD) TEXT {refs: N,N}

where:
- PRIORITY is exactly one of: high (must attend: problems, commitments, deadlines, \
decisions the assistant must respect), medium (potentially relevant: preferences, facts, \
context), low (background), completed (a task or request that has been finished).
- (YYYY-MM-DD) is the calendar date of the event the line talks about: when it happened \
or will happen. Resolve relative dates ("tomorrow", "next Tuesday", "3 days ago") against \
the timestamp of the entry that mentions them. Write (unknown) if no date can be resolved.
- TEXT is one self-contained sentence in plain text (no markdown, no line breaks). Keep \
names, numbers, identifiers, amounts and dates exactly as written.
- {refs: ...} lists the numbers of the entries the line is based on, separated by commas.\
"""

OBSERVER_SYSTEM_PROMPT = f"""\
You are the Observer of a memory service for AI agents. You read a window of a \
conversation between a user and an assistant (with system and tool messages) and write \
compact, dated, prioritised observations that let the assistant continue the \
conversation later without the raw messages.

The input lists messages one per entry as:
#SEQ [ROLE] (TIMESTAMP) CONTENT
or, when the message names its speaker:
#SEQ [NAME (ROLE)] (TIMESTAMP) CONTENT

Write one observation per line, in exactly this format:
{_LINE_FORMAT}
The numbers in refs are the #SEQ numbers of the messages shown in the input.

After the observations write these two lines:
Current task: what the user and assistant are working on right now, in one sentence \
(or "none").
Suggested response: what the assistant should say or do next, in one sentence \
(or "none").

Rules:
- Write at least one observation. Record facts, decisions, preferences, commitments, \
problems, dates, numbers and names. Fold repetitive tool output into one line per tool \
call with the salient values.
- Say who: when a message names its speaker, write the name, not the role ("Maria asked \
for a refund"), adding the role when it matters ("Tom, the agent, promised a call back by \
Friday"). Several people may share a role (a customer and a supervisor, a meeting): never \
attribute one person's words to another. Write "User" or "Assistant" only for a message \
that names no speaker.
- Copy a placeholder such as <PERSON_3> exactly as written, brackets included: it stands \
for a name that was redacted.
- Be much shorter than the input. Never repeat a line. Do not restate observations that \
are already recorded (they are listed under "Already recorded", if any).
- Never observe a message that begins with "{MEMORY_BLOCK_HEADER}": it is memory this \
service injected, not part of the conversation.
- Output only the lines described above: no headings, no preamble, no explanations.\
"""

REFLECTOR_SYSTEM_PROMPT = f"""\
You are the Reflector of a memory service for AI agents. You receive the observations \
recorded about one conversation and condense them into fewer, denser reflections.

The input lists observations one per entry as:
[N] [PRIORITY] (DATE) TEXT

Write one reflection per line, in exactly this format:
{_LINE_FORMAT}
The numbers in refs are the [N] numbers of the observations each reflection condenses.

Rules:
- Merge near-duplicates, drop what later observations supersede, keep what is still \
relevant. Condense older material harder than recent material.
- Keep every high-priority fact that is still true.
- Keep who said or did what, by the names the observations use (and placeholders such \
as <PERSON_3> exactly as written); never merge two people into one.
- Write fewer lines than the input, and far fewer tokens. Never repeat a line.
- Never reflect on text that begins with "{MEMORY_BLOCK_HEADER}".
- Output only reflection lines: no headings, no preamble, no explanations.\
"""


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="minutes")


def _one_line(text: str) -> str:
    # Entries are one per line; a message's own newlines would blur where it ends.
    return " ".join(text.split())


def render_messages(messages: Sequence[SourceMessage]) -> str:
    lines = []
    for message in messages:
        who = f"{message.role}:{message.tool_name}" if message.tool_name else message.role
        if message.speaker:
            who = f"{_one_line(message.speaker)} ({who})"
        lines.append(
            f"#{message.seq} [{who}] ({_stamp(message.created_at)}) {_one_line(message.content)}"
        )
    return "\n".join(lines)


def observer_user_prompt(
    *,
    rendered_messages: str,
    previous_observations: Sequence[str],
    now: datetime,
    fidelity: str = DEFAULT_FIDELITY,
) -> str:
    if fidelity not in FIDELITY_INSTRUCTIONS:
        raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}; got {fidelity!r}.")
    parts = [f"Now: {_stamp(now)}", FIDELITY_INSTRUCTIONS[fidelity]]
    if previous_observations:
        already = "\n".join(f"- {_one_line(text)}" for text in previous_observations)
        parts.append(f"Already recorded:\n{already}")
    parts.append(f"Messages:\n{rendered_messages}")
    return "\n\n".join(parts)


def render_observations(observations: Sequence[SourceObservation]) -> str:
    lines = []
    for index, observation in enumerate(observations, start=1):
        day = observation.referenced_at or observation.observed_at
        lines.append(
            f"[{index}] [{observation.priority}] ({day.date().isoformat()}) "
            f"{_one_line(observation.text)}"
        )
    return "\n".join(lines)


def reflector_user_prompt(*, rendered_observations: str, now: datetime) -> str:
    return f"Now: {_stamp(now)}\n\nObservations:\n{rendered_observations}"
