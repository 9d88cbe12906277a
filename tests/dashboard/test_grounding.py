"""A note its sources do not support is marked for a reviewer, and its conversation can
be found with the list's filter."""

from __future__ import annotations

from memory.grounding import grounding_score
from memory.models import Observation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.memory.builders import INVENTED, SOURCES


def test_the_dashboard_marks_the_note_and_filters_its_conversation(login, workspace):
    conversation = conversation_create(workspace=workspace, user_id="dana")
    other = conversation_create(workspace=workspace, user_id="eve")
    [message] = messages_append(
        conversation=conversation, items=[MessageInput(role="user", content=SOURCES[0])]
    )
    weak = Observation.objects.create(
        conversation=conversation,
        text=INVENTED,
        source="observer",
        token_count=12,
        grounding=grounding_score(INVENTED, SOURCES[:1]),
        source_message_ids=[str(message.pk)],
    )
    client = login("viewer")

    page = client.get(f"/conversations/{conversation.pk}/").content.decode()
    item = page[page.index(f'id="obs-{weak.pk}"') :]
    assert "check sources" in item[: item.index("</li>")]
    listed = client.get("/conversations/?grounding=on").content.decode()
    assert str(conversation.pk) in listed and str(other.pk) not in listed
