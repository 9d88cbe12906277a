"""Inputs shared by the memory tests: source messages built from plain turns for the
extractive engine (and the reader of what it observed), and the grounding examples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from memory.engines.base import ObserverOutput, SourceMessage

TUESDAY = datetime(2026, 2, 10, 15, 30, tzinfo=UTC)  # the example in DESIGN.md


def source_messages(*turns: tuple[str, str], start: datetime = TUESDAY) -> list[SourceMessage]:
    """Messages m1, m2, ... one minute apart; a turn is (role, content) or, for a tool,
    ("tool:<name>", content)."""
    messages = []
    for seq, (role, content) in enumerate(turns, start=1):
        tool_name = role.split(":", 1)[1] if role.startswith("tool:") else ""
        messages.append(
            SourceMessage(
                id=f"m{seq}",
                seq=seq,
                role="tool" if tool_name else role,
                content=content,
                created_at=start + timedelta(minutes=seq),
                tool_name=tool_name,
            )
        )
    return messages


def texts(output: ObserverOutput) -> list[str]:
    return [o.text for o in output.observations]


# Grounding: two source messages, and a note that names people and a sum they never mention.
SOURCES = [
    "My refund for order 4521 has not arrived, I need it before next Tuesday.",
    "Please e-mail me, I do not take phone calls.",
]
INVENTED = "User Maria Gonzalez was promised 500 dollars by agent Alex"
