"""Keep one long-running process alive: ``python -m core.supervise -- COMMAND...``.

`make run` (honcho) stops every process as soon as one exits, so a Celery worker killed
by a broker restart, the kernel's OOM killer or a crash would take the web server down
with it. The Procfile starts the worker and beat under this instead: when the command
exits, for any reason, it is started again after a backoff that doubles from one second
up to MAX_BACKOFF, and falls back to one second once the command has stayed up for
STABLE_AFTER. SIGTERM and SIGINT are passed on to the command, and then the supervisor
exits with it. ``--niceness N`` runs the command below the web server for the CPU
(``lower_priority``). It imports nothing from Django, so it starts in milliseconds and a broken
setting shows up in the command's own output, retried with the backoff.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import FrameType

MIN_BACKOFF = 1.0
MAX_BACKOFF = 30.0
STABLE_AFTER = 60.0


def _say(text: str) -> None:
    print(f"supervise: {text}", file=sys.stderr, flush=True)


def supervise(command: list[str]) -> int:
    stopping: list[int] = []
    child: subprocess.Popen[bytes] | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    backoff = MIN_BACKOFF
    while True:
        started = time.monotonic()
        child = subprocess.Popen(command)
        _say(f"started {os.path.basename(command[0])} as pid {child.pid}")
        code = child.wait()
        if stopping:
            return code if code >= 0 else 128 - code
        if time.monotonic() - started >= STABLE_AFTER:
            backoff = MIN_BACKOFF
        _say(f"pid {child.pid} exited with code {code}; restarting in {backoff:g} s")
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        if stopping:
            return 128 + stopping[0]
        backoff = min(backoff * 2, MAX_BACKOFF)


def lower_priority(niceness: int) -> None:
    """Run this process, and the command it starts, ``niceness`` steps below the others
    for the CPU: the web first, background work in the time it leaves.

    A plain ``nice`` counts only against processes of the same session where the kernel
    groups sessions (Linux's sched_autogroup, on by default): the CPU is shared between
    sessions first, so a worker in a session of its own (honcho starts each Procfile
    line in one) took a core from two web workers whatever its nice value. The
    session's group is lowered too when this process leads its session, so that nothing
    else (a terminal's shell) is lowered with it."""
    if niceness <= 0:
        return
    os.nice(niceness)
    if os.getsid(0) != os.getpid():
        return
    try:
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(niceness))
    except OSError:  # not Linux, or no autogroup: the plain nice is all there is
        pass


def main(argv: list[str]) -> int:
    usage = "usage: python -m core.supervise [--niceness 0-19] -- COMMAND [ARGS...]"
    niceness = 0
    if argv[:1] == ["--niceness"]:
        value = argv[1] if len(argv) > 1 else ""
        if not (value.isdigit() and int(value) <= 19):
            _say(f"--niceness takes a whole number from 0 to 19, got {value!r}; {usage}")
            return 2
        niceness, argv = int(value), argv[2:]
    command = argv[1:] if argv[:1] == ["--"] else argv
    if not command:
        _say(usage)
        return 2
    lower_priority(niceness)
    return supervise(command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
