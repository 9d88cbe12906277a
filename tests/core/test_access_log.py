"""The web process's access log (gunicorn with config/gunicorn.py, as the Procfile starts
it) names requests by method, path and request id: no query string, no end user's id.
Under LOG_FORMAT=json every line the web process writes is a JSON object, gunicorn's own
included."""

from __future__ import annotations

import contextlib
import json
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


def _json_object(line: str) -> dict | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _get(url: str, request_id: str) -> None:
    request = urllib.request.Request(url, headers={"X-Request-Id": request_id})
    # A 404 or a redirect to the login page is logged all the same.
    with contextlib.suppress(urllib.error.HTTPError):
        urllib.request.urlopen(request, timeout=10).close()


@contextlib.contextmanager
def _gunicorn(tmp_path: Path, **environment: str) -> Iterator[str]:
    """gunicorn as the Procfile starts it, with ``environment`` added, logging to
    ``tmp_path / "web.log"``; yields its base URL."""
    port = _free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CACHE_URL"}},
        "DJANGO_SETTINGS_MODULE": "config.settings.base",
        "MEMDESK_VAR_DIR": str(tmp_path),
        "PORT": str(port),
        "WEB_CONCURRENCY": "1",
        **environment,
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


def test_every_line_of_the_web_process_is_json_under_log_format_json(tmp_path):
    # At info, gunicorn's own error log says more (booting, signals, exiting) than at the
    # default warning: each of those lines too.
    with _gunicorn(tmp_path, LOG_FORMAT="json", GUNICORN_LOG_LEVEL="info") as base:
        _get(f"{base}/v1/conversations?userId=dana%40example.com", "probe-json-1")
        _get(f"{base}/v1/probe%0D%0A127.0.0.1%20forged%00line", "probe-json-2")
    lines = [line for line in (tmp_path / "web.log").read_text().split("\n") if line.strip()]

    assert [line for line in lines if _json_object(line) is None] == []
    entries = [json.loads(line) for line in lines]
    assert {entry["logger"] for entry in entries} >= {"gunicorn.error", "gunicorn.access"}
    access = [entry for entry in entries if entry["logger"] == "gunicorn.access"]
    assert [entry["request_id"] for entry in access] == ["probe-json-1", "probe-json-2"]
    assert '"GET /v1/conversations HTTP/1.1" 401' in access[0]["message"]
    assert r"GET /v1/probe\r\n127.0.0.1 forged\x00line HTTP/1.1" in access[1]["message"]
    assert "dana" not in "\n".join(lines).lower()
