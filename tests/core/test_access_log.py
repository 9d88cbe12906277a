"""The web process's access log (gunicorn with config/gunicorn.py, as the Procfile starts
it) names requests by method, path and request id: no query string, no end user's id."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
GUNICORN = Path(sys.executable).with_name("gunicorn")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, request_id: str) -> None:
    request = urllib.request.Request(url, headers={"X-Request-Id": request_id})
    # A 404 or a redirect to the login page is logged all the same.
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(request, timeout=10).close()


@contextlib.contextmanager
def _gunicorn(tmp_path: Path) -> Iterator[str]:
    """gunicorn as the Procfile starts it, logging to ``tmp_path / "web.log"``; yields
    its base URL."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CACHE_URL"}},
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "MEMDESK_VAR_DIR": str(tmp_path),
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
    }
    with (tmp_path / "web.log").open("w") as out:
        server = subprocess.Popen(
            [str(GUNICORN), "config.wsgi", "-c", "config/gunicorn.py"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_the_access_log_shows_paths_and_request_ids_never_query_strings(tmp_path):
    with _gunicorn(tmp_path) as base:
        _get(f"{base}/v1/conversations?userId=dana%40example.com", "probe-api-1")
        _get(f"{base}/search/?q=Dana+Whitfield", "probe-page-2")
        _get(f"{base}/users/dana%40example.com/?kind=x", "probe-user-3")
    text = (tmp_path / "web.log").read_text()
    assert "GET /v1/conversations HTTP/1.1" in text
    assert "probe-api-1" in text and "probe-page-2" in text and "probe-user-3" in text
    assert "GET /users/…/ HTTP/1.1" in text
    assert "dana" not in text.lower() and "whitfield" not in text.lower()
    assert "userId" not in text and "?" not in text


def test_control_characters_in_a_path_cannot_forge_an_access_log_line(tmp_path):
    with _gunicorn(tmp_path) as base:
        _get(f"{base}/v1/probe%0D%0A127.0.0.1%20forged%00line%E2%80%A8end", "probe-forged-1")
    text = (tmp_path / "web.log").read_text()

    lines = text.split("\n")

    access = [line for line in lines if '"GET /v1/probe' in line]
    assert len(access) == 1
    assert r"GET /v1/probe\r\n127.0.0.1 forged\x00line\u2028end HTTP/1.1" in access[0]
    assert access[0].endswith("probe-forged-1")
    assert not [line for line in lines if line.startswith("127.0.0.1 forged")]
    assert not any(control in text for control in ("\r", "\x00", "\u2028"))
