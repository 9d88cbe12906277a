"""Signed checkpoints of the audit chain, kept outside the database.

A checkpoint says "in workspace W, event #N had hash H", at a time, signed with an
HMAC of the audit key. Someone who rewrites the audit table, even recomputing every
hash, cannot change what was written here, and without the key cannot write a new line
that verifies: ``verify_audit`` compares the chain with every checkpoint.

Lines go to a *sink*: any object with ``append(line)``, ``lines()`` and ``__str__``
(see ``CheckpointSink``), named by its dotted path in ``MEMDESK_AUDIT_CHECKPOINT_SINK``
and built with no arguments. The default, ``FileCheckpointSink``, appends JSON Lines to
``MEMDESK_AUDIT_CHECKPOINT_PATH``. A line carries ids, sequence numbers, hashes and a
time: never an event's content.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from django.conf import settings
from django.utils.crypto import salted_hmac
from django.utils.module_loading import import_string

CHECKPOINT_SALT = "memdesk.audit.checkpoint"
LINE_FORMAT = 1


class CheckpointSink(Protocol):
    """Where checkpoints are kept. ``append`` must never change or drop an earlier line;
    ``lines`` yields every line appended, oldest first; ``str()`` says where, for
    messages ("file /srv/audit/checkpoints.jsonl")."""

    def append(self, line: str) -> None: ...

    def lines(self) -> Iterator[str]: ...


class FileCheckpointSink:
    """An append-only JSON Lines file, created with its folder when first written.

    Every line is one ``write`` on a descriptor opened with ``O_APPEND``, so lines from
    concurrent processes never interleave. The file is opened for each line, not kept
    open, so a Celery worker's forked children and a moved file need no special care.
    With ``MEMDESK_AUDIT_CHECKPOINT_FSYNC`` each line is fsynced before ``append``
    returns; without it the line is in the operating system's hands (it survives
    Memdesk crashing, not the machine losing power)."""

    def __init__(self, path: Path | str | None = None, *, fsync: bool | None = None) -> None:
        self.path = Path(path or settings.MEMDESK_AUDIT_CHECKPOINT_PATH)
        self.fsync = settings.MEMDESK_AUDIT_CHECKPOINT_FSYNC if fsync is None else fsync

    def __str__(self) -> str:
        return f"file {self.path}"

    def append(self, line: str) -> None:
        data = (line.rstrip("\n") + "\n").encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
        try:
            fd = os.open(self.path, flags, 0o640)
        except FileNotFoundError:  # the folder, on the first line only
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, flags, 0o640)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def lines(self) -> Iterator[str]:
        try:
            handle = self.path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        with handle:
            for line in handle:
                yield line.rstrip("\n")


def checkpoint_sink() -> CheckpointSink:
    """The configured sink, built afresh (it reads its settings when built)."""
    sink: CheckpointSink = import_string(settings.MEMDESK_AUDIT_CHECKPOINT_SINK)()
    return sink


@dataclass(frozen=True)
class Checkpoint:
    workspace_id: str
    sequence: int
    event_id: int
    hash: str
    written_at: datetime
    key_id: str


@dataclass(frozen=True)
class CheckpointLine:
    """One line of the sink: a checkpoint whose signature verified, or a problem."""

    number: int  # 1 for the sink's first line
    workspace_id: str  # as the line says, "" when it cannot be read
    checkpoint: Checkpoint | None
    problem: str = ""


def _canonical(body: Mapping[str, object]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _signature(body: Mapping[str, object], secret: str) -> str:
    return salted_hmac(
        CHECKPOINT_SALT, _canonical(body), secret=secret, algorithm="sha256"
    ).hexdigest()


def checkpoint_line(
    *,
    workspace_id: object,
    sequence: int,
    event_id: int,
    event_hash: str,
    written_at: datetime,
    key_id: str,
    secret: str,
) -> str:
    """The signed JSON line for one chain head."""
    body: dict[str, object] = {
        "v": LINE_FORMAT,
        "workspace": str(workspace_id),
        "sequence": sequence,
        "event": event_id,
        "hash": event_hash,
        "at": written_at.isoformat(),
        "key": key_id,
    }
    return _canonical({**body, "sig": _signature(body, secret)})


def utc_text(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC")


def checkpoint_parse(
    raw: str, *, number: int, keys: Mapping[str, str], where: str
) -> CheckpointLine:
    """Read and verify one line; ``keys`` maps key ids to the secrets this server holds."""
    label = f"checkpoint line {number} of {where}"
    body: object = None
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise TypeError("not an object")
        signature = body.pop("sig")
        workspace_id = body["workspace"]
        sequence, event_id = body["sequence"], body["event"]
        event_hash, key_id = body["hash"], body["key"]
        written_at = datetime.fromisoformat(body["at"])
        if body.get("v") != LINE_FORMAT:
            raise ValueError(f"format {body.get('v')!r}")
        if not all(isinstance(v, str) for v in (signature, workspace_id, event_hash, key_id)):
            raise TypeError("a text field is not text")
        if not all(type(v) is int for v in (sequence, event_id)):
            raise TypeError("a number field is not a whole number")
    except (ValueError, TypeError, KeyError) as exc:
        workspace_id = body.get("workspace", "") if isinstance(body, dict) else ""
        return CheckpointLine(
            number,
            workspace_id if isinstance(workspace_id, str) else "",
            None,
            f"{label} is not a checkpoint ({type(exc).__name__}: {exc}): it was edited or damaged",
        )
    secret = keys.get(key_id)
    if secret is None:
        return CheckpointLine(
            number,
            workspace_id,
            None,
            f"{label} (written {utc_text(written_at)}) was signed with key {key_id}, which this "
            "server does not hold: add that key to MEMDESK_AUDIT_OLD_KEYS, or the line was "
            "forged",
        )
    if not hmac.compare_digest(signature, _signature(body, secret)):
        return CheckpointLine(
            number,
            workspace_id,
            None,
            f"{label} (it says: workspace {workspace_id}, event #{sequence}, written "
            f"{utc_text(written_at)}) does not carry a valid signature: the line was edited, "
            "or written by someone without the audit key",
        )
    checkpoint = Checkpoint(workspace_id, sequence, event_id, event_hash, written_at, key_id)
    return CheckpointLine(number, workspace_id, checkpoint)


def checkpoints_read(
    *, sink: CheckpointSink, keys: Mapping[str, str], workspace_id: object | None = None
) -> Iterator[CheckpointLine]:
    """Every line of the sink, verified, oldest first; only the lines that mention
    ``workspace_id`` when it is given (a line edited beyond reading names no workspace,
    and is then reported only when every workspace is verified)."""
    where = str(sink)
    wanted = None if workspace_id is None else str(workspace_id)
    try:
        for number, raw in enumerate(sink.lines(), start=1):
            if not raw.strip():
                continue
            if wanted is not None and wanted not in raw:
                continue
            line = checkpoint_parse(raw, number=number, keys=keys, where=where)
            if wanted is None or line.workspace_id == wanted:
                yield line
    except OSError as exc:
        # Verification must fail, not pass as if there were no checkpoints.
        problem = f"the checkpoints cannot be read from {where}: {exc.strerror or exc}"
        yield CheckpointLine(0, wanted or "", None, problem)
