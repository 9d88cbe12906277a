"""What a web worker has recorded of the reads it served, kept where a crash leaves it.

A buffered worker writes its reads every second; killed in between (SIGKILL, the OOM
killer, a gunicorn timeout), it takes the waiting ones with it. Each worker keeps the
number of its latest read (``writer_seq``) in a file of its own under
``VAR_DIR/ledger/``, memory-mapped, so a read costs a memory write and the number
survives the process. A clean stop removes the file (it has written or counted what was
left); a file whose worker is gone is a crash, and the next worker on the host compares
its number with the newest row the ledger holds of that writer and says in the log how
many reads are missing (``lost_reads_account``).
"""

from __future__ import annotations

import logging
import mmap
import os
import socket
import struct
from pathlib import Path

from django.db.models import Max

from governance.models import ContextRead

logger = logging.getLogger(__name__)

_COUNT = struct.Struct("<Q")
SUFFIX = ".served"


class ServedTally:
    """The number of the latest read one writer recorded, in ``directory``."""

    def __init__(self, directory: Path, writer: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / (writer.replace("/", "_") + SUFFIX)
        with self.path.open("wb") as file:
            file.write(b"\0" * _COUNT.size)
        self._file = self.path.open("r+b")
        self._map = mmap.mmap(self._file.fileno(), _COUNT.size)

    def served(self, seq: int) -> None:
        _COUNT.pack_into(self._map, 0, seq)

    def remove(self) -> None:
        """At a clean stop: nothing is left unaccounted for."""
        self._map.close()
        self._file.close()
        self.path.unlink(missing_ok=True)


def _writer_gone(writer: str) -> bool:
    """Whether the writer (``host:pid:started``) ran on this host and its process is gone."""
    parts = writer.split(":")
    if len(parts) < 3 or ":".join(parts[:-2]) != socket.gethostname():
        return False
    try:
        os.kill(int(parts[-2]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False


def lost_reads_account(directory: Path) -> dict[str, int]:
    """For each tally a crashed writer of this host left in ``directory``: the reads it
    recorded after the newest row the ledger holds of it (lost with the process, or gone
    with their conversation), said in the log; the tally is removed. Returns them."""
    lost: dict[str, int] = {}
    if not directory.is_dir():
        return lost
    for path in sorted(directory.glob("*" + SUFFIX)):
        writer = path.name.removesuffix(SUFFIX)
        if not _writer_gone(writer):
            continue
        raw = path.read_bytes()[: _COUNT.size]
        served = _COUNT.unpack(raw)[0] if len(raw) == _COUNT.size else 0
        written = ContextRead.objects.filter(writer=writer).aggregate(n=Max("writer_seq"))["n"]
        lost[writer] = max(served - (written or 0), 0)
        if lost[writer]:
            logger.warning(
                "the read ledger is missing %d context read(s) of writer %s, which stopped "
                "without writing them (a crash)",
                lost[writer],
                writer,
            )
        path.unlink(missing_ok=True)
    return lost
