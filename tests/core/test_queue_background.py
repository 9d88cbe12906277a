"""A web worker sends its Celery tasks from a thread of its own, after the write that made
them due has committed and answered (core.queue.send_in_background): the request does not
wait for the broker, and nothing a send inline would deliver is lost."""

from __future__ import annotations

import threading

import pytest

from core import queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def background(monkeypatch):
    """This process sends in the background for the test (a sender of its own)."""
    monkeypatch.setattr(queue, "_sender", None)
    queue.send_in_background()
    yield queue._sender
    assert queue.sends_flush(5.0)


@pytest.fixture
def broker(monkeypatch):
    """A broker that answers only once ``answer`` is set; records what it was sent."""

    class Broker:
        def __init__(self) -> None:
            self.answer = threading.Event()
            self.sent: list[tuple[str, list]] = []
            self.fail = False

        def send_task(self, name, args=(), **_):
            self.answer.wait(5.0)
            if self.fail:
                raise ConnectionError("broker down")
            self.sent.append((name, list(args)))

    fake = Broker()
    monkeypatch.setattr(queue.current_app, "send_task", fake.send_task)
    return fake


def test_the_commit_does_not_wait_for_the_broker(
    background, broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit("memory.some_task", "a", 1)

    # The transaction's callbacks are done while the broker has not answered yet.
    assert broker.sent == []
    broker.answer.set()
    assert queue.sends_flush(5.0)
    assert broker.sent == [("memory.some_task", ["a", 1])]


def test_a_task_queued_under_a_mark_is_sent_once_until_it_starts(
    background, broker, django_capture_on_commit_callbacks
):
    broker.answer.set()
    mark = "test-background-mark"
    queue.queued_mark_clear(mark)
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit_unless_queued("memory.scan", "w1", mark=mark)
    assert queue.sends_flush(5.0)
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit_unless_queued("memory.scan", "w1", mark=mark)
    assert queue.sends_flush(5.0)
    assert broker.sent == [("memory.scan", ["w1"])]

    queue.queued_mark_clear(mark)  # the task started: the next write sends its own
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit_unless_queued("memory.scan", "w1", mark=mark)
    assert queue.sends_flush(5.0)
    assert len(broker.sent) == 2


def test_a_broker_that_fails_in_the_background_leaves_the_next_write_free_to_send(
    background, broker, django_capture_on_commit_callbacks, caplog
):
    broker.answer.set()
    broker.fail = True
    mark = "test-background-down"
    queue.queued_mark_clear(mark)
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit_unless_queued("memory.scan", "w2", mark=mark)
    assert queue.sends_flush(5.0)
    assert "the sweeper will retry" in caplog.text

    broker.fail = False
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit_unless_queued("memory.scan", "w2", mark=mark)
    assert queue.sends_flush(5.0)
    assert broker.sent == [("memory.scan", ["w2"])]


def test_a_flush_that_runs_out_of_time_says_how_many_sends_are_left(
    background, broker, django_capture_on_commit_callbacks, caplog
):
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit("memory.some_task", "b")
        queue.enqueue_on_commit("memory.some_task", "c")

    assert not queue.sends_flush(0.05)
    assert "2 task send(s) left unsent" in caplog.text
    broker.answer.set()


def test_without_the_web_worker_tasks_are_sent_inline(
    monkeypatch, broker, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(queue, "_sender", None)
    broker.answer.set()
    with django_capture_on_commit_callbacks(execute=True):
        queue.enqueue_on_commit("memory.some_task", "d")
    assert broker.sent == [("memory.some_task", ["d"])]
