"""An Observer run keeps the engine's current task and suggested response: no raw value
the redaction policy covers may stay in that row, whichever way the policy observes."""

from __future__ import annotations

import pytest

from governance.models import RedactionPolicy
from memory.models import Conversation, ObserverRun
from memory.pipeline.on_demand import run_now
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append

CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize("redact_before_observation", [True, False])
def test_a_card_number_in_a_message_never_reaches_the_run_row(
    api, workspace, redact_before_observation
):
    RedactionPolicy.objects.update_or_create(
        workspace=workspace, defaults={"redact_before_observation": redact_before_observation}
    )
    conversation = conversation_create(workspace=workspace, user_id="dana")
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(
                role="user",
                content=f"Please charge my card {CARD} and update the billing address.",
            )
        ],
    )
    conversation = Conversation.objects.select_related("workspace").get(pk=conversation.pk)

    run = run_now(kind="observe", conversation=conversation, wait=True)

    row = ObserverRun.objects.values().get(pk=run.pk)
    assert row["status"] == "succeeded"
    assert row["current_task"]  # the engine said something, and it was kept
    assert "CREDIT_CARD" in row["current_task"]
    assert not any(CARD in str(value) for value in row.values())
    body = api.get(f"/v1/runs/{run.pk}").json()
    assert CARD not in str(body)
