"""The API's one request parser: DRF's strict JSON, with the inputs Python's json module
lets through or crashes on (numbers out of range, nesting past the stack, a key given
twice in one object) turned into a 400 that says what is wrong."""

from __future__ import annotations

import codecs
import json
import math
from typing import IO, Any

from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.utils.json import strict_constant


def _finite_float(text: str) -> float:
    # 1e400 is valid JSON that Python reads as infinity, which neither PostgreSQL's
    # jsonb nor a JSON reply can hold.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


def _object_of_unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # JSON leaves a repeated key to the reader, and Python keeps the last: a body with
    # "role" twice would be read as one thing by a proxy or a log and stored as another.
    body = dict(pairs)
    if len(body) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"the key {key[:40]!r} appears more than once in one object")
            seen.add(key)
    return body


class StrictJSONParser(JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        encoding = (parser_context or {}).get("encoding") or "utf-8"
        try:
            body = json.load(
                codecs.getreader(encoding)(stream),
                parse_constant=strict_constant,
                parse_float=_finite_float,
                object_pairs_hook=_object_of_unique_keys,
            )
        except RecursionError:
            # The C scanner recurses once per level: 100,000 nested arrays exhaust the
            # stack before any check of ours could run.
            raise ParseError("JSON parse error - the body is nested too deeply") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        # Every request body the API documents is an object; null or a bare list would
        # otherwise read as "no fields given" to a view that defaults them.
        if not isinstance(body, dict):
            raise ValidationError({"non_field_errors": ["The request body must be a JSON object."]})
        return body
