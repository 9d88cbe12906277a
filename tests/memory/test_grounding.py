"""The grounding score: how much of a note its sources support, and the flag a person
sees when a note names people or numbers its sources never mention."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memory.grounding import grounding_score
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.scheduling import observer_schedule
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.builders import INVENTED, SOURCES
from tests.memory.fake_openai import completion


@pytest.mark.parametrize(
    "note",
    [
        "User needs the refund for order 4521 before next Tuesday",
        "User prefers e-mail over phone calls",  # "prefers" is framing, "calls" a plural
        "User's refund for order 4521 has not arrived (asked on Feb 10, 2026)",
    ],
)
def test_a_faithful_note_is_well_grounded(note):
    assert grounding_score(note, SOURCES) >= 0.75


@pytest.mark.parametrize(
    "note",
    [
        "User Maria Gonzalez needs a refund of 500 dollars for order 4521",
        "User needs the refund for order 9981 by Friday",
        "Refund of $250 promised by Alex for order 4521",
    ],
)
def test_a_note_with_an_invented_name_or_number_scores_below_the_threshold(note):
    assert grounding_score(note, SOURCES) < 0.6


def test_numbers_match_by_value_and_a_note_without_claims_scores_one():
    assert grounding_score("User ordered five boxes for 1,200 dollars", ["5 boxes, $1200"]) > 0.6
    assert grounding_score("User ordered 6 boxes", ["five boxes"]) < 0.6
    assert grounding_score("User said so", ["anything"]) == 1.0


FAITHFUL = "User needs the refund for order 4521 before next Tuesday"


@override_settings(MEMDESK_OPENAI_MAX_RETRIES=0)
def test_the_openai_engines_invented_note_is_flagged_and_its_faithful_one_is_not(
    api, workspace, fake_openai
):
    workspace.engine = "openai"
    workspace.llm_base_url = fake_openai.base_url
    workspace.save()
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=c) for c in SOURCES]
    )
    fake_openai.enqueue(
        completion(
            f"- [high] (unknown) {FAITHFUL} {{refs: 1}}\n"
            f"- [medium] (unknown) {INVENTED} {{refs: 2}}\n"
        )
    )

    run = observer_schedule(conversation=conversation, trigger="manual")
    assert observer_run_execute(run_id=run.pk).run.status == "succeeded"

    body = api.get(f"/v1/conversations/{conversation.pk}/observations").json()
    flags = {o["text"]: (o["groundingFlagged"], o["grounding"]) for o in body["observations"]}
    assert flags[FAITHFUL][0] is False and flags[FAITHFUL][1] >= 0.75
    assert flags[INVENTED][0] is True and flags[INVENTED][1] < 0.6
    metrics = api.get(f"/v1/metrics?conversationId={conversation.pk}").json()
    assert metrics["weaklyGrounded"]["observations"] == 1
