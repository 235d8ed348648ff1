"""Coordination: checkpoint stores with compare-and-set (SQLite embedded, ZooKeeper in production)."""

from framework.coordination.checkpoints import (
    BlockingCheckpointStore,
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    CheckpointStore,
    CheckpointUnavailable,
)
from framework.coordination.factory import open_checkpoint_store

__all__ = [
    "BlockingCheckpointStore",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointStore",
    "CheckpointUnavailable",
    "open_checkpoint_store",
]
