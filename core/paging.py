"""Query parameters every list route shares, and the one keyset pager.

A cursor is opaque to clients: base64url of a JSON array holding the sort key of the
last row of the page. Every list in Memdesk pages newest first on a unique key (a
timestamp with the id as tie-breaker, or an increasing id), so the next page is "rows
strictly after this key in that order", which stays correct while rows are added.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from django.core.exceptions import ValidationError
from django.db.models import Field, Model, Q, QuerySet

from core.errors import MemdeskError, wire_field

PAGE_LIMIT_MAX = 200
PAGE_LIMIT_DEFAULT = 50
# The largest number a 64-bit column holds: SQLite refuses to compare a larger one with a
# column in a range (a cursor's "less than") rather than find nothing.
INT64_MAX = 2**63 - 1

ModelT = TypeVar("ModelT", bound=Model)


def is_ascii_digits(raw: str) -> bool:
    """True for "0".."9" only: ``str.isdigit()`` also accepts "²" and "¹", which
    ``int()`` refuses, and ``int()`` accepts other scripts' digits, which no id uses."""
    return raw.isascii() and raw.isdecimal()


def whole_number(raw: object) -> int | None:
    """``raw`` as a whole number, or None: a JSON integer, or text of the digits "0".."9"
    alone. Not a boolean (JSON true is not 1), a float (2.5 is not two), a sign, spaces,
    nor another script's digits, which ``int()`` reads ("٥" is 5)."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and is_ascii_digits(raw):
        try:
            return int(raw)
        except ValueError:  # more digits than int() reads (sys.int_info): out of range anyway
            return None
    return None


def parse_limit(raw: object, *, default: int = PAGE_LIMIT_DEFAULT) -> int:
    if raw is None or raw == "":
        return default
    limit = whole_number(raw)
    if limit is None or not 1 <= limit <= PAGE_LIMIT_MAX:
        raise _invalid_limit(raw)
    return limit


def parse_body_limit(raw: object, *, default: int) -> int:
    """``limit`` in a JSON body: a JSON integer. Text is how a query string spells a
    number; in JSON, "5" is a string, refused as ``true`` is."""
    if isinstance(raw, str):
        raise _invalid_limit(raw)
    return parse_limit(raw, default=default)


def _invalid_limit(raw: object) -> MemdeskError:
    return MemdeskError(
        "invalid_limit",
        f"limit must be a whole number from 1 to {PAGE_LIMIT_MAX}; got {raw!r}.",
        field="limit",
    )


def parse_uuid(raw: object, *, field: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        raise MemdeskError(
            "invalid_id", f"{wire_field(field)} must be a UUID; got {raw!r}.", field=field
        ) from None


def parse_pk(raw: object, *, field: str) -> int:
    value = whole_number(raw)
    if value is None or value < 1:
        raise MemdeskError(
            "invalid_id",
            f"{wire_field(field)} must be a positive whole number; got {raw!r}.",
            field=field,
        )
    return value


@dataclass(frozen=True)
class Page(Generic[ModelT]):
    items: list[ModelT]
    next_cursor: str | None


def _invalid_cursor() -> MemdeskError:
    return MemdeskError("invalid_cursor", "cursor is not one this server returned.", field="cursor")


def _encode(values: list[Any]) -> str:
    raw = json.dumps([v.isoformat() if hasattr(v, "isoformat") else str(v) for v in values])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(queryset: QuerySet[ModelT], keys: tuple[str, ...], cursor: str) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = json.loads(base64.urlsafe_b64decode(padded).decode())
        # ``_encode`` writes each key as ASCII text: anything else (null, a number, a
        # list) was never a cursor, and null would reach the query as "IS NULL".
        if (
            not isinstance(raw, list)
            or len(raw) != len(keys)
            or not all(isinstance(value, str) and value.isascii() for value in raw)
        ):
            raise ValueError
        # Each field parses its own value back (a datetime, a UUID, an integer).
        opts = queryset.model._meta
        values = []
        for key, value in zip(keys, raw, strict=True):
            field = opts.get_field(key)
            if not isinstance(field, Field):  # a reverse relation cannot be a paging key
                raise TypeError(key)
            values.append(_storable(field.to_python(value)))
        return values
    except (
        ValueError,
        TypeError,
        OverflowError,
        ValidationError,
        binascii.Error,
        UnicodeDecodeError,
    ):
        raise _invalid_cursor() from None


def _storable(value: Any) -> Any:
    """``value`` if the database can compare a column with it; else ValueError. A
    number past 64 bits, or a time the UTC conversion takes past year 1 or 9999, fails
    the query itself (OverflowError) instead of matching nothing."""
    if isinstance(value, int) and not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise ValueError(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        value.astimezone(UTC)  # raises OverflowError past the calendar's ends
    return value


def keyset_page(
    queryset: QuerySet[ModelT], *, keys: tuple[str, ...], limit: int, cursor: str | None
) -> Page[ModelT]:
    """One page of ``queryset`` ordered by ``keys``, all descending (newest first).

    The last key must be unique (the primary key, or an increasing sequence).
    """
    if cursor:
        after = _decode(queryset, keys, cursor)
        # Rows strictly after the cursor in descending lexicographic order of ``keys``.
        condition = Q()
        for index, key in enumerate(keys):
            equal_before = {keys[i]: after[i] for i in range(index)}
            condition |= Q(**equal_before, **{f"{key}__lt": after[index]})
        queryset = queryset.filter(condition)
    rows = list(queryset.order_by(*(f"-{key}" for key in keys))[: limit + 1])
    if len(rows) <= limit:
        return Page(items=rows, next_cursor=None)
    last = rows[limit - 1]
    return Page(items=rows[:limit], next_cursor=_encode([getattr(last, key) for key in keys]))
