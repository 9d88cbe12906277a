"""The ``extractive`` engine: the default Observer and Reflector, offline, with no model.

Observer. Each sentence of a user, assistant or system message is kept only when it
carries something worth remembering (a fact about the user, a preference, a decision, a
plan, a commitment, a problem, a request, a new name or a number) and is rewritten in the
third person ("I prefer email" becomes "User prefers email"; "Jo: I moved" or a message
whose ``name`` is Jo becomes "Jo moved"). Greetings, thanks,
acknowledgements and chit-chat are dropped. Each tool call becomes one line with the
salient values of its output; a later state of the same object replaces an earlier one,
and a line whose values another line of the window already holds is folded into it, as
is a user request that the tool calls after it carried out. Priorities are assigned by
rule; relative dates are resolved against the message time (``memory/engines/dates.py``)
and written out ("yesterday" becomes "on Apr 27"). A fact already in the previous
observations is not repeated. An assistant's answer keeps what later questions ask it
about: the heads of its lists' items and the names and counted numbers of its prose
("Assistant listed Duolingo; Babbel (10 minutes); Memrise"), beside its promises,
finished tasks and sums. A short support answer is read for what it decides: an ETA ("about
five business days"), a policy with its condition, a refusal with its reason, a state, a
promise someone else will keep ("a courier will call you tomorrow"). A value given when
asked for it is noted with what it is ("User's order ID is 3348917502"); a login name, or
an id nobody asked for, is not noted. A question and its answer share a line. How much is
kept is the workspace's fidelity (``answers.DETAIL``: compact, balanced, detailed); no
level cuts a clause short.

Speakers. A message's speaker name replaces its role in the notes ("Maria asked for a
refund"), and "you" is who spoke before ("Tom will call Maria back"); between two named
people an agent is introduced with its role once ("Tom, the agent, ..."). Three or more
named people, as in a meeting, each keep their own lines. Pseudonyms (``<PERSON_12>``) are
one word: the Observer reads a window with each label swapped for a placeholder that its
rules take for a name, and writes the labels back byte for byte.

Reflector. A later note about the same subject supersedes the earlier one ("User now
prefers SMS" replaces "User prefers email"), near-duplicates (token-set similarity) are
merged, and the older part of memory is compressed harder than the recent part: old
high-priority notes stay as they are, other old notes become one line per topic, and
background and completed ones are shortened on the way.

Modules, each importing only from those listed before it: ``vocabulary`` (priorities,
shared word lists, word sets), ``pseudonyms`` (labels as one word), ``cues`` (what a
sentence says), ``sentences`` (splitting, cleaning, names, who speaks, third person),
``relative_dates`` (dates written out), ``answers`` (what an assistant's answer named, and
the fidelity levels), ``decisions`` (what an assistant's turn decides), ``details``
(values asked for and given), ``clauses`` (which sentences are kept and how they are
rewritten), ``tools`` (one line per tool call), ``observer`` (the notes of a window), ``subjects``
(what a note is about, and the groups), ``condense`` (what a group's line says) and
``reflector``.

Everything here is deterministic: no clocks, no randomness, and output is never built by
iterating over an unordered set. The engine never touches the database; see
``memory/engines/base.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from memory.engines.base import (
    DEFAULT_FIDELITY,
    DraftReflection,
    ObserverOutput,
    SourceMessage,
    SourceObservation,
)
from memory.engines.extractive.observer import forget_texts, observe_window
from memory.engines.extractive.reflector import reflect_observations

__all__ = ["ExtractiveEngine"]


class ExtractiveEngine:
    name = "extractive"
    model = ""
    prompt_version = ""

    def observe(
        self,
        messages: Sequence[SourceMessage],
        *,
        previous_observations: Sequence[str],
        now: datetime,
        fidelity: str = DEFAULT_FIDELITY,
    ) -> ObserverOutput:
        # No clock: relative dates resolve against each message's own time.
        try:
            return observe_window(
                messages, previous_observations=previous_observations, fidelity=fidelity
            )
        finally:
            forget_texts()  # a worker keeps nothing of a run's texts

    def reflect(
        self, observations: Sequence[SourceObservation], *, now: datetime
    ) -> list[DraftReflection]:
        try:
            return reflect_observations(observations)
        finally:
            forget_texts()
