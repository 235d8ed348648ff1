"""What retention does to one partition, as pure functions (the stream-free core of both jobs).

The rule (docs/how-to/retention.md): the age of a cell is its write time, the
mutation's ``version`` (the source's modification time, never the clock of
ingestion). At cutoff ``C`` a partition gets one tombstone at version
``C - 1``: a partition tombstone in a table with clustering columns, a row
tombstone otherwise. Under Cassandra's cell rules (``framework.core.cells``:
a tombstone shadows every write with an equal or lower write time, whenever
that write arrives) it hides exactly the cells written below ``C``, now and
forever: a replay, a late event or a backfill of older archived events
carries the same old versions and stays shadowed, while a write at ``C`` or
later (data still inside the retention) is kept. The tombstone commutes with
every other write, so the stored state does not depend on whether a late
event came before or after the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from framework.core.mutations import CellValue, Delete
from framework.core.rows import Row
from framework.core.schema import TableSchema

__all__ = ["PartitionPlan", "plan_partition", "partition_key_of"]

Key = dict[str, CellValue]


def partition_key_of(schema: TableSchema, key: Mapping[str, CellValue]) -> Key:
    """The partition key columns of a row key."""
    return {c.name: key[c.name] for c in schema.partition_key}


@dataclass
class PartitionPlan:
    """Retention of one partition at ``cutoff``: its live rows, the rows that go whole
    (``deleted``), the rows that lose some cells (``trimmed``: key and columns)."""

    schema: TableSchema
    partition: Key
    cutoff: int
    rows: int = 0
    cells: int = 0
    expired_cells: int = 0
    deleted: list[Key] = field(default_factory=list)
    trimmed: list[tuple[Key, tuple[str, ...]]] = field(default_factory=list)

    @property
    def changes(self) -> bool:
        """True when the tombstone hides a live cell."""
        return self.expired_cells > 0

    def tombstone(self) -> Delete | None:
        """The tombstone at ``cutoff - 1`` over the whole partition (None at cutoff 0)."""
        if self.cutoff <= 0:
            return None
        return Delete(self.schema.name, self.partition, self.cutoff - 1)

    def announced(self) -> list[Delete]:
        """One mutation per changed row, for notifications: a row ``Delete`` for a row that
        goes whole (counted deleted), cell tombstones for a trimmed row (counted updated)."""
        version = max(self.cutoff - 1, 0)
        out = [Delete(self.schema.name, key, version) for key in self.deleted]
        out += [Delete(self.schema.name, key, version, columns) for key, columns in self.trimmed]
        return out


def plan_partition(schema: TableSchema, rows: Sequence[Row], cutoff: int) -> PartitionPlan:
    """The plan of one partition's live ``rows`` (non-empty, one partition) at ``cutoff``."""
    plan = PartitionPlan(schema, partition_key_of(schema, rows[0].key), cutoff)
    for row in rows:
        plan.rows += 1
        plan.cells += len(row.cells)
        old = tuple(name for name, cell in row.cells.items() if cell.writetime < cutoff)
        if not old:
            continue
        plan.expired_cells += len(old)
        if len(old) == len(row.cells):
            plan.deleted.append(dict(row.key))
        else:
            plan.trimmed.append((dict(row.key), old))
    return plan
