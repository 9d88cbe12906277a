"""Redis for fault tests: a private redis-server (its own port, no persistence,
restartable), and the cache settings of one that is not there."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import redis

from config.settings.base import cache_settings

# The production cache settings on a Redis URL where nothing listens (port 1): every
# cache call fails at once with a connection error.
DEAD_REDIS = cache_settings("redis://127.0.0.1:1/0")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    @staticmethod
    def installed() -> bool:
        return shutil.which("redis-server") is not None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis.from_url(self.url, socket_connect_timeout=0.2).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server on port {self.port} did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()  # as a crash: nothing saved, every connection dropped
            self.process.wait(timeout=10)
        self.process = None
