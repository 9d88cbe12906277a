"""The supervisor `make run` starts the worker and beat under (core/supervise.py), with
real processes: a worker killed outright is started again and does its work, and the
supervisor stops cleanly when told to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from memory.models import ObserverRun
from memory.services.conversations import conversation_create
from tests.memory.celery_workers import ROOT, Broker, publishing_to, wait_until, worker_command


def _supervise(command: list[str], log_path, env=None) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "core.supervise", "--", *command],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=20)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def test_a_command_that_keeps_exiting_is_restarted_with_a_growing_backoff(tmp_path):
    log_path = tmp_path / "supervise.log"
    supervisor = _supervise([sys.executable, "-c", "raise SystemExit(3)"], log_path)
    time.sleep(4)  # starts at 0 s, 1 s and 3 s; the next one would be at 7 s
    code = _stop(supervisor)

    log = log_path.read_text()
    assert log.count("started ") == 3, log
    assert "exited with code 3; restarting in 1 s" in log
    assert "exited with code 3; restarting in 2 s" in log
    assert code == 128 + signal.SIGTERM


def test_no_arguments_is_a_usage_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "core.supervise"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "usage: python -m core.supervise [--niceness 0-19] -- COMMAND" in result.stderr


@pytest.mark.parametrize("value", ["ten", "-3", "20", ""])
def test_a_niceness_that_is_not_0_to_19_is_a_usage_error(value):
    result = subprocess.run(
        [sys.executable, "-m", "core.supervise", "--niceness", value, "--", "true"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "--niceness takes a whole number from 0 to 19" in result.stderr


def test_niceness_puts_the_command_below_the_web_for_the_cpu():
    """The command runs at the niceness, and, started in a session of its own as honcho
    starts each Procfile line, so does the session's scheduling group: a plain nice
    alone counts for nothing against a web server in another session."""
    probe = (
        "import os, pathlib, time; group = pathlib.Path('/proc/self/autogroup'); "
        "print(os.nice(0), group.read_text().split()[-1] if group.exists() else '-', "
        "flush=True); time.sleep(60)"
    )
    command = [sys.executable, "-c", probe]
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "core.supervise", "--niceness", "7", "--", *command],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert supervisor.stdout is not None
        niceness, group = supervisor.stdout.readline().split()
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=30)
    assert int(niceness) == os.nice(0) + 7
    if group != "-":
        assert group == "7"


@pytest.mark.once
@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_restarted_and_takes_the_next_run(api, workspace, tmp_path):
    broker = Broker(tmp_path)
    command, env = worker_command("supervised", broker, {})
    log_path = tmp_path / "supervise.log"
    with publishing_to(broker.url, broker.transport_options, broker.queue):
        supervisor = _supervise(command, log_path, env=env)
        try:
            first = wait_until(
                lambda: _child_pid(log_path, 1), timeout=20, what="the worker to start"
            )
            os.kill(first, signal.SIGKILL)
            second = wait_until(
                lambda: _child_pid(log_path, 2), timeout=20, what="the worker to be restarted"
            )
            assert second != first
            assert "exited with code -9; restarting in 1 s" in log_path.read_text()

            # The restarted worker does the work.
            workspace.observer_threshold = 1
            workspace.save()
            conversation = conversation_create(workspace=workspace)
            response = api.post(
                f"/v1/conversations/{conversation.pk}/messages",
                {"role": "user", "content": "My order ORD-7 arrived broken; I want a refund."},
                format="json",
            )
            assert response.status_code == 201
            run = ObserverRun.objects.get(conversation=conversation)
            wait_until(
                lambda: ObserverRun.objects.filter(pk=run.pk, status="succeeded").exists(),
                timeout=60,
                what=f"the restarted worker to finish the run:\n{log_path.read_text()[-3000:]}",
            )
        finally:
            assert _stop(supervisor) in (0, 128 + signal.SIGTERM, 143)


def _child_pid(log_path, nth: int) -> int | None:
    starts = [line for line in log_path.read_text().splitlines() if "supervise: started" in line]
    if len(starts) < nth:
        return None
    return int(starts[nth - 1].rsplit(" ", 1)[1])
