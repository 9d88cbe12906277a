"""Users, memberships and the support chat the dashboard tests read."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.conf import settings
from django.utils import timezone

from memory.models import Conversation
from memory.pipeline.observer import observer_run_execute
from memory.pipeline.reflector import reflector_run_execute
from memory.pipeline.scheduling import observer_schedule, reflector_schedule
from memory.services.messages import MessageInput, messages_append
from tenancy.models import Membership
from tests.memory.factories import WorkspaceFactory

PASSWORD = "correct horse battery staple"
ROLES = ["viewer", "reviewer", "compliance", "admin"]
CHAT = [
    (
        "user",
        "Hi, I'm Dana. My Aero 2 headphones arrived broken, order ORD-123456. "
        "I usually prefer phone calls.",
    ),
    ("assistant", "Sorry to hear that. I can refund $129 or send a replacement."),
    ("tool", '{"order_id": "ORD-123456", "status": "delivered", "total": 129.0}'),
    ("user", "Refund please. I prefer email over phone calls."),
    ("assistant", "Done: the refund of $129 will land within 5 business days."),
    ("user", "Great. I'll drop the parcel off next Tuesday."),
]


class UserFactory(factory.django.DjangoModelFactory):
    """A user who signs in with PASSWORD."""

    class Meta:
        model = settings.AUTH_USER_MODEL

    username = factory.Sequence(lambda n: f"person{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    password = factory.django.Password(PASSWORD)


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    workspace = factory.SubFactory(WorkspaceFactory)
    role = "viewer"


def chat(conversation: Conversation, turns: list[tuple[str, str]] = CHAT) -> None:
    began = timezone.now() - timedelta(days=3)
    messages_append(
        conversation=conversation,
        items=[
            MessageInput(
                role=role,
                content=content,
                tool_name="lookup_order" if role == "tool" else "",
                created_at=began + timedelta(minutes=index),
            )
            for index, (role, content) in enumerate(turns)
        ],
    )


def observe(conversation: Conversation) -> None:
    run = observer_schedule(conversation=conversation, trigger="manual")
    observer_run_execute(run_id=run.pk)


def reflect(conversation: Conversation) -> None:
    run = reflector_schedule(conversation=conversation, trigger="manual")
    reflector_run_execute(run_id=run.pk)
