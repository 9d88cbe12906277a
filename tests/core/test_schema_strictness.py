"""What the API fuzzer found loose, kept tight: the document states id formats and limit
bounds, and the API refuses what the document says is invalid."""

from __future__ import annotations

import json

import pytest


@pytest.fixture
def document(api) -> dict:
    response = api.get("/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return json.loads(response.content)


def _parameter(document: dict, path: str, method: str, name: str) -> dict:
    [parameter] = [p for p in document["paths"][path][method]["parameters"] if p["name"] == name]
    return parameter["schema"]


def test_the_document_says_what_an_id_and_a_limit_are(document):
    assert _parameter(
        document, "/v1/conversations/{conversation_id}", "get", "conversation_id"
    ) == {
        "type": "string",
        "format": "uuid",
    }
    assert _parameter(document, "/v1/legal-holds/{hold_id}", "get", "hold_id") == {
        "type": "integer",
        "minimum": 1,
    }
    assert _parameter(document, "/v1/conversations", "get", "limit") == {
        "type": "integer",
        "minimum": 1,
        "maximum": 200,
    }
    search = document["components"]["schemas"]["SearchInRequest"]["properties"]["limit"]
    assert (search["minimum"], search["maximum"]) == (1, 200)


@pytest.mark.parametrize("limit", [True, False, 2.5, "true"])
def test_a_limit_that_is_not_a_whole_number_is_refused(api, limit):
    conversation = api.post("/v1/conversations", {}, format="json").json()
    response = api.post(
        f"/v1/conversations/{conversation['id']}/search",
        {"query": "refund", "limit": limit},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_limit"


def test_a_query_limit_of_true_is_refused(api):
    response = api.get("/v1/conversations?limit=true")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_limit"


@pytest.mark.parametrize("body", ["null", "[]", '"text"', "3"])
def test_a_body_that_is_not_an_object_is_refused(api, body):
    response = api.generic("POST", "/v1/conversations", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["message"] == "The request body must be a JSON object."


def test_metrics_refuse_a_malformed_conversation_id(api):
    for value in ["nope", "123"]:
        response = api.get(f"/v1/metrics?conversationId={value}")
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_id"
