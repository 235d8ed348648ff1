"""Coordination: checkpoints changed by compare-and-set and lock domains taken in turn.

Two contracts (``checkpoints``, ``locks``), one module per backend serving
both (``sqlite``: the embedded default; ``zookeeper``: production), one URL
parser (``urls``) and one opener per contract (``open``).
"""

from framework.coordination.checkpoints import (
    BlockingCheckpointStore,
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    CheckpointStore,
    CheckpointUnavailable,
)
from framework.coordination.locks import (
    DomainLocks,
    DomainStatus,
    JobLockError,
    LastRunner,
    LastRunnerConflict,
    Lease,
    LeaseLost,
    LocksUnavailable,
    Member,
)
from framework.coordination.open import open_checkpoint_store, open_domain_locks
from framework.coordination.urls import CoordinationUrlError

__all__ = [
    # checkpoints
    "BlockingCheckpointStore",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointStore",
    "CheckpointUnavailable",
    "open_checkpoint_store",
    # lock domains
    "DomainLocks",
    "DomainStatus",
    "JobLockError",
    "LastRunner",
    "LastRunnerConflict",
    "Lease",
    "LeaseLost",
    "LocksUnavailable",
    "Member",
    "open_domain_locks",
    # both
    "CoordinationUrlError",
]
