from __future__ import annotations

import pytest

from memory.models import Conversation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat


@pytest.fixture
def dana_conversation(workspace) -> Conversation:
    """End user dana's support chat, not yet observed."""
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Refund")
    chat(conversation)
    return conversation


@pytest.fixture
def quiet_conversation(workspace) -> Conversation:
    """A conversation with no messages: its only findings are the ones a test makes."""
    return conversation_create(workspace=workspace, user_id="dana", title="Call notes")
