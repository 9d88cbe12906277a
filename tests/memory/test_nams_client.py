"""The real ``neo4j-agent-memory`` client (NAMS backend, REST) against the live server.

Every call goes through ``MemoryClient`` as a user would configure it, over a socket to
pytest-django's live server, and every answer is checked against the database.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from neo4j_agent_memory import (
    AuthenticationError,
    MemoryClient,
    MemorySettings,
    NamsConfig,
    NotFoundError,
    ValidationError,
)
from pydantic import SecretStr

from core.actors import SYSTEM_ACTOR
from core.paging import PAGE_LIMIT_MAX
from governance.models import AuditEvent
from memory.models import Conversation, Message, Observation, Reflection
from memory.pipeline.on_demand import run_now
from memory.services.conversations import conversation_create
from memory.services.messages import MessageInput, messages_append
from memory.services.observations import observation_create
from memory.tokens import token_count
from tenancy.models import ApiKey
from tenancy.services import api_key_create, api_key_revoke
from tests.memory.factories import ObservationFactory, ReflectionFactory

T = TypeVar("T")
Action = Callable[[Any], Awaitable[T]]


async def _with_short_term(endpoint: str, api_key: str, action: Action[T]) -> T:
    settings = MemorySettings(
        _env_file=None,
        backend="nams",
        # No retries: a 5xx must fail the test at once, not after a backoff.
        nams=NamsConfig(endpoint=endpoint, api_key=SecretStr(api_key), max_retries=0),
    )
    client = MemoryClient(settings)
    try:
        await client.connect()
        return await action(client.short_term)
    finally:
        # Not ``async with``: when connect() fails its auth probe, __aexit__ never runs
        # and the client's HTTP session would stay open, holding a server thread.
        await client.close()


@pytest.fixture
def raw_key(workspace) -> str:
    _, raw_key = api_key_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="nams-client"
    )
    return raw_key


@pytest.fixture
def nams(live_server, raw_key) -> Callable[..., Any]:
    """Run ``action(client.short_term)`` with a connected MemoryClient; return its result."""
    endpoint = f"{live_server.url}/v1"

    def run(action: Action[T], *, api_key: str = raw_key) -> T:
        return asyncio.run(_with_short_term(endpoint, api_key, action))

    return run


def _append(conversation: Conversation, *contents: str, role: str = "user") -> list[Message]:
    return messages_append(
        conversation=conversation,
        items=[MessageInput(role=role, content=content) for content in contents],
    )


# --- conversations and messages --------------------------------------------------------------


def test_it_creates_a_conversation_with_user_id_and_metadata(nams, workspace):
    created = nams(
        lambda memory: memory.create_conversation(
            "support-42", user_identifier="alice", metadata={"channel": "email", "tier": 2}
        )
    )

    row = Conversation.objects.get(pk=created.id)
    assert row.workspace == workspace
    assert row.user_id == "alice"
    assert row.metadata == {"channel": "email", "tier": 2}
    assert created.metadata == {"channel": "email", "tier": 2}
    assert created.created_at == row.created_at


def test_it_adds_a_message_with_its_seq_and_token_count(nams, workspace):
    conversation = conversation_create(workspace=workspace, user_id="alice")
    content = "My order #4417 arrived broken; I'd like a replacement, not a refund."

    first = nams(lambda memory: memory.add_message(str(conversation.id), "user", content))
    second = nams(lambda memory: memory.add_message(str(conversation.id), "assistant", "Sorry!"))

    row = Message.objects.get(pk=first.id)
    assert (row.conversation_id, row.seq, row.role, row.content) == (
        conversation.id,
        1,
        "user",
        content,
    )
    assert row.token_count == token_count(content) > 0
    assert Message.objects.get(pk=second.id).seq == 2
    assert first.conversation_id == conversation.id
    assert first.created_at == row.created_at
    conversation.refresh_from_db()
    assert conversation.last_seq == 2


def test_it_bulk_adds_messages_in_the_order_given(nams, workspace):
    conversation = conversation_create(workspace=workspace)
    _append(conversation, "An earlier message.")
    batch = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: details {i * 7}."}
        for i in range(6)
    ]

    added = nams(lambda memory: memory.bulk_add_messages(str(conversation.id), batch))

    assert [m.content for m in added] == [m["content"] for m in batch]
    rows = list(Message.objects.filter(conversation=conversation, seq__gt=1).order_by("seq"))
    assert [r.seq for r in rows] == [2, 3, 4, 5, 6, 7]
    assert [(r.role, r.content) for r in rows] == [(m["role"], m["content"]) for m in batch]
    assert [r.id for r in rows] == [m.id for m in added]


def test_it_returns_a_conversation_with_its_messages_in_insertion_order(nams, workspace):
    conversation = conversation_create(workspace=workspace, user_id="bob")
    # More than the service's default page of 50: the client asks for the cap of 200.
    _append(conversation, *(f"Message number {n}." for n in range(1, 76)))

    fetched = nams(lambda memory: memory.get_conversation(str(conversation.id)))

    assert fetched.id == conversation.id
    expected = list(Message.objects.filter(conversation=conversation).order_by("seq"))
    assert [m.id for m in fetched.messages] == [m.id for m in expected]
    assert fetched.messages[0].content == "Message number 1."
    assert fetched.messages[-1].content == "Message number 75."


def test_it_pages_past_200_conversations(nams, workspace, other_workspace):
    start = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    total = PAGE_LIMIT_MAX + 37
    # Every third conversation shares its neighbour's updated_at, so paging must break
    # ties on id to neither skip nor repeat one at a page boundary.
    stamps = [start + timedelta(minutes=n - n % 3) for n in range(total)]
    Conversation.objects.bulk_create(
        Conversation(workspace=workspace, user_id=f"user-{n}", created_at=at, updated_at=at)
        for n, at in enumerate(stamps)
    )
    conversation_create(workspace=other_workspace, user_id="not-mine")

    listed = nams(lambda memory: memory.list_conversations(limit=total + 50))

    ids = [c.id for c in listed]
    assert len(ids) == total
    assert len(set(ids)) == total
    expected = list(
        Conversation.objects.filter(workspace=workspace)
        .order_by("-updated_at", "-id")
        .values_list("id", flat=True)
    )
    assert ids == expected


def test_it_stops_paging_at_the_limit_asked_for(nams, workspace):
    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    Conversation.objects.bulk_create(
        Conversation(workspace=workspace, created_at=at, updated_at=at + timedelta(seconds=n))
        for n in range(PAGE_LIMIT_MAX + 20)
    )

    listed = nams(lambda memory: memory.list_conversations(limit=PAGE_LIMIT_MAX + 5))

    newest = Conversation.objects.filter(workspace=workspace).order_by("-updated_at", "-id")
    assert [c.id for c in listed] == [c.id for c in newest[: PAGE_LIMIT_MAX + 5]]


def test_it_lists_only_one_users_conversations(nams, workspace):
    mine = conversation_create(workspace=workspace, user_id="carol")
    conversation_create(workspace=workspace, user_id="dave")

    listed = nams(lambda memory: memory.list_conversations(user_identifier="carol"))

    assert [c.id for c in listed] == [mine.id]


def test_it_finds_messages_case_insensitively(nams, workspace):
    conversation = conversation_create(workspace=workspace)
    hits = _append(
        conversation,
        "The INVOICE for March is wrong.",
        "I never got an invoice for April either.",
    )
    _append(conversation, "Thanks, we will look into the billing.", role="assistant")

    found = nams(lambda memory: memory.search_messages("Invoice", session_id=str(conversation.id)))

    assert {m.id for m in found} == {m.id for m in hits}
    assert {m.content for m in found} == {m.content for m in hits}


# --- memory tiers ------------------------------------------------------------------------------


def test_its_context_text_equals_the_servers_text_format_byte_for_byte(nams, workspace, api):
    conversation = conversation_create(workspace=workspace, user_id="erin")
    observed = _append(conversation, "I'm moving to Berlin on 2026-03-01.", "Noted – café ☕ too.")
    _append(conversation, "Can you update my shipping address?")
    _append(conversation, "Sure, what is it?", role="assistant")
    observation_create(
        conversation=conversation,
        actor=SYSTEM_ACTOR,
        text="User moves to Berlin; shipping address must change.",
        priority="high",
        referenced_at=datetime(2026, 3, 1, tzinfo=UTC),
        source_message_ids=[m.id for m in observed],
    )
    ReflectionFactory(conversation=conversation, text="User relocates often; confirm addresses.")

    text = nams(lambda memory: memory.get_context("", session_id=str(conversation.id)))

    served = api.get(f"/v1/conversations/{conversation.id}/context", {"format": "text"})
    assert served.status_code == 200
    assert text.encode() == served.content
    sections = text.split("\n\n")
    assert [s.splitlines()[0] for s in sections] == [
        "## Reflections",
        "## Observations",
        "## Recent Messages",
    ]
    assert "(event date 2026-03-01, " in sections[1]
    # Observed messages live on in the observation, not among the recent turns.
    assert sections[2].splitlines()[1:] == [
        "[user] Can you update my shipping address?",
        "[assistant] Sure, what is it?",
    ]


def test_it_lists_observations_and_reflections(nams, workspace):
    conversation = conversation_create(workspace=workspace)
    observations = [
        ObservationFactory(conversation=conversation, observed_at=datetime(2026, 1, d, tzinfo=UTC))
        for d in (3, 1, 2)
    ]
    reflection = ReflectionFactory(
        conversation=conversation, source_observation_ids=[str(o.id) for o in observations]
    )

    listed_observations = nams(lambda memory: memory.get_observations(str(conversation.id)))
    listed_reflections = nams(lambda memory: memory.get_reflections(str(conversation.id)))

    oldest_first = Observation.objects.filter(conversation=conversation).order_by("observed_at")
    assert [o["id"] for o in listed_observations] == [str(o.id) for o in oldest_first]
    assert [o["text"] for o in listed_observations] == [o.text for o in oldest_first]
    assert [r["id"] for r in listed_reflections] == [str(reflection.id)]
    assert listed_reflections[0]["sourceObservationIds"] == [str(o.id) for o in observations]
    assert Reflection.objects.get(pk=reflection.id).text == listed_reflections[0]["text"]


def test_its_extraction_status_counts_messages_an_observation_covers(nams, workspace):
    conversation = conversation_create(workspace=workspace)
    messages = _append(conversation, *(f"Fact {n} about the account." for n in range(1, 6)))
    ObservationFactory(conversation=conversation, window_start_seq=1, window_end_seq=3)

    status = nams(lambda memory: memory.get_extraction_status(str(conversation.id)))

    assert status.summary == {"stored": 2, "processing": 0, "completed": 3, "failed": 0}
    by_id = {row["messageId"]: row["status"] for row in status.messages}
    assert by_id == {str(m.id): "completed" if m.seq <= 3 else "stored" for m in messages}
    # Stored below the Observer's threshold is not in flight: nothing for a client to wait
    # out (its wait_for_extraction would otherwise wait for 30k tokens of conversation).
    assert status.pending_count == 0
    assert status.is_complete

    ObservationFactory(conversation=conversation, window_start_seq=4, window_end_seq=5)
    status = nams(lambda memory: memory.get_extraction_status(str(conversation.id)))

    assert status.summary == {"stored": 0, "processing": 0, "completed": 5, "failed": 0}
    assert status.is_complete


def test_wait_for_extraction_returns_once_messages_are_stored_and_waits_out_a_run(
    nams, live_server, raw_key, workspace
):
    conversation = conversation_create(workspace=workspace)
    _append(conversation, "My order ORD-4417 arrived broken.", "Please send a replacement.")
    settings = MemorySettings(
        _env_file=None,
        backend="nams",
        nams=NamsConfig(endpoint=f"{live_server.url}/v1", api_key=SecretStr(raw_key)),
    )

    async def wait(timeout: float) -> bool:
        async with MemoryClient(settings) as client:
            return await client.long_term.wait_for_extraction(
                session_id=str(conversation.id), timeout=timeout, interval=0.1
            )

    # Far below the Observer's threshold: stored, nothing under way.
    assert asyncio.run(wait(timeout=5)) is True

    # A queued Observer run (no worker takes it here) is in flight: the wait times out.
    run = run_now(kind="observe", conversation=conversation, wait=False)
    assert run.is_open
    assert asyncio.run(wait(timeout=0.5)) is False
    status = nams(lambda memory: memory.get_extraction_status(str(conversation.id)))
    assert status.summary["processing"] == 2


def test_clear_session_deletes_the_conversation_and_audits_it(nams, workspace, raw_key):
    conversation = conversation_create(workspace=workspace, user_id="frank")
    _append(conversation, "Please forget me.")
    ObservationFactory(conversation=conversation)

    nams(lambda memory: memory.clear_session(str(conversation.id)))

    assert not Conversation.objects.filter(pk=conversation.id).exists()
    assert not Message.objects.filter(conversation_id=conversation.id).exists()
    assert not Observation.objects.filter(conversation_id=conversation.id).exists()
    event = AuditEvent.objects.get(action="conversation.delete", target_id=str(conversation.id))
    assert event.workspace == workspace
    assert event.actor_type == AuditEvent.ActorType.API_KEY
    assert event.actor_id == str(ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(raw_key)).pk)
    assert event.before["counts"] == {
        "messages": 1,
        "observations": 1,
        "reflections": 0,
        "reasoningSteps": 0,
        "toolCalls": 0,
    }


# --- failures ---------------------------------------------------------------------------------


def test_a_wrong_key_raises_the_clients_authentication_error(nams, workspace):
    with pytest.raises(AuthenticationError, match="401"):
        nams(lambda memory: memory.list_conversations(), api_key="md_not-a-key-we-issued")


def test_a_revoked_key_raises_the_clients_authentication_error(nams, workspace, raw_key):
    api_key = ApiKey.objects.get(key_hash=ApiKey.hash_raw_key(raw_key))
    api_key_revoke(api_key=api_key, actor=SYSTEM_ACTOR)

    with pytest.raises(AuthenticationError, match="This API key was revoked"):
        nams(lambda memory: memory.list_conversations())


def test_an_unknown_conversation_raises_the_clients_not_found_error(nams, workspace):
    with pytest.raises(NotFoundError, match="Conversation not found in this workspace"):
        nams(lambda memory: memory.get_conversation(str(uuid.uuid4())))


def test_another_workspaces_conversation_is_not_found(nams, other_workspace):
    theirs = conversation_create(workspace=other_workspace, user_id="gina")
    _append(theirs, "Private to globex.")

    with pytest.raises(NotFoundError):
        nams(lambda memory: memory.add_message(str(theirs.id), "user", "Hello?"))
    # A delete is idempotent, so clearing an id this workspace does not hold succeeds
    # as for a conversation already deleted: it must not touch the other workspace's.
    nams(lambda memory: memory.clear_session(str(theirs.id)))

    assert Message.objects.filter(conversation=theirs).count() == 1


def test_a_limit_out_of_range_surfaces_invalid_limit(nams, workspace):
    conversation = conversation_create(workspace=workspace)
    _append(conversation, "Something to search for.")

    with pytest.raises(ValidationError) as search_error:
        nams(
            lambda memory: memory.search_messages(
                "search", session_id=str(conversation.id), limit=PAGE_LIMIT_MAX + 1
            )
        )
    with pytest.raises(ValidationError) as list_error:
        nams(lambda memory: memory.get_conversation(str(conversation.id), limit=0))

    for raised in (search_error.value, list_error.value):
        assert raised.details["code"] == "invalid_limit"
        assert raised.details["field"] == "limit"
        # The client's exception carries the sentence, which names the parameter.
        assert raised.details["error"] == raised.details["message"]
        assert raised.details["error"] in str(raised) and "limit" in str(raised)
