"""The NAMS client project's own conformance tests (its TCK tiers), against Memdesk.

They run unchanged (``../shared/conformance/nams-tck/``), with the real
``neo4j-agent-memory`` client, in a pytest process of their own pointed at the live
server: every test that needs no entities, relationships, provenance or Cypher must
pass, reasoning memory's among them (``REASONING_TESTS``)."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

# Deselected, each for the feature it needs that Memdesk does not have (those routes
# answer 501 not_supported: tests/memory/test_nams_routes.py).
NEEDS_UNSUPPORTED_FEATURES = {
    # entities (POST /v1/entities/search finds none to return None for)
    "test_errors.py::test_get_entity_by_name_unknown_returns_none": "entities",
    # entities and a Cypher read, beside short-term and reasoning memory
    "test_smoke.py::test_smoke_full_flow": "entities, Cypher",
    # creates two entities before it checks the client refuses a relationship
    "test_tck_gold.py::test_add_relationship_not_supported_on_nams": "entities",
    "test_tck_gold.py::test_get_entity_relationships_returns_list": "entities, relationships",
    "test_tck_gold.py::test_get_related_entities_returns_list": "entities, relationships",
    "test_tck_gold.py::test_get_entity_provenance_returns_dict": "entities, provenance",
    "test_tck_gold.py::test_entity_visible_across_sessions": "entities",
    "test_tck_platinum.py::test_set_entity_feedback": "entities",
    "test_tck_platinum.py::test_get_entity_history": "entities",
    "test_tck_platinum.py::test_cypher_basic_read": "Cypher",
    "test_tck_platinum.py::test_cypher_with_params": "Cypher, entities",
    "test_tck_silver.py::test_add_entity_returns_entity": "entities",
    "test_tck_silver.py::test_search_entities_finds_recent_writes": "entities",
    "test_tck_silver.py::test_get_entity_by_name_found": "entities",
    "test_tck_silver.py::test_get_entity_by_name_not_found": "entities",
}
# Reasoning memory's: they record steps and tool calls (POST /v1/reasoning/steps,
# /v1/reasoning/tool-calls) and read them back (GET /v1/reasoning/trace/{conversationId}).
REASONING_TESTS = [
    "test_tck_silver.py::test_reasoning_trace_lifecycle",
    "test_tck_silver.py::test_get_trace_with_steps_includes_steps",
    "test_tck_silver.py::test_get_session_traces",
]
# The TCK's 63 tests less those that need features Memdesk does not have.
EXPECTED_PASSED = 48


@dataclass(frozen=True)
class TckRun:
    passed: int
    failed: int
    skipped: int
    passed_tests: frozenset[str]  # "file.py::test_name"
    output: str


def run_tck(tck: Path, endpoint: str, api_key: str, tmp_path: Path, *args: str) -> TckRun:
    """Run the TCK with this interpreter; the outcome counts from its JUnit report."""
    report = tmp_path / f"tck-{len(list(tmp_path.iterdir()))}.xml"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("NAMS_", "MEMORY_", "DJANGO_"))
    }
    env.update(
        MEMORY_ENDPOINT=endpoint,
        MEMORY_API_KEY=api_key,
        PYTHONDONTWRITEBYTECODE="1",  # the shared folder is read-only in CI
    )
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            # Memdesk's own plugins have nothing to do in the TCK's process.
            "-p",
            "no:django",
            "-p",
            "no:xdist",
            "-q",
            "-rfE",
            f"--junitxml={report}",
            *args,
        ],
        cwd=tck,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    suite = ET.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite[0]
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    failed = counts["failures"] + counts["errors"]
    passed_tests = frozenset(
        f"{case.get('classname', '').rpartition('.')[2]}.py::{case.get('name')}"
        for case in suite.iter("testcase")
        if not any(child.tag in ("failure", "error", "skipped") for child in case)
    )
    return TckRun(
        passed=counts["tests"] - failed - counts["skipped"],
        failed=failed,
        skipped=counts["skipped"],
        passed_tests=passed_tests,
        output=completed.stdout[-6000:] + completed.stderr[-2000:],
    )


def test_the_tck_passes_every_test_within_memdesks_features(
    conformance_dir, live_server, live_key, tmp_path
):
    run = run_tck(
        conformance_dir / "nams-tck",
        f"{live_server.url}/v1",
        live_key,
        tmp_path,
        *(f"--deselect={test}" for test in NEEDS_UNSUPPORTED_FEATURES),
    )

    assert (run.passed, run.failed, run.skipped) == (EXPECTED_PASSED, 0, 0), run.output
    assert set(REASONING_TESTS) <= run.passed_tests
