"""An observation's or a reflection's version on the wire: the ETag its reads and
corrections answer with, and the version a correction says it was made from, from
``If-Match`` or the body's ``version``. The services check that version under the
note's row lock; a stale ``If-Match`` is answered 412 (the HTTP precondition failed), a
stale body ``version`` 409 (the service's ``version_conflict``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import ErrorOut
from core.errors import MemdeskError
from memory.models import Observation, Reflection
from memory.services.notes import NoteVersionConflict

# A note's ETag is its version, quoted: the strong form If-Match compares.
_VERSION_ETAG = re.compile(r'\s*"([0-9]{1,10})"\s*')

IF_MATCH_PARAMETER = OpenApiParameter(
    "If-Match",
    location=OpenApiParameter.HEADER,
    required=False,
    description='The ETag a read of the note answered with ("3"), or *: the change is made '
    "only if the note is still at that version, else 412 and nothing changes. Left out, "
    "the change is made whatever the version.",
)
VERSION_ERRORS = {
    409: OpenApiResponse(
        ErrorOut,
        description="version_conflict: the body's version is no longer the note's (read it again).",
    ),
    412: OpenApiResponse(
        ErrorOut,
        description="precondition_failed: If-Match is no longer the note's ETag (read it again).",
    ),
}


def note_etag(note: Observation | Reflection) -> str:
    return f'"{note.version}"'


def with_etag(response: Response, note: Observation | Reflection) -> Response:
    response["ETag"] = note_etag(note)
    return response


@dataclass(frozen=True)
class ExpectedVersion:
    """The version a correction was made from, and where it was named."""

    version: int | None
    from_if_match: bool = False

    @classmethod
    def of(cls, request: Request, body_version: int | None = None) -> ExpectedVersion:
        """From the request's If-Match, else its body's ``version``; both: they must
        name the same version."""
        header = request.headers.get("If-Match")
        if header is None or header.strip() == "*":
            return cls(body_version)
        match = _VERSION_ETAG.fullmatch(header)
        if match is None:
            raise MemdeskError(
                "invalid_if_match",
                'If-Match takes the ETag a read of the note answered with (such as "3"), or *.',
            )
        version = int(match.group(1))
        if body_version is not None and body_version != version:
            raise MemdeskError(
                "conflicting_fields",
                f"If-Match names version {version} and the body's version is "
                f"{body_version}: send one of them, or the same version in both.",
                field="version",
            )
        return cls(version, from_if_match=True)

    @contextmanager
    def checked(self) -> Iterator[None]:
        """Around the service call: a stale If-Match is a 412, not the service's 409."""
        try:
            yield
        except NoteVersionConflict as conflict:
            if not self.from_if_match:
                raise
            raise MemdeskError(
                "precondition_failed",
                f'If-Match: "{conflict.expected_version}" is not this {conflict.kind}\'s '
                f"ETag: it was changed since and is now at version "
                f'{conflict.current_version} (ETag "{conflict.current_version}"). Read it '
                "again and make the change on what it says now.",
                status_code=412,
            ) from None
