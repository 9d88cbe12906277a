"""Pseudonyms allocated per distinct person, on dialogues that name their people, run
through the product's write path and the Observer's redaction gate under the default
(private) policy, on a throwaway SQLite database.

Datasets (``../shared/data/conversations/``, read its README):
- ``abcd``: the three ABCD customer-service dialogues. The person each names is its
  customer (``scenario.personal.customer_name``); the turns carry roles only (customer
  -> user, agent -> assistant, action -> system).
- ``friendsqa``: the first ``--friendsqa-episodes`` FriendsQA episodes, one conversation
  each, every turn role "user" with its speaker as the message's ``name``. The people are
  the episode's speakers.
- ``lme``: the first ``--lme-sessions`` sessions of the first LongMemEval_S haystack (a
  user and an assistant, nobody named): every PERSON or LOCATION label there is counted
  as over-redaction of chat about products, works, places and dates.

Each conversation is written with ``messages_append`` (100 messages at most per call)
and then read through ``observer_reading`` in windows of ``--window`` messages, as the
Observer would read it: that is where the default policy numbers pseudonyms (contents,
and, where the code supports it, speakers' names).

Figures per dataset, from the workspace's pseudonym mapping (the values are decrypted
here to be matched, never printed):
- ``people``: the known people, and ``labelled``: those with at least one label;
- ``labels/person``: the labels whose value is a known person's name or one of its
  words (a first name alone, a surname alone), PERSON or LOCATION, per labelled person
  (1.0 is one label per person); ``max``: the most any one person has;
- ``other PERSON``: PERSON labels whose value names no known person (people the dialogue
  only mentions, and words taken for people); ``LOCATION``: LOCATION labels in all.

Run: ``.venv/bin/python bench/pseudonym_quality.py`` (about a minute). Prints figures only.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "conversations"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass
class Dialogue:
    """One conversation: its turns as (role, speaker's name, content), and the people
    it names."""

    turns: list[tuple[str, str, str]]
    people: list[str]


@dataclass
class Figures:
    people: int = 0
    labelled: int = 0
    person_labels: int = 0  # labels attributed to known people, counted per person
    most: int = 0
    other_person: int = 0
    location: int = 0
    turns: int = 0
    by_person: dict[str, set[str]] = field(default_factory=dict)

    @property
    def per_person(self) -> float | None:
        return self.person_labels / self.labelled if self.labelled else None


def load_abcd() -> list[Dialogue]:
    roles = {"customer": "user", "agent": "assistant", "action": "system"}
    dialogues = []
    for item in json.loads((DATA / "abcd_sample.json").read_text()):
        name = item["scenario"]["personal"]["customer_name"]
        dialogues.append(
            Dialogue(
                turns=[(roles[who], "", text) for who, text in item["original"] if text.strip()],
                people=[" ".join(w.capitalize() for w in name.split())],
            )
        )
    return dialogues


def load_friendsqa(episodes: int) -> list[Dialogue]:
    items = json.loads((DATA / "friendsqa" / "conversations.json").read_text())[:episodes]
    return [
        Dialogue(
            turns=[
                ("user", turn["speaker"], turn["text"])
                for session in item["sessions"]
                for turn in session["turns"]
                if turn["text"].strip()
            ],
            people=list(item["speakers"]),
        )
        for item in items
    ]


def load_lme(sessions: int) -> list[Dialogue]:
    items = json.loads((DATA / "longmemeval" / "longmemeval_s_subset68.json").read_text())
    haystack = items[0]["haystack_sessions"][:sessions]
    turns = [(t["role"], "", t["content"]) for s in haystack for t in s if t["content"].strip()]
    return [Dialogue(turns=turns, people=[])]


def _words(value: str) -> list[str]:
    return [w.strip(".,").casefold() for w in value.split() if w.strip(".,")]


def attribute(value: str, people: Sequence[str]) -> list[str]:
    """The known people ``value`` names: its words are their full name, or one word of
    it ("Monica", "Geller")."""
    words = _words(value)
    found = []
    for person in people:
        name = _words(person)
        if words == name or (len(words) == 1 and words[0] in name):
            found.append(person)
    return found


def figures(values: Iterable[tuple[str, str, str]], people: Sequence[str]) -> Figures:
    """``values``: (entity type, label, value) of the workspace's pseudonyms."""
    result = Figures(people=len(set(people)))
    by_person: dict[str, set[str]] = {}
    for entity_type, label, value in values:
        named = attribute(value, people) if entity_type in ("PERSON", "LOCATION") else []
        for person in named:
            by_person.setdefault(person, set()).add(label)
        if entity_type == "LOCATION":
            result.location += 1
        elif entity_type == "PERSON" and not named:
            result.other_person += 1
    result.by_person = by_person
    result.labelled = len(by_person)
    result.person_labels = sum(len(labels) for labels in by_person.values())
    result.most = max((len(labels) for labels in by_person.values()), default=0)
    return result


def run(name: str, dialogues: list[Dialogue], window: int) -> Figures:
    from governance.models import Pseudonym
    from governance.redaction.gates import observer_reading
    from governance.redaction.policy import redaction_policy_get_or_create
    from governance.redaction.pseudonyms import decrypt
    from memory.models import Conversation
    from memory.services.conversations import conversation_create
    from memory.services.messages import MessageInput, messages_append
    from tenancy.services import workspace_get_or_create

    workspace = workspace_get_or_create(name=f"pseudonyms-{name}")
    redaction_policy_get_or_create(workspace_id=workspace.pk)
    turns = 0
    for number, dialogue in enumerate(dialogues):
        conversation = conversation_create(workspace=workspace, user_id=f"{name}-{number}")
        items = [
            MessageInput(
                role=role,
                content=content,
                name=speaker,
                created_at=START + timedelta(minutes=index),
            )
            for index, (role, speaker, content) in enumerate(dialogue.turns)
        ]
        for start in range(0, len(items), 100):
            messages_append(conversation=conversation, items=items[start : start + 100])
        conversation = Conversation.objects.select_related("workspace").get(pk=conversation.pk)
        messages = list(conversation.messages.order_by("seq"))
        for start in range(0, len(messages), window):
            observer_reading(
                conversation=conversation,
                messages=messages[start : start + window],
                tool_outputs=[],
            )
        turns += len(messages)
    rows = Pseudonym.objects.filter(workspace=workspace).order_by("entity_type", "number")
    values = [(p.entity_type, p.label, decrypt(p.value_encrypted) or "") for p in rows]
    people = [person for dialogue in dialogues for person in dialogue.people]
    result = figures(values, people)
    result.turns = turns
    return result


def _fmt(value: float | None) -> str:
    return "  n/a" if value is None else f"{value:5.2f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--friendsqa-episodes", type=int, default=3)
    parser.add_argument("--lme-sessions", type=int, default=20)
    parser.add_argument("--window", type=int, default=40, help="messages per Observer window")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT))
    import harness

    with harness.scratch_django():
        datasets: list[tuple[str, list[Dialogue]]] = [
            ("abcd", load_abcd()),
            (
                f"friendsqa ({args.friendsqa_episodes} episodes)",
                load_friendsqa(args.friendsqa_episodes),
            ),
        ]
        if args.lme_sessions:
            datasets.append((f"lme_s ({args.lme_sessions} sessions)", load_lme(args.lme_sessions)))
        print(f"Pseudonyms per person (default policy, Observer windows of {args.window})")
        print(
            f"{'dataset':28s} {'turns':>6s} {'people':>6s} {'labelled':>8s} "
            f"{'labels/person':>13s} {'max':>4s} {'other PERSON':>12s} {'LOCATION':>8s}"
        )
        for number, (name, dialogues) in enumerate(datasets):
            result = run(str(number), dialogues, args.window)
            print(
                f"{name:28s} {result.turns:6d} {result.people:6d} {result.labelled:8d} "
                f"{_fmt(result.per_person):>13s} {result.most:4d} {result.other_person:12d} "
                f"{result.location:8d}"
            )


if __name__ == "__main__":
    main()
