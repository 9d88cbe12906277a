from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from memory.engines.base import Engine
from memory.models import Conversation, Message, Observation
from memory.services.conversations import conversation_create
from tenancy.models import Workspace
from tenancy.services import api_key_create, workspace_get_or_create
from tests.dashboard.factories import MembershipFactory, UserFactory, chat, observe, reflect
from tests.memory.celery_workers import Broker, publishing_to
from tests.memory.factories import ObservationFactory, ReflectionFactory

E2E = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(config, items) -> None:
    """Slow tests run in one of CI's two runs, so CI does not pay for them twice:

    - tests marked ``once`` (about processes and services rather than the database
      engine) in the PostgreSQL run;
    - the browser tests (``tests/e2e/``) in the SQLite run: the embedded default that
      ``make run`` serves, where they share the two cores (``-n 2``). The dashboard's
      views are also tested without a browser (``tests/dashboard/``) in both runs."""
    from django.conf import settings

    on_sqlite = settings.DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3"
    if on_sqlite:
        skip = pytest.mark.skip(reason="slow: runs once, in the PostgreSQL run (DATABASE_URL)")
        wanted = [item for item in items if item.get_closest_marker("once")]
    else:
        skip = pytest.mark.skip(reason="browser: runs once, in the SQLite run (no DATABASE_URL)")
        wanted = [item for item in items if E2E in Path(str(item.path)).parents]
    for item in wanted:
        item.add_marker(skip)


@pytest.fixture(autouse=True)
def audit_checkpoint_path(settings, tmp_path, monkeypatch) -> Path:
    """Each test's audit checkpoints go to a file of its own, outside the checkout; a
    process the test starts (a Celery worker) writes to the same file."""
    path = tmp_path / "audit-checkpoints.jsonl"
    settings.MEMDESK_AUDIT_CHECKPOINT_PATH = path
    monkeypatch.setenv("MEMDESK_AUDIT_CHECKPOINT_PATH", str(path))
    return path


@pytest.fixture
def workspace(db) -> Workspace:
    return workspace_get_or_create(name="acme")


@pytest.fixture
def other_workspace(db) -> Workspace:
    return workspace_get_or_create(name="globex")


@pytest.fixture
def make_client(db) -> Callable[[Workspace], APIClient]:
    """An API client authenticated with a fresh key of the given workspace."""

    def make(workspace: Workspace, *, scope: str = "agent") -> APIClient:
        _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope=scope)
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
        client.raw_key = raw_key
        return client

    return make


@pytest.fixture
def api(make_client, workspace) -> APIClient:
    return make_client(workspace)


@pytest.fixture
def curator_api(make_client, workspace) -> APIClient:
    return make_client(workspace, scope="curator")


@pytest.fixture
def compliance_api(make_client, workspace) -> APIClient:
    return make_client(workspace, scope="compliance")


@pytest.fixture
def admin_api(make_client, workspace) -> APIClient:
    return make_client(workspace, scope="admin")


@pytest.fixture
def other_api(make_client, other_workspace) -> APIClient:
    return make_client(other_workspace)


@pytest.fixture
def conversation(workspace) -> Conversation:
    """An empty conversation of the acme workspace."""
    return conversation_create(workspace=workspace, user_id="dana")


@pytest.fixture
def conversation_id(conversation) -> str:
    """``conversation``'s id as the API spells it."""
    return str(conversation.pk)


@pytest.fixture
def reflected_conversation(workspace) -> Conversation:
    """A support chat observed and then reflected by the real pipeline: all three tiers."""
    conversation = conversation_create(workspace=workspace, user_id="tomas", title="Refund")
    chat(conversation)
    observe(conversation)
    reflect(conversation)
    return conversation


@pytest.fixture
def reflected_observation(reflected_conversation) -> Observation:
    """``reflected_conversation``'s observation of the e-mail preference: a reflection
    was made from it."""
    return Observation.objects.get(conversation=reflected_conversation, text__contains="email")


@pytest.fixture
def eager_tasks(
    monkeypatch, django_capture_on_commit_callbacks
) -> Callable[[], AbstractContextManager[object]]:
    """``with eager_tasks(): ...``: the Celery tasks that writes inside the block send
    after their commit run at its end, in this process, as a worker would run them
    (``Task.apply``: the task's own code, retries included)."""
    from celery import current_app

    import governance.tasks  # noqa: F401 - registers the tasks
    import memory.tasks  # noqa: F401 - registers the tasks
    from core import queue

    def send(name: str, args: object = (), **_: object) -> object:
        return current_app.tasks[name].apply(args=args)

    monkeypatch.setattr(queue.current_app, "send_task", send)
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def ledger_buffered(monkeypatch):
    """Context reads recorded as a web worker records them: kept in its buffer for a batch
    written after the responses (governance/ledger/buffer.py), not in the request. The
    buffer is dropped unwritten at the end."""
    from governance.ledger import buffer

    ledger = buffer.LedgerBuffer(window_seconds=3600)
    monkeypatch.setattr(buffer, "_buffer", ledger)
    yield ledger
    with ledger._lock:
        ledger._rows.clear()
        ledger._manifests.clear()
    ledger.stop(timeout=1.0)


@pytest.fixture
def sent_tasks(monkeypatch) -> list[tuple[str, list]]:
    """The tasks sent to the broker, by name and arguments (none of them runs)."""
    from core import queue

    calls: list[tuple[str, list]] = []
    monkeypatch.setattr(
        queue.current_app, "send_task", lambda name, args=(), **_: calls.append((name, args))
    )
    return calls


@pytest.fixture
def fake_engine(monkeypatch) -> Callable[[Engine], Engine]:
    """``fake_engine(engine)``: every Observer and Reflector run uses ``engine``, whatever
    its workspace is set to, until the test ends; returns the engine."""
    from memory.pipeline import engines

    def install(engine: Engine) -> Engine:
        monkeypatch.setattr(engines, "engine_for_workspace", lambda workspace: engine)
        return engine

    return install


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    """A queue of its own for real Celery workers (tests/memory/celery_workers.py); the
    tasks this process sends go to it."""
    broker = Broker(tmp_path)
    with (
        publishing_to(broker.url, broker.transport_options, broker.queue, broker.routes),
        override_settings(
            MEMDESK_SCAN_QUEUE=broker.scan_queue, MEMDESK_GOVERNANCE_QUEUE=broker.governance_queue
        ),
    ):
        yield broker


@pytest.fixture
def requires_postgres(db) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: run with DATABASE_URL=postgres://... (CI does)")


# --- shared by the dashboard tests and the browser tests (tests/e2e) ------------------------


@pytest.fixture
def member(db, workspace) -> Callable[..., AbstractBaseUser]:
    """A new user with ``role`` in ``workspace`` (the acme workspace unless told), or in
    no workspace with ``role=None``. Signs in with tests.dashboard.factories.PASSWORD."""

    def make(role: str | None, *, in_workspace: Workspace | None = None) -> AbstractBaseUser:
        if role is None:
            return UserFactory()
        return MembershipFactory(workspace=in_workspace or workspace, role=role).user

    return make


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
