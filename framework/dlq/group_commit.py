"""Group commit of parked records to object storage: waiters share flushes, retried while they fail.

``DeadLetterWAL.park`` with ``durability="uploaded"`` waits here until the segment holding its
record is uploaded. One waiter runs a flush at a time (seal the open segments, one upload
pass); the others wait their turn and return without another flush when the one that ran
covered their segment, so a burst of parkers costs one flush per burst, not one per record.
A flush that leaves the segment local is logged and tried again after a delay that doubles
up to a cap: the waiter waits (as an event waits for a sink that is down), nothing is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable

from stores.objects.error_map import ObjectStoreError

__all__ = ["GroupCommit"]

log = logging.getLogger("framework.dlq")


class GroupCommit:
    """Waits until segments are uploaded, sharing ``flush`` calls between concurrent waiters.

    ``flush()`` seals and uploads (blocking; run off the event loop), raising ``ObjectStoreError``,
    ``OSError`` or ``sqlite3.OperationalError`` (the index stayed busy) when it failed;
    ``is_uploaded(seg_id)`` says whether a segment is in object storage. ``target`` names the
    store in log lines; ``lock`` the lock whose holder makes a pass skip. Delays between failed
    attempts double from ``first_s`` to ``max_s``.
    """

    def __init__(
        self, flush: Callable[[], None], is_uploaded: Callable[[int], bool], *, target: str, lock: str,
        first_s: float = 0.1, max_s: float = 5.0,
    ) -> None:  # fmt: skip
        self._flush, self._is_uploaded = flush, is_uploaded
        self.target, self.lock = target, lock
        self.first_s, self.max_s = first_s, max_s
        self._turn = asyncio.Lock()
        self._delay_s = first_s
        self.flushes = 0

    async def wait(self, seg_id: int) -> None:
        """Return once segment ``seg_id`` is uploaded, flushing when it is not (retried until it is)."""
        async with self._turn:
            while not await asyncio.to_thread(self._attempt, seg_id):
                await asyncio.sleep(self._delay_s)
                self._delay_s = min(self._delay_s * 2, self.max_s)
            self._delay_s = self.first_s

    def _attempt(self, seg_id: int) -> bool:
        """True when ``seg_id`` is uploaded, after a flush if it was not; logs why a flush left it local."""
        try:
            if self._is_uploaded(seg_id):
                return True
            self.flushes += 1
            self._flush()
            if self._is_uploaded(seg_id):
                return True
        except (ObjectStoreError, OSError, sqlite3.OperationalError) as exc:
            log.warning("dead-letter WAL: uploading to %s failed, parking waits (retry in %.1f s): %s",
                        self.target, self._delay_s, exc)  # fmt: skip
            return False
        log.warning("dead-letter WAL: segment %d is not uploaded yet (another command holds %s, or its "
                    "file is damaged), parking waits (retry in %.1f s)",
                    seg_id, self.lock, self._delay_s)  # fmt: skip
        return False
