"""What every API view builds on: strict input fields, input validation, the error
responses in the schema, and the base views that know the calling key, its workspace
and the acting identity."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any, ClassVar, cast

from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.validators import ProhibitSurrogateCharactersValidator
from rest_framework.views import APIView

from core.actors import Actor, ActorType
from core.auth import RequiresScope
from core.errors import MemdeskError
from core.paging import PAGE_LIMIT_DEFAULT, parse_limit
from memory.models import ApiKey, Workspace

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class FastProhibitSurrogateCharactersValidator(ProhibitSurrogateCharactersValidator):
    """DRF's rule, checked in C: its own validator calls ``ord()`` on every character in
    Python, about 1 ms of CPU for a 100-message bulk append (docs/benchmarks.md)."""

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found:
            message = self.message.format(code_point=ord(found.group()))
            raise serializers.ValidationError(message, code=self.code)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            FastProhibitSurrogateCharactersValidator()
            if isinstance(validator, ProhibitSurrogateCharactersValidator)
            else validator
            for validator in self.validators
        ]

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def text_field(**kwargs: Any) -> StrictCharField:
    """Text as sent: whitespace is content (a message may be indented code)."""
    return StrictCharField(trim_whitespace=False, **kwargs)


def validated(
    serializer_class: type[serializers.Serializer], data: Any, *, partial: bool = False
) -> dict[str, Any]:
    """The serializer's validated data, or a 400 naming the first bad field."""
    if not isinstance(data, dict):
        raise MemdeskError("invalid_request", "The body must be a JSON object.")
    serializer = serializer_class(data=data, partial=partial)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class ParsedField(serializers.Field):
    """A query parameter read by one of the shared parsers (``parse_limit``,
    ``parse_max_tokens``), so a serializer and a plain call refuse the same values with
    the same sentence."""

    def __init__(self, parse: Callable[[Any], Any], *, default: Any = None) -> None:
        super().__init__(required=False, default=default)
        self.parse = parse

    def to_internal_value(self, data: Any) -> Any:
        try:
            return self.parse(data)
        except MemdeskError as error:
            raise serializers.ValidationError(error.message) from None

    def to_representation(self, value: Any) -> Any:
        return value


def limit_field(*, default: int = PAGE_LIMIT_DEFAULT) -> ParsedField:
    """``limit``: a whole number from 1 to 200 (``invalid_limit`` otherwise, as NAMS)."""
    return ParsedField(lambda raw: parse_limit(raw, default=default), default=default)


class LimitQuery(serializers.Serializer):
    limit = limit_field()


def query_params(
    serializer_class: type[serializers.Serializer], request: Request
) -> dict[str, Any]:
    """The request's query parameters, validated by ``serializer_class``.

    A bad value is a 400 whose code names the parameter (``invalid_limit``,
    ``invalid_max_tokens``), or the one the serializer's ``error_codes`` gives it:
    clients match on those codes.
    """
    serializer = serializer_class(data=request.query_params)
    if not serializer.is_valid():
        name, messages = next(iter(serializer.errors.items()))
        codes: dict[str, str] = getattr(serializer_class, "error_codes", {})
        raise MemdeskError(codes.get(name, f"invalid_{name}"), str(messages[0]), field=name)
    return dict(serializer.validated_data)


class ReasonIn(serializers.Serializer):
    reason = text_field(required=False, allow_blank=True)


def request_reason(request: Request) -> str:
    """The reason for a change, from ``?reason=`` or the JSON body: DELETE bodies are
    optional and some clients cannot send one."""
    if request.query_params.get("reason"):
        return request.query_params["reason"]
    if request.data:
        return validated(ReasonIn, request.data).get("reason") or ""
    return ""


class ErrorOut(serializers.Serializer):
    error = serializers.CharField(help_text="A stable code, e.g. invalid_limit, not_found.")
    message = serializers.CharField(help_text="What is wrong, in one sentence.")
    field = serializers.CharField(required=False, help_text="The offending field, if one.")
    details = serializers.DictField(
        required=False, help_text="invalid_request only: every invalid field and its errors."
    )


ERRORS = {
    400: OpenApiResponse(ErrorOut, description="Bad input; `field` names what is wrong."),
    401: OpenApiResponse(ErrorOut, description="Missing, unknown or revoked API key."),
    403: OpenApiResponse(ErrorOut, description="X-Workspace-Id is not the key's workspace."),
    404: OpenApiResponse(ErrorOut, description="No such object in this workspace."),
}


def errors_needing(scope: str) -> dict[int, OpenApiResponse]:
    """The error responses of a route that needs ``scope``."""
    description = f"Needs a {scope} API key (or a higher scope), or X-Workspace-Id is wrong."
    return {**ERRORS, 403: OpenApiResponse(ErrorOut, description=description)}


CURATOR_ERRORS = errors_needing(ApiKey.Scope.CURATOR)
COMPLIANCE_ERRORS = errors_needing(ApiKey.Scope.COMPLIANCE)
ADMIN_ERRORS = errors_needing(ApiKey.Scope.ADMIN)


class ApiView(APIView):
    # Base of every /v1 view: the authenticated key, its workspace, the acting identity.
    # (A comment, not a docstring: drf-spectacular would show a docstring on every route.)

    # Service field names that the wire spells otherwise than in camelCase.
    wire_fields: ClassVar[dict[str, str]] = {}

    # The least key scope each HTTP method needs; a method not named needs
    # ``required_scope``.
    required_scope: ClassVar[str] = ApiKey.Scope.AGENT
    required_scopes: ClassVar[dict[str, str]] = {}

    def get_permissions(self) -> list[BasePermission]:
        method = (self.request.method or "GET").upper()
        scope = self.required_scopes.get(method, self.required_scope)
        return [IsAuthenticated(), RequiresScope(scope)]

    @property
    def api_key(self) -> ApiKey:
        # ApiKeyAuthentication is the only authenticator and IsAuthenticated guards every view.
        return cast(ApiKey, self.request.auth)

    @property
    def workspace(self) -> Workspace:
        return self.api_key.workspace

    def actor(self) -> Actor:
        request = self.request
        return Actor(
            type=ActorType.API_KEY,
            id=str(self.api_key.pk),
            role=self.api_key.scope,
            name=self.api_key.name or self.api_key.prefix,
            request_id=request.headers.get("X-Request-Id", "")[:100] or uuid.uuid4().hex,
            ip_address=request.META.get("REMOTE_ADDR"),
        )


class ComplianceApiView(ApiView):
    # Governance routes: audit, retention, erasure, holds, redaction review, originals.
    required_scope = ApiKey.Scope.COMPLIANCE
