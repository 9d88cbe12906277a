"""Workspace isolation on every API route, found from the URL configuration: an admin
key of one workspace, given the ids of another workspace's objects, gets exactly the
answer it gets for ids that exist nowhere (a 404), never a 200 or 403 that would tell
the object exists, and changes nothing. A new route with an id in its path is covered
as soon as the ``owner`` fixture knows how to make that id."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from django.urls import get_resolver
from rest_framework.test import APIClient

from governance.models import AuditEvent
from memory import unsupported
from memory.models import Message, Observation, Reflection
from tests.routes import allowed_methods, url_patterns
from tests.world import World

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PARAMETER = re.compile(r"<(?:str|uuid|int):(\w+)>")
PSEUDONYM = re.compile(r"<[A-Z][A-Z0-9_]*_[0-9]+>")
REASON = "isolation probe"

# What would be a valid request body on the owner's side, by the route's last segment.
BODIES: dict[str, dict[str, Any]] = {
    "messages": {"role": "user", "content": "probe"},
    "bulk": {"messages": [{"role": "user", "content": "probe"}]},
    "search": {"query": "refund"},
    "observations": {"text": "probe", "priority": "low", "reason": REASON},
    "pins": {"reason": REASON},
    "revert": {"version": 1, "reason": REASON},
}
DEFAULT_BODY = {"text": "probe", "reason": REASON, "enabled": False}


def _api_routes_with_ids() -> list[tuple[str, str]]:
    routes = []
    for route, view in url_patterns(get_resolver().url_patterns):
        # The NAMS routes Memdesk does not serve read no id: they answer 501 to anyone.
        if getattr(view, "view_class", None) is unsupported.NotSupportedApi:
            continue
        if route.startswith("v1/") and PARAMETER.search(route):
            for method in sorted(allowed_methods(view) & set(METHODS)):
                routes.append((method, route))
    return routes


@pytest.fixture
def owner(other_workspace, eager_tasks) -> dict[str, str]:
    """Another workspace with one object of every kind a route names by id."""
    world = World(other_workspace, eager_tasks)
    erasure = world.api.post(
        "/v1/erasure-requests", {"userId": "zed", "reason": REASON}, format="json"
    )
    sweep = world.api.post("/v1/retention/sweeps", {}, format="json")
    assert erasure.status_code in (201, 202), erasure.content
    assert sweep.status_code in (201, 202), sweep.content
    redacted = world.redacted_message
    return {
        "conversation_id": world.c,
        "observation_id": str(world.observation.pk),
        "reflection_id": str(world.reflection.pk),
        "pin_id": str(world.pin.pk),
        "run_id": str(world.queued_run.pk),
        "finding_id": str(world.pending_finding.pk),
        "hold_id": str(world.hold.pk),
        "policy_id": str(world.retention_policy.pk),
        "request_id": str(erasure.json()["id"]),
        "sweep_id": str(sweep.json()["id"]),
        "label": PSEUDONYM.search(redacted.content).group(0),  # type: ignore[union-attr]
        "target_type": "message",
        "target_id": str(redacted.pk),
    }


IDEMPOTENT = {("DELETE", "v1/conversations/<str:conversation_id>")}


def _nowhere(name: str, real: str) -> str:
    """An id of the same form as ``real`` that no workspace has."""
    if name == "target_type":
        return real
    if name == "label":
        return "<PERSON_987654>"
    return str(uuid.uuid4()) if "-" in real else "987654321"


def _call(client: APIClient, method: str, route: str, ids: dict[str, str]):
    path = "/" + PARAMETER.sub(lambda m: ids[m.group(1)], route)
    body = BODIES.get(route.rsplit("/", 1)[-1], DEFAULT_BODY)
    if method in ("GET", "DELETE"):
        return client.generic(method, path)
    return client.generic(method, path, data=json.dumps(body), content_type="application/json")


def _state() -> tuple[int, ...]:
    return (
        Message.objects.count(),
        Observation.objects.count(),
        Reflection.objects.count(),
        AuditEvent.objects.count(),
    )


def test_the_route_walk_finds_the_routes_with_ids():
    routes = _api_routes_with_ids()
    assert len(routes) >= 30
    assert ("DELETE", "v1/conversations/<str:conversation_id>") in routes


def test_no_route_tells_another_workspaces_object_from_one_that_does_not_exist(
    make_client, workspace, owner
):
    intruder = make_client(workspace, scope="admin")
    nowhere = {name: _nowhere(name, real) for name, real in owner.items()}
    leaks = []
    answers: list[tuple[int, str | None]] = []
    before = _state()
    for method, route in _api_routes_with_ids():
        names = PARAMETER.findall(route)
        missing = [n for n in names if n not in owner]
        assert not missing, f"{method} {route}: make a {missing} in the owner fixture"
        probe = _call(intruder, method, route, owner)
        baseline = _call(intruder, method, route, nowhere)
        answer = (probe.status_code, probe.json().get("code") if probe.content else None)
        expected = (
            baseline.status_code,
            baseline.json().get("code") if baseline.content else None,
        )
        if (method, route) in IDEMPOTENT:
            # A delete NAMS clients expect to be idempotent: theirs answers as an id no
            # workspace holds, 204, and is left alone (the state is checked below).
            if answer != expected or answer != (204, None):
                leaks.append(f"{method} /{route}: {answer} for theirs, {expected} for none")
            continue
        answers.append(answer)
        if answer != expected or probe.status_code in (200, 201, 202, 204, 403):
            leaks.append(f"{method} /{route}: {answer} for theirs, {expected} for none")
    assert not leaks, "\n".join(leaks)
    assert _state() == before
    # Not even a validation error first: the id is looked up before the body is read.
    assert set(answers) == {(404, "not_found")}


def test_no_search_finds_or_tells_another_workspaces_memory(make_client, workspace, owner):
    """``/v1/search`` names its scope in the body, not the path: another workspace's
    conversation answers as one that exists nowhere, and neither its end user's id nor
    the whole-workspace scope reaches a word of it (the owner's chat is about a refund)."""
    intruder = make_client(workspace, scope="admin")

    def search(**scope: str):
        return intruder.post("/v1/search", {"query": "refund", **scope}, format="json")

    theirs = search(conversationId=owner["conversation_id"])
    nowhere = search(conversationId=_nowhere("conversation_id", owner["conversation_id"]))

    assert (theirs.status_code, theirs.json()["code"]) == (404, "not_found")
    assert theirs.json() == nowhere.json()
    assert search(userId="dana").json()["hits"] == []
    assert search().json()["hits"] == []
