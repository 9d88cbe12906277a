"""End to end on real customer-service dialogues (ABCD, ../shared/data): ingested over
the API (``action`` turns as tool messages), observed and reflected; no customer's
personal data reaches a reflection, and every redaction is on record.

The workspace adds two recognizers of its own, as a support team would: Presidio has no
notion of this shop's order ids (ten digits: certain, so they win over Presidio's own
reading of such a number as an NHS number) or usernames (letters then digits: uncertain
alone, certain next to "username"). The
names, e-mail addresses and phone numbers are left to the engine's defaults.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from governance.models import RedactionFinding
from memory.engines.base import SourceMessage
from memory.engines.extractive import ExtractiveEngine
from memory.models import Observation, Reflection
from tests.governance.evaluation_data import data_file

ROLES = {"agent": "assistant", "customer": "user", "action": "tool"}
SHOP_RECOGNIZERS = [
    {
        "name": "order-id",
        "entity": "ORDER_ID",
        "pattern": r"\b\d{10}\b",
        "score": 1.0,
    },
    {
        "name": "username",
        "entity": "USERNAME",
        "pattern": r"\b[a-z]{3,}\d{2,}\b",
        "score": 0.5,
        "context": ["username", "account", "login"],
    },
]


@pytest.fixture(scope="module")
def dialogues() -> list[dict]:
    return json.loads(data_file("conversations/abcd_sample.json").read_text())


def _personal_values(dialogue: dict) -> dict[str, str]:
    personal = dialogue["scenario"]["personal"]
    values = {
        kind: personal[kind]
        for kind in ("customer_name", "email", "phone", "username")
        if personal.get(kind)
    }
    order_id = dialogue["scenario"]["order"].get("order_id")
    if order_id:
        values["order_id"] = order_id
    return values


def _observed_as_written(dialogue: dict) -> str:
    """What the Observer writes of the dialogue read unredacted, lower-cased."""
    said_at = datetime(2024, 1, 1, tzinfo=UTC)
    messages = [
        SourceMessage(
            id=f"m{seq}",
            seq=seq,
            role=ROLES[speaker],
            content=text,
            created_at=said_at,
            tool_name="crm" if speaker == "action" else "",
        )
        for seq, (speaker, text) in enumerate(dialogue["original"], start=1)
    ]
    output = ExtractiveEngine().observe(messages, previous_observations=[], now=said_at)
    return " ".join(o.text for o in output.observations).lower()


def _said(dialogue: dict, value: str) -> bool:
    return any(value.lower() in text.lower() for _, text in dialogue["original"])


# Where the values are caught: by default in the messages, before the Observer reads
# them, and what the scan misses in the observations, by the gate in front of the
# Reflector; with redaction before observation turned off, by that gate alone.
CAUGHT_IN = {True: ["message", "observation"], False: ["observation"]}
# Values known to get through, kept honest: each must still get through, so the list
# shrinks as detection improves. Dialogue 9489's customer answers with her bare name,
# "Alessandro Phoenix": the small spaCy pipeline reads "Phoenix" as a place and nothing
# names "Alessandro", so the scan leaves it in what the Observer reads. Without
# redaction before observation the observation says "User said Alessandro Phoenix",
# whose naming cue the reflection gate catches. Name recall is the detectors' part.
# The same customer's bare username ("Aphoenix939", typed alone) got through without
# redaction before observation while the Observer kept it as "User said Aphoenix939"; a
# login name is no fact about the user, and the Observer keeps none now.
KNOWN_MISSES: dict[bool, set[tuple[int, str]]] = {True: set(), False: set()}


@pytest.mark.parametrize("before_observation", [True, False], ids=["default", "at-reflection"])
def test_no_personal_data_from_a_dialogue_reaches_a_reflection(
    api, make_client, workspace, dialogues, before_observation
):
    admin = make_client(workspace, scope="admin")
    policy = admin.patch(
        "/v1/redaction/policy",
        {
            "customRecognizers": SHOP_RECOGNIZERS,
            "redactBeforeObservation": before_observation,
        },
        format="json",
    )
    assert policy.status_code == 200, policy.json()

    conversations = []
    for dialogue in dialogues:
        conversation_id = api.post(
            "/v1/conversations", {"userId": f"abcd-{dialogue['convo_id']}"}, format="json"
        ).json()["id"]
        messages = [
            {
                "role": ROLES[speaker],
                "content": text,
                **({"toolName": "crm"} if speaker == "action" else {}),
            }
            for speaker, text in dialogue["original"]
        ]
        added = api.post(
            f"/v1/conversations/{conversation_id}/messages/bulk",
            {"messages": messages},
            format="json",
        )
        assert added.status_code == 201
        for step in ("observe", "reflect"):
            run = api.post(f"/v1/conversations/{conversation_id}/{step}?wait=true")
            assert run.status_code == 200 and run.json()["status"] == "succeeded", run.json()
        conversations.append((dialogue, conversation_id))

    # What the Reflector read, behind its gate: the observations it left as they are and
    # the reflections it wrote.
    reflections = " ".join(
        [
            *Reflection.objects.values_list("text", flat=True),
            *Observation.objects.values_list("text", flat=True),
        ]
    ).lower()
    assert reflections
    checked = 0
    for dialogue, conversation_id in conversations:
        values = _personal_values(dialogue)
        # Each part of a name identifies too ("Minh"), not only the full name.
        name_parts = values.get("customer_name", "").split()
        for kind, value in [*values.items(), *(("name part", p) for p in name_parts)]:
            if not _said(dialogue, value):
                continue  # (the third dialogue never says its customer's name or phone)
            checked += 1
            leaked = bool(re.search(rf"\b{re.escape(value.lower())}\b", reflections))
            if (dialogue["convo_id"], value.lower()) in KNOWN_MISSES[before_observation]:
                assert leaked, f"{value!r} is caught now: remove it from KNOWN_MISSES"
                continue
            assert not leaked, (
                f"the customer's {kind} of dialogue {dialogue['convo_id']} reached a reflection"
            )
        findings = set(
            RedactionFinding.objects.filter(
                conversation_id=conversation_id, target_type__in=CAUGHT_IN[before_observation]
            ).values_list("entity_type", flat=True)
        )
        expected = {
            "customer_name": "PERSON",
            "email": "EMAIL_ADDRESS",
            "phone": "PHONE_NUMBER",
            "username": "USERNAME",
            "order_id": "ORDER_ID",
        }
        # Scanned before observation, every value said is caught in the messages. Scanned
        # at reflection, only the values a note holds reach the gate: those the Observer
        # writes (it keeps no login detail given to prove who one is, for one).
        noted = "" if before_observation else _observed_as_written(dialogue)
        for kind, value in values.items():
            # As a value of its own: a username is not held by the e-mail address it opens.
            held = re.search(rf"(?<![\w@.]){re.escape(value.lower())}(?![\w@])", noted)
            reaches_the_gate = before_observation or held is not None
            if _said(dialogue, value) and reaches_the_gate:
                assert expected[kind] in findings, (kind, dialogue["convo_id"], findings)
    assert checked >= 10
