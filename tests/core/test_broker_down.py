"""A write while the broker is down: stored, answered, and its run recorded for the
sweeper, after a single bounded attempt to publish (bench/broker_down.py times it)."""

from __future__ import annotations

import logging

import pytest
from celery import Celery
from django.test import override_settings

from config.settings.base import broker_transport_options
from core import queue
from memory.models import Message, ObserverRun

DEAD_REDIS = "redis://127.0.0.1:1/0"


@pytest.fixture
def broker_down(monkeypatch):
    app = Celery("memdesk-broker-down", broker=DEAD_REDIS, set_as_current=False)
    app.conf.broker_connection_timeout = 3
    app.conf.broker_transport_options = broker_transport_options(DEAD_REDIS, 3)
    app.conf.task_publish_retry = False
    monkeypatch.setattr(queue, "current_app", app)
    return app


def test_the_transport_options_allow_one_attempt_bounded_by_the_timeout():
    assert broker_transport_options(DEAD_REDIS, 3) == {
        "max_retries": 0,
        "socket_connect_timeout": 3,
        "socket_timeout": 3,
    }
    assert broker_transport_options("amqp://rabbit//", 3) == {"max_retries": 0}


@override_settings(MEMDESK_OBSERVER_THRESHOLD=1)
def test_a_write_with_the_broker_down_is_stored_and_its_run_recorded(
    api, broker_down, django_capture_on_commit_callbacks, caplog
):
    conversation_id = api.post("/v1/conversations", {"userId": "dana"}, format="json").json()["id"]
    with (
        caplog.at_level(logging.WARNING, logger="core.queue"),
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = api.post(
            f"/v1/conversations/{conversation_id}/messages",
            {"role": "user", "content": "My order never arrived."},
            format="json",
        )

    assert response.status_code == 201
    assert Message.objects.filter(conversation_id=conversation_id).count() == 1
    run = ObserverRun.objects.get(conversation_id=conversation_id)
    assert run.status == "pending"  # the sweeper sends it once the broker is back
    assert "could not enqueue memory.tasks.observe_conversation" in caplog.text
