"""Engine inputs built from plain turns, for the tests of the extractive engine, and the
reader of what it observed."""

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
