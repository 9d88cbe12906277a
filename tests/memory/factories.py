from __future__ import annotations

import factory

from memory.models import Conversation, Message, Observation, Reflection
from memory.tokens import token_count
from tenancy.models import Workspace


class WorkspaceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workspace

    name = factory.Sequence(lambda n: f"workspace-{n}")


class ConversationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Conversation

    workspace = factory.SubFactory(WorkspaceFactory)
    user_id = factory.Sequence(lambda n: f"user-{n}")


class ObservationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Observation

    conversation = factory.SubFactory(ConversationFactory)
    text = factory.Sequence(lambda n: f"User mentioned fact number {n}.")
    source = "observer"
    token_count = factory.LazyAttribute(lambda o: token_count(o.text))


class ReflectionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Reflection

    conversation = factory.SubFactory(ConversationFactory)
    text = factory.Sequence(lambda n: f"Reflection {n}: the user prefers email.")
    token_count = factory.LazyAttribute(lambda o: token_count(o.text))


__all__ = ["ConversationFactory", "Message", "ObservationFactory", "ReflectionFactory"]
