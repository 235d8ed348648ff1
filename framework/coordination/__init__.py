"""Coordination: checkpoint stores with compare-and-set (SQLite embedded, ZooKeeper in production)."""

from framework.coordination.checkpoints import (
    Checkpoint,
    CheckpointConflict,
    CheckpointError,
    CheckpointStore,
    CheckpointUnavailable,
)
from framework.coordination.factory import open_checkpoint_store

__all__ = [
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointError",
    "CheckpointStore",
    "CheckpointUnavailable",
    "open_checkpoint_store",
]
