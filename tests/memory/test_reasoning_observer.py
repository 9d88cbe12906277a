"""Tool calls recorded over the reasoning API reach the Observer as tool output, at their
place among the messages, through the redaction gate the messages go through."""

from __future__ import annotations

import json

from core.actors import SYSTEM_ACTOR
from memory.models import Observation, ObserverRun
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.reasoning import reasoning_step_record, tool_call_record
from tests.dashboard.factories import observe
from tests.governance.builders import set_policy

ORDER = {"order_id": "ORD-7", "status": "delivered", "carrier": "DHL"}


def _say(conversation, role: str, content: str):
    [message] = messages_append(
        conversation=conversation, items=[MessageInput(role=role, content=content)]
    )
    return message


def _call(conversation, workspace, output: str, name: str = "order_status"):
    step = reasoning_step_record(
        conversation=conversation, actor=SYSTEM_ACTOR, reasoning="Check the order"
    )
    return tool_call_record(
        conversation=None,
        workspace=workspace,
        actor=SYSTEM_ACTOR,
        tool_name=name,
        step_id=step.pk,
        input=json.dumps({"order_id": "ORD-7"}),
        output=output,
    )


def test_the_extractive_observer_reads_a_tool_call_as_tool_output(workspace):
    set_policy(workspace, redact_before_observation=False)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    _say(conversation, "user", "Where is my order ORD-7?")
    call = _call(conversation, workspace, json.dumps(ORDER))
    answer = _say(conversation, "assistant", "It was delivered yesterday.")

    observe(conversation)

    [note] = Observation.objects.filter(
        conversation=conversation, text__startswith="Tool order_status:"
    )
    assert "tool" in note.tags
    assert note.text == "Tool order_status: order ORD-7, status delivered, DHL"
    # Sourced to the message the call came before (and to the request it carried out,
    # which the engine folds into the tool line); the run counts it as read.
    assert note.source_message_ids[-1] == str(answer.pk)
    assert note.observed_at == answer.created_at
    run = ObserverRun.objects.get(conversation=conversation)
    assert run.items_in == 3
    assert call.after_seq == 1


def test_a_tool_call_after_the_last_message_waits_for_the_next_window(workspace):
    set_policy(workspace, redact_before_observation=False)
    conversation = conversation_create(workspace=workspace, user_id="dana")
    _say(conversation, "user", "Where is my order ORD-7?")
    _call(conversation, workspace, json.dumps(ORDER))

    observe(conversation)
    assert not Observation.objects.filter(
        conversation=conversation, text__startswith="Tool order_status"
    ).exists()

    _say(conversation, "assistant", "It was delivered yesterday.")
    observe(conversation)
    assert Observation.objects.filter(
        conversation=conversation, text__startswith="Tool order_status"
    ).exists()


def test_the_observer_reads_tool_output_redacted_when_the_policy_says_so(workspace):
    email = "dana.pierce@example.com"
    conversation = conversation_create(workspace=workspace, user_id="dana")
    _say(conversation, "user", "Please check my account.")
    call = _call(
        conversation, workspace, f"Customer record: email {email}, plan Gold.", name="crm_lookup"
    )
    _say(conversation, "assistant", "Your plan is Gold.")

    observe(conversation)  # the default policy redacts before observation

    texts = list(
        Observation.objects.filter(conversation=conversation).values_list("text", flat=True)
    )
    assert any(t.startswith("Tool crm_lookup:") for t in texts)
    assert not any(email in t for t in texts)
    call.refresh_from_db()
    assert email in call.output  # stored as sent: the gate is in front of the Observer
