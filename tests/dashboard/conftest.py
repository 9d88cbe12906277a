from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from memory.models import Conversation
from memory.services.conversations import conversation_create
from tests.dashboard.factories import chat, observe


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
