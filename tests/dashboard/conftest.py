from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from memory.models import Conversation
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from tests.dashboard.factories import chat, observe
from tests.memory.factories import ObservationFactory, ReflectionFactory

# What scanned_conversation's message holds (tests assert these are masked).
CARD = "4111 1111 1111 1111"
EMAIL = "dana.whitfield@example.com"


@pytest.fixture
def login(member) -> Callable[..., Client]:
    """A test client signed in as a new user with ``role`` (CSRF checks off, as Django's
    test client has them; ``csrf_client`` turns them on)."""

    def make(role: str | None, **kwargs: object) -> Client:
        client = Client()
        user = member(role, **kwargs)
        client.force_login(user)
        client.user = user
        return client

    return make


@pytest.fixture
def csrf_client(member) -> Callable[[str], Client]:
    def make(role: str) -> Client:
        client = Client(enforce_csrf_checks=True)
        client.force_login(member(role))
        return client

    return make


@pytest.fixture
def observed_conversation(workspace) -> Conversation:
    """A support chat the Observer has read: messages and active observations."""
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    return conversation


@pytest.fixture
def foreign_conversation(other_workspace) -> Conversation:
    conversation = conversation_create(
        workspace=other_workspace, user_id="eve", title="Globex chat"
    )
    chat(conversation)
    observe(conversation)
    return conversation


@pytest.fixture
def searchable_conversation(workspace, foreign_conversation) -> Conversation:
    """A word (zephyr) in each tier of one acme conversation, and in globex's."""
    conversation = conversation_create(workspace=workspace, user_id="ana/b c?", title="Parcel")
    messages_append(
        conversation=conversation,
        items=[MessageInput(role="user", content="The zephyr kettle leaks.")],
    )
    ObservationFactory(
        conversation=conversation, text="User's zephyr kettle leaks", priority="high"
    )
    ReflectionFactory(conversation=conversation, text="Zephyr kettle owner, wants a refund")
    # The same word in another workspace must not be found.
    messages_append(
        conversation=foreign_conversation,
        items=[MessageInput(role="user", content="zephyr elsewhere")],
    )
    ObservationFactory(conversation=foreign_conversation, text="zephyr in globex")
    return conversation


@pytest.fixture
def scanned_conversation(workspace, eager_tasks) -> Conversation:
    """A message with a card number and an e-mail address (CARD, EMAIL) the scan has read."""
    conversation = conversation_create(workspace=workspace, user_id="dana", title="Card")
    with eager_tasks():
        messages_append(
            conversation=conversation,
            items=[MessageInput(role="user", content=f"My card is {CARD}, mail {EMAIL}.")],
        )
    return Conversation.objects.get(pk=conversation.pk)
