"""Engines whose output a test decides (install one with the ``fake_engine`` fixture): a
Reflector that condenses all it is given into one reflection, and an Observer that writes
one line for the first message of its window."""

from __future__ import annotations

from memory.engines.base import DraftObservation, DraftReflection, ObserverOutput
from memory.engines.extractive import ExtractiveEngine


class CondensesEverything(ExtractiveEngine):
    """A Reflector that condenses every observation it is given into one reflection of
    ``text``; what it was given is kept in ``seen`` (a note left out of its inputs is the
    only way for a note to keep its words)."""

    def __init__(self, text: str = "Customer waits for a parcel refund.") -> None:
        super().__init__()
        self.text = text
        self.seen: list[str] = []

    def reflect(self, observations, *, now):
        self.seen = [o.text for o in observations]
        if not observations:
            return []
        return [
            DraftReflection(
                text=self.text,
                priority="medium",
                referenced_at=None,
                source_observation_ids=[o.id for o in observations],
            )
        ]


class ObservesOneLine(ExtractiveEngine):
    """An Observer that writes ``text`` for the first message of its window (reading
    nothing of it: a weakly grounded note unless the text repeats the message)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def observe(self, messages, *, previous_observations, now, fidelity="balanced"):
        return ObserverOutput([DraftObservation(self.text, "high", None, [messages[0].id])])
