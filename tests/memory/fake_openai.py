"""A real OpenAI-compatible HTTP server for tests, scripted one response at a time.

The ``openai`` SDK talks to it over a socket, so retries, timeouts and headers are
exercised exactly as against a provider. Each request to ``.../chat/completions`` takes
the next scripted ``Behaviour`` from the queue (or ``default`` when the queue is empty)
and is recorded for assertions.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Behaviour:
    status: int = 200
    content: str | None = None  # a chat completion with this message content
    raw_body: bytes | None = None  # sent as is, instead of a completion
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    finish_reason: str = "stop"


def completion(content: str, *, finish_reason: str = "stop") -> Behaviour:
    return Behaviour(content=content, finish_reason=finish_reason)


def slow(seconds: float, content: str = "- [low] (unknown) too late {refs: 1}") -> Behaviour:
    return Behaviour(content=content, delay=seconds)


def rate_limited(retry_after: str) -> Behaviour:
    return Behaviour(
        status=429,
        raw_body=_error_body("Rate limit reached", "rate_limit_exceeded"),
        headers={"Retry-After": retry_after},
    )


def server_error(status: int = 500) -> Behaviour:
    return Behaviour(status=status, raw_body=_error_body("The server had an error", None))


def client_error(status: int = 400, code: str = "invalid_request_error") -> Behaviour:
    return Behaviour(status=status, raw_body=_error_body("Bad request", code))


def malformed(body: bytes = b'{"choices": [', content_type: str = "application/json") -> Behaviour:
    return Behaviour(raw_body=body, headers={"Content-Type": content_type})


def _error_body(message: str, code: str | None) -> bytes:
    error = {"message": message, "type": "server_error", "param": None, "code": code}
    return json.dumps({"error": error}).encode()


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received_at: float


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.default: Behaviour | None = None
        self._queue: deque[Behaviour] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits for it, once per test.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        # A fresh path prefix per server: the engine's circuit breaker is keyed by base
        # URL in the shared cache, and ports get reused by later tests.
        self.base_url = f"http://127.0.0.1:{self._server.server_port}/{uuid.uuid4().hex[:12]}/v1"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()  # wakes handlers sleeping in a `slow` behaviour
        self._server.shutdown()
        self._server.server_close()

    def enqueue(self, *behaviours: Behaviour, times: int = 1) -> None:
        with self._lock:
            for _ in range(times):
                self._queue.extend(behaviours)

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self.requests)

    def _next(self, request: RecordedRequest) -> Behaviour | None:
        with self._lock:
            self.requests.append(request)
            return self._queue.popleft() if self._queue else self.default

    def _sleep(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def _handler_for(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            # With or without /v1, and under the per-server prefix.
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, _error_body(f"no route {self.path}", "not_found"), {})
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode(errors="replace")}
            headers = {name.lower(): value for name, value in self.headers.items()}
            request = RecordedRequest(self.path, headers, body, time.monotonic())
            behaviour = fake._next(request)
            if behaviour is None:
                self._send(500, _error_body("fake_openai: nothing scripted", None), {})
                return
            if behaviour.delay:
                fake._sleep(behaviour.delay)
            payload = behaviour.raw_body
            if payload is None:
                payload = _completion_body(behaviour, model=str(body.get("model", "")))
            self._send(behaviour.status, payload, behaviour.headers)

        def _send(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
            try:
                self.send_response(status)
                if "Content-Type" not in headers:
                    self.send_header("Content-Type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); that is what the test wanted

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return Handler


def _completion_body(behaviour: Behaviour, *, model: str) -> bytes:
    content = behaviour.content or ""
    return json.dumps(
        {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": behaviour.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": 0,
                "completion_tokens": len(content.split()),
                "total_tokens": len(content.split()),
            },
        }
    ).encode()
