"""The OpenAPI document at /v1/schema/ read as JSON Schema, to validate real responses
against what it documents (tests/memory/test_openapi.py and the governance API tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.http import HttpResponse
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry
from referencing.jsonschema import DRAFT202012
from rest_framework.test import APIClient

OPENAPI_JSON = "application/vnd.oai.openapi+json"
DOCUMENT_URI = "urn:memdesk:v1:openapi"
NOT_OPERATIONS = {"parameters", "summary", "description", "servers"}

# --- the document as JSON Schema ------------------------------------------------------------


def as_json_schema(node: Any) -> Any:
    """OpenAPI 3.0 schema objects to JSON Schema: ``nullable`` becomes a null alternative,
    and an object that declares its properties is closed, so a field that is sent but not
    documented fails validation."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: as_json_schema(value) for key, value in node.items()}
    if "properties" in converted and "additionalProperties" not in converted:
        converted["additionalProperties"] = False
    if converted.pop("nullable", False):
        return {"anyOf": [converted, {"type": "null"}]}
    return converted


FORMATS = FormatChecker()


# jsonschema checks date-time only with an optional dependency; this is the same rule.
@FORMATS.checks("date-time", raises=ValueError)
def _is_aware_datetime(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return datetime.fromisoformat(value).tzinfo is not None


def _pointer(*parts: str) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@dataclass(frozen=True)
class OpenApi:
    document: dict[str, Any]
    registry: Registry

    def operations(self) -> list[tuple[str, str]]:
        return [
            (path, method)
            for path, item in self.document["paths"].items()
            for method in item
            if method not in NOT_OPERATIONS
        ]

    def validator(self, *parts: str) -> Draft202012Validator:
        schema = {"$ref": DOCUMENT_URI + "#" + _pointer(*parts)}
        return Draft202012Validator(schema, registry=self.registry, format_checker=FORMATS)

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = self.registry.resolver(DOCUMENT_URI).lookup(node["$ref"]).contents
        return node

    def assert_documents(self, method: str, path: str, response: HttpResponse) -> None:
        operation = self.document["paths"][path][method]
        status = str(response.status_code)
        assert status in operation["responses"], (
            f"{method.upper()} {path} answered {status}, which the schema does not document"
        )
        documented = operation["responses"][status]
        if not response.content:
            assert "content" not in documented, f"{method.upper()} {path} {status} has no body"
            return
        media_type = response["Content-Type"].split(";")[0].strip()
        assert media_type in documented.get("content", {}), (
            f"{method.upper()} {path} {status} sent {media_type}; the schema documents "
            f"{sorted(documented.get('content', {}))}"
        )
        body = (
            json.loads(response.content)
            if media_type == "application/json"
            else response.content.decode()
        )
        validator = self.validator(
            "paths", path, method, "responses", status, "content", media_type, "schema"
        )
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
        assert not errors, f"{method.upper()} {path} {status}: " + "; ".join(
            f"{'/'.join(map(str, e.absolute_path)) or '<body>'}: {e.message}" for e in errors
        )


def openapi_document() -> OpenApi:
    """The document /v1/schema/ serves, checked to be served as OpenAPI JSON."""
    response = APIClient().get("/v1/schema/", HTTP_ACCEPT=OPENAPI_JSON)
    assert response.status_code == 200
    assert response["Content-Type"].startswith(OPENAPI_JSON)
    document = json.loads(response.content)
    resource = DRAFT202012.create_resource(as_json_schema(document))
    return OpenApi(document=document, registry=Registry().with_resource(DOCUMENT_URI, resource))
