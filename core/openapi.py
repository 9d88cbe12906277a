"""Tightens the generated OpenAPI document where drf-spectacular cannot see the rules.

Path ids are matched as ``<str:...>`` so that a malformed id gets the API's own 400
(``invalid_id``) rather than Django's HTML 404; the document still says what a valid id
is, so that clients and fuzzers generate requests the API accepts. ``limit`` is parsed
by ``core.paging.parse_limit`` wherever it appears; its bounds are stated once here.
"""

from __future__ import annotations

from typing import Any

from core.paging import PAGE_LIMIT_MAX

UUID_PATH_PARAMETERS = frozenset(
    {
        "conversation_id",
        "observation_id",
        "reflection_id",
        "pin_id",
        "run_id",
        "target_id",
    }
)
INTEGER_PATH_PARAMETERS = frozenset(
    {"finding_id", "hold_id", "policy_id", "request_id", "sweep_id"}
)
ORIGINAL_TARGET_TYPES = ["message", "observation", "reflection"]
# governance.redaction.labels.LABEL; the angle brackets may be left out. The reveal
# also reads the misspellings older notes hold (<PERSON2>: labels.label_meant), which
# the pattern leaves out: which of those it reads depends on the workspace's own types,
# and a value the pattern allows must be one the route accepts.
PSEUDONYM_LABEL_PATTERN = (
    r"^(<[A-Z][A-Z0-9_]{0,49}_[1-9][0-9]{0,9}>|[A-Z][A-Z0-9_]{0,49}_[1-9][0-9]{0,9})$"
)
UUID_QUERY_PARAMETERS = frozenset({"conversationId", "conversation_id"})
# Request bodies whose ``reason`` the service requires (``reason_required`` otherwise):
# the serializers leave it optional so that a missing reason gets that code.
REASON_REQUIRED = frozenset(
    {
        "ErasureRequestInRequest",
        "LegalHoldPlaceInRequest",
        "PatchedMemoryUpdateInRequest",
        "PatchedWorkspaceSettingsInRequest",
        "RevealInRequest",
    }
)
LIMIT_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX}


def _tighten_parameter(parameter: dict[str, Any]) -> None:
    name, where = parameter.get("name"), parameter.get("in")
    if where == "path" and name in UUID_PATH_PARAMETERS:
        parameter["schema"] = {"type": "string", "format": "uuid"}
    elif where == "path" and name in INTEGER_PATH_PARAMETERS:
        parameter["schema"] = {"type": "integer", "minimum": 1}
    elif where == "path" and name == "label":
        parameter["schema"] = {"type": "string", "pattern": PSEUDONYM_LABEL_PATTERN}
    elif where == "path" and name == "target_type":
        parameter["schema"] = {"type": "string", "enum": ORIGINAL_TARGET_TYPES}
    elif where == "query" and name == "limit":
        parameter["schema"] = dict(LIMIT_SCHEMA)
    elif where == "query" and name in UUID_QUERY_PARAMETERS:
        parameter["schema"] = {"type": "string", "format": "uuid"}
    elif where == "query" and name == "max_tokens":
        parameter["schema"] = {"type": "integer", "minimum": 1}


def _require_bodies_with_required_fields(paths: dict[str, Any], schemas: dict[str, Any]) -> None:
    """A request body whose schema requires a field is itself required: drf-spectacular
    leaves a PATCH body optional, and a request without one is refused."""
    for path_item in paths.values():
        for operation in path_item.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body or body.get("required"):
                continue
            for media in body.get("content", {}).values():
                name = media.get("schema", {}).get("$ref", "").rpartition("/")[2]
                if schemas.get(name, {}).get("required"):
                    body["required"] = True


def tighten_schema(result: dict[str, Any], **_: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            for parameter in operation.get("parameters", []):
                _tighten_parameter(parameter)
    schemas = result.get("components", {}).get("schemas", {})
    for name, component in schemas.items():
        properties = component.get("properties", {})
        if name in REASON_REQUIRED:
            properties["reason"] = {**properties["reason"], "pattern": r"\S"}
            component["required"] = sorted({*component.get("required", []), "reason"})
        if name == "PatchedWorkspaceSettingsInRequest":
            # A change that changes nothing is refused: one setting at least.
            component["anyOf"] = [{"required": ["fidelity"]}, {"required": ["contextMaxTokens"]}]
            fidelities = schemas.get("FidelityEnum", {}).get("enum", [])
            component["properties"]["fidelity"]["enum"] = [*fidelities, "", None]
            component["additionalProperties"] = False  # unknown fields are refused
        if "limit" in properties:
            description = properties["limit"].get("description")
            properties["limit"] = dict(LIMIT_SCHEMA)
            if description:
                properties["limit"]["description"] = description
    _require_bodies_with_required_fields(result.get("paths", {}), schemas)
    return result
