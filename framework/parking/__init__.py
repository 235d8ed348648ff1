"""The dead-letter write-ahead log: parked events, durable, partitioned, replayable.

See ``wal.py`` for writing (``DeadLetterWAL.park``), ``store.py`` for reading,
``replay.py``, ``lifecycle.py`` (discard, cleanup) and ``export.py``.
"""

from framework.parking.index import SegmentFilter, SegmentInfo, Status
from framework.parking.record import ParkedRecord, Partition
from framework.parking.store import Entry, ParkingStore
from framework.parking.wal import DeadLetterWAL, WALLockedError

__all__ = [
    "DeadLetterWAL",
    "Entry",
    "ParkedRecord",
    "ParkingStore",
    "Partition",
    "SegmentFilter",
    "SegmentInfo",
    "Status",
    "WALLockedError",
]
