"""Soak: 50 agents write at once for a bounded time while a reviewer edits memory and a
retention sweep deletes expired messages from the same conversations. Afterwards every
accepted write is stored exactly once, sequence numbers are gapless per conversation,
every edit is counted in its observation's version, and the sweep removed exactly what
had expired. PostgreSQL only (SQLite allows one writer at a time)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Max, Min
from django.utils import timezone
from rest_framework.test import APIClient

from core.actors import SYSTEM_ACTOR
from governance.retention.plan import retention_sweep_request
from governance.retention.policies import retention_policy_create
from governance.retention.sweep import retention_sweep
from memory.models import Message, Observation
from memory.services.conversations import conversation_create
from tenancy.services import api_key_create
from tests.memory.factories import ObservationFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.soak, pytest.mark.once]

AGENTS = 50
CONVERSATIONS = 10  # five agents to a conversation: their writes race for each seq
WRITE_SECONDS = 20
EXPIRED_EACH = 30  # messages 60 days old in each conversation, for the sweep


def _client(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


def test_fifty_agents_a_reviewer_and_a_retention_sweep_reconcile_exactly(
    requires_postgres, workspace
):
    workspace.observer_threshold = 10**6  # writes only: the pipeline has tests of its own
    workspace.save()
    _, agent_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope="agent")
    _, curator_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, scope="curator")
    conversations = [conversation_create(workspace=workspace) for _ in range(CONVERSATIONS)]
    old = timezone.now() - timedelta(days=60)
    for conversation in conversations:
        Message.objects.bulk_create(
            Message(
                conversation=conversation,
                seq=seq,
                role="user",
                content=f"Old message {seq}.",
                token_count=4,
                created_at=old + timedelta(minutes=seq),
            )
            for seq in range(1, EXPIRED_EACH + 1)
        )
        conversation.last_seq = EXPIRED_EACH
        conversation.save(update_fields=["last_seq"])
    observations = [ObservationFactory(conversation=c) for c in conversations for _ in range(3)]
    retention_policy_create(
        workspace=workspace, actor=SYSTEM_ACTOR, name="30 days", message_days=30, reason="soak"
    )

    deadline = time.monotonic() + WRITE_SECONDS
    accepted: Counter[str] = Counter()
    answers: Counter[int] = Counter()
    edits: Counter[str] = Counter()
    failures: list[tuple[str, BaseException]] = []
    lock = threading.Lock()

    def agent(number: int) -> None:
        client = _client(agent_key)
        conversation_id = str(conversations[number % CONVERSATIONS].pk)
        try:
            n = 0
            while time.monotonic() < deadline:
                n += 1
                response = client.post(
                    f"/v1/conversations/{conversation_id}/messages",
                    {"role": "user", "content": f"Agent {number} says {n}."},
                    format="json",
                )
                with lock:
                    answers[response.status_code] += 1
                    if response.status_code == 201:
                        accepted[conversation_id] += 1
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append((f"agent {number}", error))
        finally:
            connection.close()

    def reviewer() -> None:
        client = _client(curator_key)
        try:
            n = 0
            while time.monotonic() < deadline:
                observation = observations[n % len(observations)]
                n += 1
                response = client.patch(
                    f"/v1/conversations/{observation.conversation_id}/observations/{observation.pk}",
                    {"text": f"User mentioned a corrected fact {n}.", "reason": "soak review"},
                    format="json",
                )
                assert response.status_code == 200, response.content
                edits[str(observation.pk)] += 1
                time.sleep(0.05)
        except BaseException as error:  # noqa: BLE001
            failures.append(("reviewer", error))
        finally:
            connection.close()

    def sweeper() -> None:
        try:
            time.sleep(WRITE_SECONDS / 4)  # in the thick of it
            sweep = retention_sweep_request(workspace=workspace, actor=SYSTEM_ACTOR)
            done = retention_sweep(sweep_id=sweep.pk, batch_size=50)
            assert done.status == "completed", (done.status, done.error)
        except BaseException as error:  # noqa: BLE001
            failures.append(("sweeper", error))
        finally:
            connection.close()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(AGENTS)]
    threads += [threading.Thread(target=reviewer), threading.Thread(target=sweeper)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WRITE_SECONDS + 60)
    assert not any(t.is_alive() for t in threads), "a thread did not finish"
    assert not failures, failures

    # Every write answered 201, and every one is stored exactly once, in gapless order.
    assert set(answers) == {201}, answers
    assert sum(accepted.values()) >= AGENTS  # every agent wrote
    for conversation in conversations:
        conversation.refresh_from_db()
        stats = Message.objects.filter(conversation=conversation).aggregate(
            n=Count("pk"), low=Min("seq"), high=Max("seq")
        )
        written = accepted[str(conversation.pk)]
        # The sweep took exactly the expired messages, nothing written during it.
        assert stats == {
            "n": written,
            "low": EXPIRED_EACH + 1,
            "high": EXPIRED_EACH + written,
        }, (stats, written)
        assert conversation.last_seq == EXPIRED_EACH + written
    assert not Message.objects.filter(created_at__lt=timezone.now() - timedelta(days=30)).exists()
    # Every edit made a version, none lost to a race.
    for observation in observations:
        observation.refresh_from_db()
        assert observation.version == 1 + edits[str(observation.pk)]
    assert Observation.objects.count() == len(observations)
