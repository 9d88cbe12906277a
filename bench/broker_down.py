"""How long a message write waits on a broker that is down (the documented bound is
CELERY_BROKER_CONNECTION_TIMEOUT, 3 s). Each case starts a fresh process with the
production settings and times one task publish, as a write does after its commit:
  refused  redis://127.0.0.1:1 and amqp://127.0.0.1:1 (nothing listens);
  silent   a Redis URL whose port accepts connections and never answers (a hung Redis).

Run: .venv/bin/python bench/broker_down.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PUBLISH = """
import os, time, django
django.setup()
from celery import current_app
took = []
for _ in range(3):
    started = time.monotonic()
    try:
        current_app.send_task("memory.tasks.observe_conversation", args=["x"], retry=False)
    except Exception:
        pass
    took.append(time.monotonic() - started)
print(" ".join(f"{t:.2f}" for t in took))
"""


def silent_port() -> int:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(50)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    return int(listener.getsockname()[1])


def main() -> None:
    cases = {
        "redis refused": "redis://127.0.0.1:1/0",
        "amqp refused": "amqp://guest:guest@127.0.0.1:1//",
        "redis silent": f"redis://127.0.0.1:{silent_port()}/0",
    }
    with tempfile.TemporaryDirectory() as var_dir:
        for name, url in cases.items():
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings.base",
                "MEMDESK_VAR_DIR": var_dir,
                "CELERY_BROKER_URL": url,
            }
            result = subprocess.run(
                [sys.executable, "-c", PUBLISH],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            print(f"{name:14} seconds per publish: {result.stdout.strip() or result.stderr[-300:]}")


if __name__ == "__main__":
    main()
