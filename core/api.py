"""What every API view builds on: strict input fields, input validation and the error
responses in the schema. The base views that know the calling key, its workspace and the
acting identity are tenancy's (``tenancy.api_base``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from core.errors import MemdeskError
from core.paging import PAGE_LIMIT_DEFAULT, parse_limit

_SURROGATE = re.compile(r"[\ud800-\udfff]")


class FastProhibitSurrogateCharactersValidator(ProhibitSurrogateCharactersValidator):
    """DRF's rule, checked in C: its own validator calls ``ord()`` on every character in
    Python, about 1 ms of CPU for a 100-message bulk append (docs/benchmarks/2026-11-29.md,
    "Bulk ingest through the API")."""

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found:
            message = self.message.format(code_point=ord(found.group()))
            raise serializers.ValidationError(message, code=self.code)


# A text that is more than whitespace, as a field that trims it and refuses it blank
# reads it: said in the document too (as ``pattern``), where JSON Schema's \s leaves out
# \x1c-\x1f and \x85, which Python strips (a name of "\x85" was schema-valid and refused).
NOT_ONLY_WHITESPACE = RegexValidator(
    r"[^\s\x1c-\x1f\x85]", "Write something other than spaces.", code="blank"
)


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text;
    one that may not be blank says in the document that spaces alone are blank."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            FastProhibitSurrogateCharactersValidator()
            if isinstance(validator, ProhibitSurrogateCharactersValidator)
            else validator
            for validator in self.validators
        ]
        if not self.allow_blank and self.trim_whitespace:
            self.validators.append(NOT_ONLY_WHITESPACE)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)



class StrictRegexField(serializers.RegexField):
    """A RegexField that refuses numbers and booleans instead of matching their text."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only: DRF's BooleanField also takes "yes", "on", 1."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictFloatField(serializers.FloatField):
    """A JSON number only: DRF's FloatField also takes false as 0.0 and "0.5" as 0.5."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return float(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: DRF's IntegerField also takes "30", "٣٠" (Arabic-Indic
    digits), 30.0 and true. Query parameters, text by nature, have their parsers
    (``parse_limit``); a JSON body says a number as a number."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class StrictDateTimeField(serializers.DateTimeField):
    """ISO 8601 as printable ASCII text only: DRF's parser also reads other scripts'
    digits as digits and ignores a NUL or a zero-width space inside the text, so a value
    no client meant would be stored as a date."""

    def to_internal_value(self, value: Any) -> Any:
        if not isinstance(value, str) or not (value.isascii() and value.isprintable()):
            self.fail("invalid", format="YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]")
        return super().to_internal_value(value)


def text_field(**kwargs: Any) -> StrictCharField:
    """Text as sent: whitespace is content (a message may be indented code)."""
    return StrictCharField(trim_whitespace=False, **kwargs)


# Metadata is the agent's own JSON; these bounds keep it storable in jsonb and SQLite's
# text, readable back, and cheap to walk.
METADATA_MAX_DEPTH = 32
METADATA_MAX_BYTES = 64 * 1024


class MetadataField(serializers.DictField):
    """A JSON object of the client's own, checked all the way down: every key and string
    storable (no lone surrogate, no NUL), every number finite, nested at most
    ``METADATA_MAX_DEPTH`` deep and at most ``METADATA_MAX_BYTES`` as JSON. A value
    either check refuses would be stored and then break every read of its row."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value = super().to_internal_value(data)
        _check_json(value)
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
        if size > METADATA_MAX_BYTES:
            raise serializers.ValidationError(
                f"must be at most {METADATA_MAX_BYTES // 1024} KB as JSON; got {size} bytes."
            )
        return value


def _check_json(value: Any) -> None:
    """Walk ``value`` without recursion; raise a ValidationError naming the first path
    that cannot be stored. The message never repeats the bad text itself."""
    stack: list[tuple[str, Any, int]] = [("", value, 1)]
    while stack:
        path, item, depth = stack.pop()
        if depth > METADATA_MAX_DEPTH:
            raise serializers.ValidationError(
                f"is nested more than {METADATA_MAX_DEPTH} levels deep (at {path or 'the top'})."
            )
        if isinstance(item, dict):
            for key, child in item.items():
                _check_text(str(key), f"{path}.{key}" if path else str(key), is_key=True)
                stack.append((f"{path}.{key}" if path else str(key), child, depth + 1))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", child, depth + 1) for i, child in enumerate(item))
        elif isinstance(item, str):
            _check_text(item, path)
        elif isinstance(item, float) and not math.isfinite(item):
            raise serializers.ValidationError(
                f"{path or 'value'}: numbers must be finite; this one is out of range."
            )


def _check_text(text: str, path: str, *, is_key: bool = False) -> None:
    where = f"the key {_printable_path(path)}" if is_key else _printable_path(path)
    if "\x00" in text:
        raise serializers.ValidationError(f"{where} holds NUL (U+0000), which cannot be stored.")
    if _SURROGATE.search(text):
        raise serializers.ValidationError(
            f"{where} holds a lone surrogate (U+D800 to U+DFFF), which is not text."
        )


def _printable_path(path: str) -> str:
    # The path is made of the client's keys: it goes back in the error body, so it must
    # be encodable itself.
    return _SURROGATE.sub("\ufffd", path.replace("\x00", "\\0")) or "value"


class ClosedSerializer(serializers.Serializer):
    """A request body that refuses the fields it does not know, each by name. For the
    routes that delete, sweep or govern: a misspelt or unsupported field there would
    otherwise be dropped and the request run as if it had not been sent (a dry run
    asked for, and a real sweep run). The schema says so (``additionalProperties``)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                known = ", ".join(self.fields) or "no field"
                message = f"unknown field; this request takes {known}."
                # The names go back in the error body: made encodable first.
                raise serializers.ValidationError(
                    {_printable_path(name): [message] for name in unknown}
                )
        return super().to_internal_value(data)


# drf-spectacular leaves OpenApiExtension.__init_subclass__ unannotated.
class ClosedSerializerExtension(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """Every closed body's schema says ``additionalProperties: false``: the fuzz tests
    and clients' generators must not send fields the route refuses."""

    target_class = ClosedSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        schema["additionalProperties"] = False
        return schema


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
    return query_values(serializer_class, request.query_params)


def query_values(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """``query_params`` for values that come from elsewhere than a query string (the MCP
    tools' arguments), refused with the same codes and sentences."""
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        name, messages = next(iter(serializer.errors.items()))
        codes: dict[str, str] = getattr(serializer_class, "error_codes", {})
        raise MemdeskError(codes.get(name, f"invalid_{name}"), str(messages[0]), field=name)
    return dict(serializer.validated_data)


# A reason says why in a sentence or a paragraph; it is kept in every audit event of the
# change, which is never deleted.
REASON_MAX_CHARS = 2000


def reason_field(**kwargs: Any) -> StrictCharField:
    """``reason``: why a change is made, kept in the audit trail; at most
    ``REASON_MAX_CHARS``. Optional here: the services say where one is required."""
    kwargs.setdefault("required", False)
    return text_field(allow_blank=True, max_length=REASON_MAX_CHARS, **kwargs)


class ReasonIn(ClosedSerializer):
    reason = reason_field()


def request_reason(request: Request, body: type[ClosedSerializer] = ReasonIn) -> str:
    """The reason for a change, from ``?reason=`` or the JSON body: DELETE bodies are
    optional and some clients cannot send one. Either is checked as the body is; the
    body is validated by ``body`` (a route whose body takes more than a reason names
    its own), so an unknown field is refused even when the reason is in the query."""
    data = validated(body, request.data) if request.data else {}
    if request.query_params.get("reason"):
        return str(validated(ReasonIn, {"reason": request.query_params["reason"]})["reason"])
    return str(data.get("reason") or "")


class ErrorOut(serializers.Serializer):
    error = serializers.CharField(
        help_text="What is wrong, in one sentence: the NAMS clients put it in the exception "
        "they raise."
    )
    code = serializers.CharField(
        help_text="A stable machine code to match on, e.g. invalid_limit, not_found."
    )
    message = serializers.CharField(help_text="The same sentence as error.")
    field = serializers.CharField(required=False, help_text="The offending field, if one.")
    details = serializers.DictField(
        required=False, help_text="invalid_request only: every invalid field and its errors."
    )


ERRORS = {
    400: OpenApiResponse(ErrorOut, description="Bad input; `field` names what is wrong."),
    401: OpenApiResponse(ErrorOut, description="Missing, unknown or revoked API key."),
    403: OpenApiResponse(ErrorOut, description="X-Workspace-Id is not the key's workspace."),
    404: OpenApiResponse(ErrorOut, description="Not found in this workspace."),
}


def errors_needing(scope: str) -> dict[int, OpenApiResponse]:
    """The error responses of a route that needs ``scope``."""
    description = f"Needs a {scope} API key (or a higher scope), or X-Workspace-Id is wrong."
    return {**ERRORS, 403: OpenApiResponse(ErrorOut, description=description)}
