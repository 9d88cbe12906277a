from __future__ import annotations

import factory

from governance.models import LegalHold, RedactionFinding
from tests.memory.factories import ConversationFactory, WorkspaceFactory


class RedactionFindingFactory(factory.django.DjangoModelFactory):
    """An email address redacted automatically from a message of the conversation.
    ``target_id`` defaults to the conversation's id; pass the message's when it matters."""

    class Meta:
        model = RedactionFinding

    conversation = factory.SubFactory(ConversationFactory)
    workspace = factory.SelfAttribute("conversation.workspace")
    target_type = RedactionFinding.TargetType.MESSAGE
    target_id = factory.SelfAttribute("conversation.pk")
    entity_type = "EMAIL_ADDRESS"
    start = 0
    end = 5
    score = 0.9
    operator = "replace"
    status = RedactionFinding.Status.APPLIED
    policy_version = 1


class LegalHoldFactory(factory.django.DjangoModelFactory):
    """A hold on one conversation; pass ``conversation=None, end_user_id=...`` for a hold
    on every conversation of an end user. Built directly, without the audit event that
    ``legal_hold_place`` writes: use the service when the test is about holds."""

    class Meta:
        model = LegalHold

    conversation = factory.SubFactory(ConversationFactory)
    workspace = factory.LazyAttribute(
        lambda hold: hold.conversation.workspace if hold.conversation else WorkspaceFactory()
    )
    reason = "litigation"
    placed_by = "compliance@example.com"
