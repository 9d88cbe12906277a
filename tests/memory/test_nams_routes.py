"""Every route the NAMS clients call is served, or answers 501 in JSON; every other /v1/
path answers a JSON 404.

The routes come from the clients themselves: the installed Python client's endpoint
table (the ``EndpointSpec`` of each of its modules) and the TypeScript client's route
table in its build (``../shared/conformance/nams-ts-client/dist/index.js``)."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import re
import uuid
from pathlib import Path

import neo4j_agent_memory.nams as nams_package
import pytest
from django.urls import Resolver404, resolve
from neo4j_agent_memory import MemoryClient, MemorySettings, NamsConfig, NotSupportedError
from neo4j_agent_memory.nams.endpoints import EndpointSpec
from pydantic import SecretStr

from core.actors import SYSTEM_ACTOR
from governance.models import AuditEvent
from memory import unsupported
from tenancy.services import api_key_create
from tests.routes import allowed_methods

TS_CLIENT_BUILD = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "conformance"
    / "nams-ts-client"
    / "dist"
    / "index.js"
)
PLACEHOLDER = re.compile(r"\{\w+\}")


def python_client_routes() -> set[tuple[str, str]]:
    routes = set()
    for module_info in pkgutil.iter_modules(nams_package.__path__):
        module = importlib.import_module(f"{nams_package.__name__}.{module_info.name}")
        for value in vars(module).values():
            if isinstance(value, EndpointSpec) and value.rest_path is not None:
                routes.add((value.rest_method, PLACEHOLDER.sub("{}", value.rest_path)))
    return routes


def typescript_client_routes() -> set[tuple[str, str]]:
    if not TS_CLIENT_BUILD.exists():
        return set()
    source = TS_CLIENT_BUILD.read_text()
    return {
        (method, PLACEHOLDER.sub("{}", path))
        for method, path in re.findall(r'method: "(\w+)",\s*path: "(/[^"]*)"', source)
    }


PYTHON_ROUTES = python_client_routes()
TS_ROUTES = typescript_client_routes()
CLIENT_ROUTES = sorted(PYTHON_ROUTES | TS_ROUTES)


def _concrete(path: str) -> str:
    return "/v1" + path.replace("{}", str(uuid.uuid4()))


def test_the_route_tables_are_read_from_both_clients():
    assert len(PYTHON_ROUTES) >= 40
    assert ("POST", "/entities") in PYTHON_ROUTES and ("POST", "/query") in PYTHON_ROUTES
    if not TS_CLIENT_BUILD.exists():
        pytest.skip(f"the TypeScript client's build is not at {TS_CLIENT_BUILD}")
    assert ("GET", "/reasoning/explain/{}") in TS_ROUTES
    assert ("GET", "/conversations/{}/observations") in TS_ROUTES


@pytest.mark.parametrize(("method", "path"), CLIENT_ROUTES, ids=" ".join)
def test_every_route_a_client_calls_is_served_or_answers_501(api, workspace, method, path):
    concrete = _concrete(path)
    try:
        view = resolve(concrete).func
    except Resolver404:
        pytest.fail(f"{method} {path}: no route; serve it or add it to memory/unsupported.py")
    if getattr(view, "view_class", None) is not unsupported.NotSupportedApi:
        assert method in allowed_methods(view), f"{method} {path} is routed but not answered"
        return

    before = AuditEvent.objects.count()
    response = api.generic(method, concrete, '{"name": "Dana"}', content_type="application/json")

    assert response.status_code == 501
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "not_supported"
    assert body["feature"]
    # The sentence both clients show names the feature and what to use instead.
    assert body["error"] == body["message"]
    assert "not supported by Memdesk" in body["error"] and "Instead, " in body["error"]
    assert AuditEvent.objects.count() == before


def test_a_not_supported_route_still_needs_a_valid_key(client):
    response = client.post("/v1/entities", {"name": "Dana"}, content_type="application/json")

    assert response.status_code == 401
    assert response.json()["code"] == "unauthorized"


def test_the_python_client_raises_its_not_supported_error(live_server, workspace):
    _, raw_key = api_key_create(workspace=workspace, actor=SYSTEM_ACTOR, name="nams")
    settings = MemorySettings(
        _env_file=None,
        backend="nams",
        nams=NamsConfig(
            endpoint=f"{live_server.url}/v1", api_key=SecretStr(raw_key), max_retries=0
        ),
    )

    async def add_entity() -> None:
        async with MemoryClient(settings) as client:
            await client.long_term.add_entity("Dana Pierce", "PERSON")

    with pytest.raises(NotSupportedError) as raised:
        asyncio.run(add_entity())

    assert "501" in str(raised.value) and "add_entity" in str(raised.value)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/preferences"),
        ("POST", "/v1/facts"),
        ("DELETE", "/v1/entities/x/y/z"),
        ("GET", "/v1/conversations/not/a/route"),
        ("PUT", "/v1/nothing-here"),
    ],
)
def test_an_unknown_api_path_answers_a_json_404(api, method, path):
    response = api.generic(method, path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "not_found"
    assert body["error"] == f"Not found: no API route {method} {path}."
