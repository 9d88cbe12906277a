"""Redis (broker and cache) restarted while agents write, with a real worker on it: every
message is stored, sequence numbers stay gapless, the worker survives and the runs the
outage held back are finished by the sweeper."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Max, Min
from django.utils import timezone

from config.settings.base import cache_settings
from memory.models import Message, ObserverRun
from memory.pipeline.scheduling import unobserved_token_count
from memory.pipeline.sweep import pipeline_sweep
from memory.services.conversations import conversation_create
from tests.memory.celery_workers import Broker, Worker, publishing_to, wait_until
from tests.resilience.redis_server import RedisServer

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.once,
    pytest.mark.skipif(not RedisServer.installed(), reason="needs redis-server on the PATH"),
]

CONVERSATIONS = 4
MESSAGES_EACH = 40


@pytest.fixture
def private_redis() -> RedisServer:
    server = RedisServer()
    server.start()
    yield server
    server.stop()


def test_a_redis_restart_mid_ingest_loses_nothing_and_the_worker_survives(
    api, workspace, private_redis, settings, tmp_path
):
    # The production cache settings (django-redis, errors ignored) on the private Redis.
    settings.CACHES = cache_settings(private_redis.url)
    workspace.observer_threshold = 60
    workspace.save()
    broker = Broker(tmp_path)
    broker.url, broker.transport_options = private_redis.url, {}
    worker = Worker("w1", broker, {"CACHE_URL": private_redis.url})
    conversations = [conversation_create(workspace=workspace) for _ in range(CONVERSATIONS)]
    answers: list[int] = []
    # SQLite allows one writer: the agents write in turn there, together on PostgreSQL.
    writers = CONVERSATIONS if connection.vendor == "postgresql" else 1
    try:
        wait_until(lambda: " ready." in worker.log(), timeout=60, what="the worker", logs=[worker])
        with publishing_to(broker.url, queue=broker.queue):

            def agent(assigned) -> None:
                try:
                    for n in range(MESSAGES_EACH):
                        for conversation in assigned:
                            response = api.post(
                                f"/v1/conversations/{conversation.pk}/messages",
                                {"role": "user", "content": f"Order ORD-{n} is late again."},
                                format="json",
                            )
                            answers.append(response.status_code)
                            time.sleep(0.01)
                finally:
                    connection.close()

            threads = [
                threading.Thread(target=agent, args=(conversations[i::writers],))
                for i in range(writers)
            ]
            for thread in threads:
                thread.start()
            wait_until(lambda: len(answers) >= 20, timeout=30, what="the first writes")
            private_redis.stop()
            wait_until(
                lambda: "broker lost" in worker.log(), timeout=30, what="the worker to notice"
            )
            time.sleep(1)
            private_redis.start()
            for thread in threads:
                thread.join(timeout=120)

            # Every write was answered 201 and stored, in order, without gaps.
            assert answers == [201] * CONVERSATIONS * MESSAGES_EACH
            for conversation in conversations:
                stats = Message.objects.filter(conversation=conversation).aggregate(
                    n=Count("pk"), low=Min("seq"), high=Max("seq")
                )
                assert stats == {"n": MESSAGES_EACH, "low": 1, "high": MESSAGES_EACH}

            # The worker lived through it, and the sweeper finishes what the outage held up.
            assert worker.process.poll() is None, worker.log()[-3000:]
            # It reconnects on its own backoff (2 s, then longer), which the writes need not
            # have outlasted.
            wait_until(
                lambda: "Connected to redis" in worker.log().split("broker lost", 1)[-1],
                timeout=60,
                what="the worker to reconnect to the broker",
                logs=[worker],
            )
            ObserverRun.objects.filter(status="pending").update(
                created_at=timezone.now() - timedelta(minutes=2)
            )
            pipeline_sweep()

            def all_observed() -> bool:
                open_runs = ObserverRun.objects.filter(status__in=["pending", "running"])
                if open_runs.exists():
                    return False
                for conversation in conversations:
                    if unobserved_token_count(conversation=conversation) >= 60:
                        pipeline_sweep()
                        return False
                return True

            wait_until(all_observed, timeout=90, what="every run to finish", logs=[worker])
            assert not ObserverRun.objects.exclude(status="succeeded").exists()
            assert Message.objects.filter(conversation__in=conversations).count() == (
                CONVERSATIONS * MESSAGES_EACH
            )
    finally:
        worker.stop()
