from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from dashboard.models import Membership
from memory import pipeline
from memory.models import Conversation, Message, Workspace
from memory.services import MessageInput, conversation_create, messages_append
from tests.memory.factories import ObservationFactory, ReflectionFactory

PASSWORD = "correct horse battery staple"
ROLES = ["viewer", "reviewer", "compliance", "admin"]
CHAT = [
    ("user", "Hi, I'm Dana. My Aero 2 headphones arrived broken, order ORD-123456."),
    ("assistant", "Sorry to hear that. I can refund $129 or send a replacement."),
    ("tool", '{"order_id": "ORD-123456", "status": "delivered", "total": 129.0}'),
    ("user", "Refund please. I prefer email over phone calls."),
    ("assistant", "Done: the refund of $129 will land within 5 business days."),
    ("user", "Great. I'll drop the parcel off next Tuesday."),
]
_usernames = itertools.count(1)


def make_user(*, superuser: bool = False):  # type: ignore[no-untyped-def]
    username = f"person{next(_usernames)}"
    model = get_user_model()
    if superuser:
        return model.objects.create_superuser(username, f"{username}@example.com", PASSWORD)
    return model.objects.create_user(username, f"{username}@example.com", PASSWORD)


@pytest.fixture
def member(db, workspace) -> Callable[..., object]:
    """A user with ``role`` in ``workspace`` (the acme workspace unless told)."""

    def make(role: str | None, *, in_workspace: Workspace | None = None):  # type: ignore[no-untyped-def]
        user = make_user()
        if role:
            Membership.objects.create(user=user, workspace=in_workspace or workspace, role=role)
        return user

    return make


@pytest.fixture
def login(member) -> Callable[..., Client]:
    """A test client signed in as a new user with ``role`` (CSRF checks off, as Django's
    test client has them; ``csrf_client`` turns them on)."""

    def make(role: str | None, **kwargs: object) -> Client:
        client = Client()
        user = member(role, **kwargs)
        client.force_login(user)
        client.user = user  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def csrf_client(member) -> Callable[[str], Client]:
    def make(role: str) -> Client:
        client = Client(enforce_csrf_checks=True)
        client.force_login(member(role))
        return client

    return make


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
    run = pipeline.observer_schedule(conversation=conversation, trigger="manual")
    pipeline.observer_run_execute(run_id=run.pk)


def reflect(conversation: Conversation) -> None:
    run = pipeline.reflector_schedule(conversation=conversation, trigger="manual")
    pipeline.reflector_run_execute(run_id=run.pk)


@pytest.fixture
def conversation(workspace) -> Conversation:
    """A support chat the Observer has read: messages and active observations."""
    conversation = conversation_create(
        workspace=workspace, user_id="dana", title="Broken headphones"
    )
    chat(conversation)
    observe(conversation)
    return conversation


@pytest.fixture
def reflected(workspace) -> Conversation:
    """A chat observed and then reflected: all three tiers."""
    conversation = conversation_create(workspace=workspace, user_id="tomas", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    return conversation


@pytest.fixture
def long_conversation(workspace) -> Conversation:
    """130 messages, one observation per message, one reflection over the first ten:
    the oldest sources are outside what the page first loads."""
    conversation = conversation_create(workspace=workspace, user_id="long", title="Long one")
    began = timezone.now() - timedelta(days=5)
    messages = Message.objects.bulk_create(
        Message(
            conversation=conversation,
            seq=seq,
            role="user" if seq % 2 else "assistant",
            content=f"Message {seq} about order ORD-{seq:04}.",
            token_count=8,
            created_at=began + timedelta(minutes=seq),
        )
        for seq in range(1, 131)
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=130)
    observations = [
        ObservationFactory(
            conversation=conversation,
            text=f"Note about message {m.seq}.",
            observed_at=m.created_at,
            window_start_seq=m.seq,
            window_end_seq=m.seq,
            source_message_ids=[str(m.pk)],
        )
        for m in messages
    ]
    ReflectionFactory(
        conversation=conversation,
        text="The first ten messages were about orders.",
        source_observation_ids=[str(o.pk) for o in observations[:10]],
    )
    return conversation


@pytest.fixture
def foreign(other_workspace) -> Conversation:
    conversation = conversation_create(
        workspace=other_workspace, user_id="eve", title="Globex chat"
    )
    chat(conversation)
    observe(conversation)
    return conversation


# --- screenshots of the browser tests ------------------------------------------------------------

SCREENSHOT_DIR = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
_saved: list[Path] = []


@pytest.fixture
def screenshot() -> Callable[[object, str], Path]:
    """Save a full-page screenshot of a Playwright page as <name>.png; the folder is
    printed at the end of the run."""

    def save(page: object, name: str) -> Path:
        SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOT_DIR / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
        _saved.append(path)
        return path

    return save


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if _saved:
        terminalreporter.write_sep("-", "dashboard screenshots")
        terminalreporter.write_line(f"{len(_saved)} screenshots saved in {SCREENSHOT_DIR}/")
        for path in _saved:
            terminalreporter.write_line(f"  {path.name}")
