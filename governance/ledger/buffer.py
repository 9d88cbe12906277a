"""Recording context reads without putting a database write in the read's path.

A web worker appends each read to a list and a daemon thread writes the list every
``MEMDESK_LEDGER_WINDOW_SECONDS`` (or sooner, at ``BATCH_ROWS``) in one COPY (an INSERT
off PostgreSQL): about 6% of a cached read's throughput (bench/ledger.py). A
clean stop writes what is left; a crash loses at most the reads of the last window, and
each row's ``writer`` and ``writer_seq`` (the process, and its n-th read) show the gap;
the next worker on the host says how many (governance/ledger/tally.py).
While the database refuses the write, the rows wait for the next window, up to
``MAX_ROWS_WAITING``: beyond that the oldest are dropped and counted in the log.
"""

from __future__ import annotations

import atexit
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from django.conf import settings
from django.db import (
    DatabaseError,
    IntegrityError,
    close_old_connections,
    connection,
    models,
    transaction,
)
from django.utils import timezone

from core.inserts import copy_rows, fields_of, insert_rows
from governance.audit.writer import audit_text_digest
from governance.ledger.tally import ServedTally, lost_reads_account
from governance.models import ContextManifest, ContextRead
from memory.models import Conversation
from tenancy.models import ApiKey

logger = logging.getLogger(__name__)

# A batch is written as soon as this many reads wait, before its window ends: a whole
# second's reads (about 550 per worker in bench/ledger.py) in one batch held the worker's
# interpreter long enough to double the reads' p99 (48 ms against 23 with the ledger off;
# 34 ms at 100 rows, docs/benchmarks.md).
BATCH_ROWS = 100
MAX_ROWS_WAITING = 100_000
STOP_SECONDS = 5.0


@dataclass(frozen=True)
class Reader:
    """Who read a context, and through which edge (``ContextRead.Edge``)."""

    api_key_id: Any | None
    scope: str
    edge: str

    @classmethod
    def rest(cls, api_key: ApiKey) -> Reader:
        return cls(api_key.pk, api_key.scope, ContextRead.Edge.REST)

    @classmethod
    def mcp(cls, api_key: ApiKey) -> Reader:
        return cls(api_key.pk, api_key.scope, ContextRead.Edge.MCP)


@dataclass(frozen=True)
class Served:
    """What was served: the versions the body was rendered from, its digest and tokens,
    and the status (200, or 304 when the caller already had it)."""

    memory_version: int
    last_seq: int
    body_sha256: str
    token_count: int | None
    status: int
    # Values in place of pseudonyms; the shape's version; with a query, the digest of
    # the body before its recalled section (``ContextRead``).
    reidentified: bool = False
    render_version: int = 0
    base_sha256: str = ""


class _Writer:
    """This process's name in the ledger and the count of its reads."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.name = f"{socket.gethostname()}:{self.pid}:{int(time.time())}"[:100]
        self._count = itertools.count(1)
        self._lock = threading.Lock()

    def next_seq(self) -> int:
        with self._lock:
            return next(self._count)


_writer: _Writer | None = None


def _current_writer() -> _Writer:
    global _writer
    if _writer is None or _writer.pid != os.getpid():  # forked: a writer of its own
        _writer = _Writer()
    return _writer


def query_digest(query: str) -> str:
    """The question's keyed digest (``audit_text_digest``), as the audit trail records a
    text: two reads' digests tell whether they asked the same, and without the server's
    secret nobody can test a guessed question against one."""
    return audit_text_digest(query) if query else ""


def context_read_logged(
    *,
    workspace_id: Any,
    conversation_id: Any,
    reader: Reader,
    fmt: str,
    max_tokens: int | None,
    query: str,
    recall: int | None,
    served: Served,
) -> None:
    """Record one context served: buffered in a web worker, written at once elsewhere."""
    writer = _current_writer()
    row = PendingRead(
        workspace_id=workspace_id,
        conversation_id=conversation_id,
        served_at=timezone.now(),
        api_key_id=reader.api_key_id,
        key_scope=reader.scope,
        edge=reader.edge,
        format=fmt,
        max_tokens=max_tokens,
        query_digest=query_digest(query),
        recall=recall if query else None,
        memory_version=served.memory_version,
        last_seq=served.last_seq,
        body_sha256=served.body_sha256,
        base_sha256=served.base_sha256,
        token_count=served.token_count,
        status=served.status,
        reidentified=served.reidentified,
        render_version=served.render_version,
        writer=writer.name,
        writer_seq=writer.next_seq(),
    )
    if _buffer is not None and _buffer.pid == os.getpid():
        _buffer.add(row)
    else:
        rows_write([row])


class PendingManifest(NamedTuple):
    """A ``ContextManifest`` waiting for its batch."""

    conversation_id: Any
    memory_version: int
    noted_at: datetime
    manifest: dict[str, Any]


# The (conversation, memory version) pairs this process noted lately: a version's memory
# block is rendered once per kind of format and per day, its manifest is written once.
NOTED_KEPT = 4096
_noted: OrderedDict[tuple[str, int], None] = OrderedDict()
_noted_lock = threading.Lock()


def context_manifest_noted(
    *, conversation_id: Any, memory_version: int, manifest: Callable[[], dict[str, Any]]
) -> None:
    """Keep what a memory version of a conversation served (``ContextManifest``), once:
    buffered with the reads in a web worker, written at once elsewhere. ``manifest``
    makes it (a query or two): called only when this process has not noted it yet."""
    key = (str(conversation_id), memory_version)
    with _noted_lock:
        if key in _noted:
            return
        _noted[key] = None
        if len(_noted) > NOTED_KEPT:
            _noted.popitem(last=False)
    row = PendingManifest(conversation_id, memory_version, timezone.now(), manifest())
    if _buffer is not None and _buffer.pid == os.getpid():
        _buffer.add_manifest(row)
    else:
        manifests_write([row])


def manifests_write(rows: list[PendingManifest]) -> None:
    """Insert the manifests, leaving out one another worker wrote first, and those of
    conversations deleted since they were noted."""
    if not rows:
        return
    fields = fields_of(ContextManifest)

    def insert(kept: list[PendingManifest]) -> None:
        prepared = [
            [f.get_db_prep_value(getattr(row, f.attname), connection) for f in fields]
            for row in kept
        ]
        with transaction.atomic():
            insert_rows(ContextManifest, prepared, ignore_conflicts=True)

    try:
        insert(rows)
    except IntegrityError:
        there = _conversations_there(rows)
        insert([r for r in rows if r.conversation_id in there])


def _conversations_there(rows: list[PendingManifest] | list[PendingRead]) -> set[Any]:
    """The ids of the rows' conversations that still exist."""
    ids = {r.conversation_id for r in rows}
    return set(Conversation.objects.filter(pk__in=ids).values_list("pk", flat=True))


class PendingRead(NamedTuple):
    """A read waiting for its batch: a ``ContextRead``'s columns, without a model instance
    (which cost a read 19 µs to build and its batch 44 µs a row to prepare)."""

    workspace_id: Any
    conversation_id: Any
    served_at: datetime
    api_key_id: Any | None
    key_scope: str
    edge: str
    format: str
    max_tokens: int | None
    query_digest: str
    recall: int | None
    memory_version: int
    last_seq: int
    body_sha256: str
    base_sha256: str
    token_count: int | None
    status: int
    reidentified: bool
    render_version: int
    writer: str
    writer_seq: int


# The fields whose values the database needs prepared (ids, times); the rest go as they are.
_PREPARED = (models.UUIDField, models.ForeignKey, models.DateTimeField)


def _prepared(rows: list[PendingRead]) -> list[list[Any]]:
    """The rows as ``core.inserts`` writes them (``fields_of``'s order), each with an id."""
    prepare = [(f.attname, f if isinstance(f, _PREPARED) else None) for f in fields_of(ContextRead)]
    prepared = []
    for row in rows:
        values = {"id": uuid.uuid4(), **row._asdict()}
        prepared.append(
            [
                values[name] if field is None else field.get_db_prep_value(values[name], connection)
                for name, field in prepare
            ]
        )
    return prepared


def _insert(rows: list[PendingRead], *, copy: bool) -> None:
    """The rows in one transaction: a COPY on PostgreSQL (``copy``), the fastest way in;
    otherwise the INSERT that keeps a row already there once."""
    with transaction.atomic():
        if copy and connection.vendor == "postgresql":
            copy_rows(ContextRead, _prepared(rows))
        else:
            insert_rows(ContextRead, _prepared(rows), ignore_conflicts=True)


def _still_there(rows: list[PendingRead]) -> list[PendingRead]:
    """The rows whose conversation still exists, without a key deleted since."""
    conversations = _conversations_there(rows)
    keys = set(
        ApiKey.objects.filter(
            pk__in={r.api_key_id for r in rows if r.api_key_id is not None}
        ).values_list("pk", flat=True)
    )
    return [
        row if row.api_key_id in keys else row._replace(api_key_id=None)
        for row in rows
        if row.conversation_id in conversations
    ]


def rows_write(rows: list[PendingRead]) -> int:
    """Insert the rows; returns how many were dropped for a conversation deleted since
    its read (its rows would have gone with it). The batch goes in as it is first (a
    deletion between a read and its batch is rare); when the database refuses it (a
    foreign key, or a row already there: a batch retried after an unclear failure), the
    rows whose conversation is gone are left out and the rest goes in by the INSERT that
    keeps a row already there once."""
    if not rows:
        return 0
    try:
        _insert(rows, copy=True)
        return 0
    except IntegrityError:
        pass
    kept = _still_there(rows)
    if kept:
        try:
            _insert(kept, copy=False)
        except IntegrityError:  # one more deleted in between: once more, then give up
            kept = _still_there(kept)
            if kept:
                _insert(kept, copy=False)
    return len(rows) - len(kept)


class LedgerBuffer:
    """A web worker's reads waiting for their batch (see the module). With
    ``tally_directory``, the number of its latest read is kept there for the next worker
    to count what a crash lost (governance/ledger/tally.py), and the tallies crashed
    workers left are counted first."""

    def __init__(self, window_seconds: float, tally_directory: Path | None = None) -> None:
        self.pid = os.getpid()
        self.window_seconds = window_seconds
        self._tally_directory = tally_directory
        self._tally = (
            ServedTally(tally_directory, _current_writer().name) if tally_directory else None
        )
        self._rows: list[PendingRead] = []
        self._manifests: list[PendingManifest] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="memdesk-ledger", daemon=True)
        self._thread.start()
        atexit.register(self.stop)

    def add(self, row: PendingRead) -> None:
        with self._lock:
            self._rows.append(row)
            if self._tally is not None:
                self._tally.served(row.writer_seq)
            full = len(self._rows) >= BATCH_ROWS
        if full:
            self._wake.set()

    def add_manifest(self, row: PendingManifest) -> None:
        with self._lock:
            self._manifests.append(row)

    def waiting(self) -> int:
        """The reads waiting."""
        with self._lock:
            return len(self._rows)

    def manifests_waiting(self) -> int:
        with self._lock:
            return len(self._manifests)

    def _run(self) -> None:
        if self._tally_directory is not None:
            try:
                lost_reads_account(self._tally_directory)
            except DatabaseError:
                logger.warning("could not count the reads crashed workers left unwritten")
            finally:
                close_old_connections()
        while not self._stopping:
            self._wake.wait(self.window_seconds)
            self._wake.clear()
            self.flush()

    def flush(self) -> bool:
        """Write what is waiting (in this thread); whether it was written."""
        with self._lock:
            rows, self._rows = self._rows, []
            manifests, self._manifests = self._manifests, []
        if not rows and not manifests:
            return True
        try:
            manifests_write(manifests)
            manifests = []
            gone = rows_write(rows)
        except DatabaseError:
            self._put_back(rows, manifests)
            logger.warning(
                "could not write %d context read(s) to the ledger; they wait for the next window",
                len(rows),
            )
            return False
        finally:
            close_old_connections()  # this thread's, as a request's end does
        if gone:
            logger.info("%d context read(s) of conversations deleted since were not kept", gone)
        return True

    def _put_back(self, rows: list[PendingRead], manifests: list[PendingManifest]) -> None:
        with self._lock:
            self._manifests[:0] = manifests
            del self._manifests[:-MAX_ROWS_WAITING]
            self._rows[:0] = rows
            over = len(self._rows) - MAX_ROWS_WAITING
            if over > 0:
                del self._rows[:over]
                logger.warning(
                    "the ledger dropped its %d oldest waiting context read(s) (%d waiting at most)",
                    over,
                    MAX_ROWS_WAITING,
                )

    def stop(self, timeout: float = STOP_SECONDS) -> int:
        """Write what is left (trying until ``timeout``); returns how many reads were
        not written, and says so in the log. Run once: at a clean exit, or by its caller."""
        atexit.unregister(self.stop)
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        deadline = time.monotonic() + timeout
        while (self.waiting() or self.manifests_waiting()) and time.monotonic() < deadline:
            if not self.flush():
                time.sleep(0.2)
        left = self.waiting()
        if left:
            logger.warning("the ledger stopped with %d context read(s) not written", left)
        if self.manifests_waiting():
            logger.warning(
                "the ledger stopped with %d manifest(s) not written", self.manifests_waiting()
            )
        if self._tally is not None:
            self._tally.remove()  # what is left is counted above
        return left


_buffer: LedgerBuffer | None = None


def ledger_buffer_start() -> LedgerBuffer:
    """From now on this process buffers its reads and writes them in batches (each web
    worker, once started: config/gunicorn.py)."""
    global _buffer
    if _buffer is None or _buffer.pid != os.getpid():
        _buffer = LedgerBuffer(
            settings.MEMDESK_LEDGER_WINDOW_SECONDS, tally_directory=settings.VAR_DIR / "ledger"
        )
    return _buffer
