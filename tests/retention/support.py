"""Running the retention job on a test kit ``Driver``'s store and index, with SQLite coordination."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from framework.aggregates.targets import ViewTargets
from framework.coordination.sqlite import SqliteCheckpointStore, SqliteDomainLocks
from framework.retention import RetentionRun, run_retention
from framework.testing import Driver

__all__ = ["Coordination", "coordination", "retain", "live_cells"]


class Coordination:
    """A SQLite checkpoint store and lock backend in ``root`` (as separate job processes share them)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.checkpoints = SqliteCheckpointStore(root / "checkpoints.db")
        self.locks = SqliteDomainLocks(root / "jobs.db")

    def close(self) -> None:
        self.checkpoints.close_sync()
        self.locks.close()


@contextmanager
def coordination(root: Path) -> Iterator[Coordination]:
    c = Coordination(root)
    try:
        yield c
    finally:
        c.close()


def retain(driver: Driver, coord: Coordination, now_s: float, **kw: Any) -> RetentionRun:
    """One round of the app's retention job at ``now_s`` on the driver's store and index (the
    aggregates' documents to the driver's contributions, as ``converge retention run`` routes them)."""
    return driver.run(
        run_retention(
            driver.app,
            driver.store,
            checkpoints=coord.checkpoints,
            locks=coord.locks,
            index=ViewTargets(driver.index, driver.aggregates),
            clock=lambda: now_s,
            **kw,
        )
    )


def live_cells(driver: Driver, table: str) -> dict[tuple[Any, ...], dict[str, tuple[Any, int]]]:
    """``{row key values: {column: (value, write time)}}`` of every live row of ``table``."""
    return {
        tuple(r.key.values()): {c: (cell.value, cell.writetime) for c, cell in r.cells.items()}
        for r in driver.rows(table)
    }
