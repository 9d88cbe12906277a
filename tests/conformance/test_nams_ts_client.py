"""The TypeScript NAMS client (``@neo4j-labs/agent-memory``, built, in
``../shared/conformance/nams-ts-client/dist``), driven by its check script against the
live server with a real Celery worker: conversations, messages, the three memory tiers,
the Vercel AI middleware, and how the client reacts to routes Memdesk does not serve.

Of its 42 checks none needs reasoning memory; two probe its routes
(``reasoning.recordStep``, ``reasoning.recordToolCall``) and pass on any error the client
types (404 before reasoning memory is served) as well as on success."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.memory.celery_workers import Worker, wait_until

CHECKS = 42


def test_the_typescript_client_check_passes(
    conformance_dir, live_server, live_key, broker, workers
):
    node = shutil.which("node")
    if node is None:
        pytest.skip("the TypeScript client check needs node (Node.js 20): apt-get install nodejs")
    worker = Worker("ts-check", broker, {})
    workers.append(worker)
    wait_until(lambda: " ready." in worker.log(), timeout=90, what="the worker", logs=workers)

    completed = subprocess.run(
        [node, "ts_client_check.mjs", f"{live_server.url}/v1", live_key, "dist"],
        cwd=conformance_dir / "nams-ts-client",
        capture_output=True,
        text=True,
        timeout=600,
    )

    lines = completed.stdout.splitlines()
    failed = [line for line in lines if line.startswith("FAIL")]
    assert not failed, "\n".join(failed) + "\n" + completed.stderr[-2000:]
    summary = re.fullmatch(r"ts client: (\d+)/(\d+) checks ok", lines[-1] if lines else "")
    assert summary is not None, completed.stdout[-3000:] + completed.stderr[-2000:]
    assert (int(summary[1]), int(summary[2])) == (CHECKS, CHECKS)
    assert completed.returncode == 0
