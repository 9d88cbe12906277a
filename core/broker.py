"""The embedded broker: kombu's filesystem transport (``CELERY_BROKER_URL=filesystem://``,
what `make run` uses), except that a task file that holds no message is set aside
rather than fatal to the worker.

On a full disk kombu creates a task's file and cannot write it: the publisher gets an
error (the sweepers send that work again) and an empty file stays in the queue. kombu's
consumer decodes every file it takes and raises on one that is empty or cut short,
which ends the worker process; under the supervisor it comes back and ends on the next
one. Here such a file is moved to the ``broken`` folder beside the queue, named in the
log (never its content, which holds a task's arguments), and the worker takes the next.
"""

from __future__ import annotations

import logging
import os
import shutil
from queue import Empty
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads
from kombu.utils.objects import cached_property

logger = logging.getLogger(__name__)

# What every message kombu writes holds: a file without them cannot be delivered.
_MESSAGE_KEYS = frozenset({"body", "properties"})


# kombu's helpers (loads, bytes_to_str, lock, unlock) carry no annotations: the calls
# below are marked for mypy's strict mode.


def _message_in(payload: bytes) -> dict[str, Any] | None:
    try:
        message = loads(bytes_to_str(payload))  # type: ignore[no-untyped-call]
    except ValueError:  # empty, cut short, or not UTF-8
        return None
    if not isinstance(message, dict) or not message.keys() >= _MESSAGE_KEYS:
        return None
    return message


class Channel(filesystem.Channel):
    @cached_property
    def claim_folder(self) -> str:
        os.makedirs(self.processed_folder, exist_ok=True)
        return str(self.processed_folder)

    @cached_property
    def broken_folder(self) -> str:
        folder = self.transport_options.get("broken_folder") or os.path.join(
            os.path.dirname(os.path.abspath(self.data_folder_in)), "broken"
        )
        os.makedirs(folder, exist_ok=True)
        return str(folder)

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        """The next message of ``queue``, as kombu's ``_get`` takes it, skipping the
        files that hold none.

        A file is claimed by moving it to the processed folder, on the queue's own
        filesystem (kombu moves it to the system's temporary folder unless it keeps
        processed files): a rename, which needs no free space, and so does setting a
        broken file aside from there."""
        wanted = f"{queue}.msg"
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.partition(".")[2] != wanted:
                continue
            claimed = os.path.join(self.claim_folder, filename)
            try:
                shutil.move(os.path.join(self.data_folder_in, filename), claimed)
            except OSError:
                continue  # another consumer took it first
            try:
                with open(claimed, "rb") as file:
                    # A publisher holds an exclusive lock while it writes the file.
                    filesystem.lock(file, filesystem.LOCK_SH)  # type: ignore[no-untyped-call]
                    try:
                        payload = file.read()
                    finally:
                        filesystem.unlock(file)  # type: ignore[no-untyped-call]
            except OSError as error:
                raise ChannelError(f"Cannot read file {claimed!r}.") from error
            message = _message_in(payload)
            if message is None:
                self._set_aside(claimed, filename, size=len(payload))
                continue
            if not self.store_processed:
                os.remove(claimed)
            return message
        raise Empty()

    def _set_aside(self, claimed: str, filename: str, *, size: int) -> None:
        try:
            shutil.move(claimed, os.path.join(self.broken_folder, filename))
        except OSError as error:
            os.remove(claimed)
            logger.warning(
                "broker: task file %s holds no message (%d bytes) and could not be set "
                "aside (%s): deleted",
                filename,
                size,
                type(error).__name__,
            )
            return
        logger.warning(
            "broker: task file %s holds no message (%d bytes): moved to %s; its work is "
            "sent again by the sweepers",
            filename,
            size,
            self.broken_folder,
        )


class Transport(filesystem.Transport):
    """kombu's filesystem transport with the Channel above."""

    Channel = Channel
