"""What the engine found in a text, kept in this process, so that the scan never reads the
same text twice: a greeting, a signature, a tool's output or a pasted notice that
arrives in many messages and conversations is read by spaCy and the recognizers once.

What decides the detections, and so the key: the text, the policy (``PolicySpec`` but
its version: the workspace, entity types, thresholds, operators, allow and deny lists,
custom recognizers; a text is never reused across workspaces), and, of the names the
workspace holds pseudonyms for (``governance.redaction.recurrence``), those the text
holds. A pseudonym numbered since then changes the key, so a name the workspace learnt
is found again in a text read before.

Privacy: an entry is a keyed digest (BLAKE2b with a key drawn when the process starts,
never stored, so a digest says nothing outside this process) and the detections: types,
offsets, scores, recognizer names, never a value. Nothing is written anywhere; the
entries go with the process, and the oldest go first past ``SIZE``. Only the scan of
stored messages (``governance.redaction.scan``, run by workers) reuses: an answer that
comes sooner when someone scanned the same text before would tell a caller of a
synchronous path (a preview) what another text holds.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from governance.redaction.presidio import Detection, PolicySpec
    from governance.redaction.recurrence import Candidate

# Texts remembered per process: a few MB at most (a digest and a handful of detections).
SIZE = 20_000


@lru_cache(maxsize=64)
def _settings(spec: PolicySpec) -> bytes:
    """The policy's detection settings, as JSON rather than ``repr``: a policy read from
    the database and one just created hold the same operator as a str and as a
    TextChoices member."""
    return json.dumps(asdict(replace(spec, version=0)), sort_keys=True, default=str).encode()


class FoundBefore:
    """The detections of texts read before, by ``key``; thread-safe."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._secret = secrets.token_bytes(32)
        self._entries: OrderedDict[bytes, tuple[Detection, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def key(
        self,
        spec: PolicySpec,
        text: str,
        candidates: Sequence[Candidate],
        held: Mapping[str, str],
    ) -> bytes:
        """The digest of what decides ``text``'s detections: the policy's settings, the
        text, and which of its ``candidates`` (``recurrence.candidates``) the workspace
        holds pseudonyms for (``held``: normalised value -> type)."""
        from governance.redaction.pseudonyms import normalise

        digest = hashlib.blake2b(key=self._secret, digest_size=32)
        digest.update(_settings(spec))
        digest.update(b"\0")
        digest.update(text.encode("utf-8", "surrogatepass"))
        names = {normalise("PERSON", value) for _, _, value in candidates}
        for name in sorted(names & held.keys()):
            digest.update(b"\0" + name.encode("utf-8", "surrogatepass") + b"\0")
            digest.update(held[name].encode())
        return digest.digest()

    def read_once(
        self, keys: Sequence[bytes], read: Callable[[list[int]], list[list[Detection]]]
    ) -> list[list[Detection]]:
        """The detections of the texts of ``keys``: those kept, and for the others
        ``read`` of their indices, one text per key, kept for next time."""
        detections: dict[bytes, list[Detection]] = {}
        first: dict[bytes, int] = {}
        for index, key in enumerate(keys):
            if key in detections or key in first:
                continue
            earlier = self.get(key)
            if earlier is None:
                first[key] = index
            else:
                detections[key] = earlier
        for key, found in zip(first, read(list(first.values())), strict=True):
            self.put(key, found)
            detections[key] = found
        return [list(detections[key]) for key in keys]

    def get(self, key: bytes) -> list[Detection] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return list(found)

    def put(self, key: bytes, detections: Sequence[Detection]) -> None:
        with self._lock:
            self._entries[key] = tuple(detections)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
