"""The dead-letter write-ahead log: parked events, durable, partitioned, replayable.

See ``wal.py`` for writing (``DeadLetterWAL.park``), ``store.py`` for reading,
``health.py`` (damaged segments), ``replay.py``, ``lifecycle.py`` (discard,
cleanup, salvage), ``retention.py`` (segments past their retention) and ``export.py``.
On object storage: ``offload.py`` (upload and tracking), ``group_commit.py`` (durability
``uploaded``), ``tracker.py`` (manifests), ``leases.py`` and ``bucket.py`` (every host's view).
"""

from framework.dlq.health import SegmentHealth
from framework.dlq.index import SegmentFilter, SegmentInfo, Status
from framework.dlq.record import ParkedRecord, Partition
from framework.dlq.store import DeadLetterStore, Entry
from framework.dlq.wal import DeadLetterWAL, WALLockedError

__all__ = [
    "DeadLetterWAL",
    "Entry",
    "ParkedRecord",
    "DeadLetterStore",
    "Partition",
    "SegmentFilter",
    "SegmentHealth",
    "SegmentInfo",
    "Status",
    "WALLockedError",
]
