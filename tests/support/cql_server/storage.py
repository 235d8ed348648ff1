"""The server's data: one in-memory ``SqliteEngine`` per keyspace, which holds Cassandra's cell rules.

The engine has no partition tombstones, so ``DELETE FROM t WHERE <partition key>``
is kept here: it becomes row tombstones for the partition's current rows, and
later writes at or below its timestamp are dropped (``framework.core.cells.shadowed``),
which is what a partition tombstone does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from framework.core.cells import Cell, shadowed
from framework.core.mutations import CellValue, Delete, Mutation, MutationError, Upsert
from framework.core.rows import Row
from stores.sqlite.engine import SqliteEngine
from stores.sqlite.keycodec import encode_key
from tests.support.cql_server import ast
from tests.support.cql_server.catalog import Catalog, TableDef
from tests.support.cql_server.errors import InvalidRequest
from tests.support.cql_server.tokens import routing_key, token

__all__ = ["Storage", "CellWrite", "RowDelete", "TokenRow"]


@dataclass(frozen=True)
class CellWrite:
    """``UPDATE``: cells (None = cell tombstone) of one row at ``timestamp``, expiring after ``ttl`` s."""

    table: TableDef
    key: Mapping[str, CellValue]
    cells: Mapping[str, CellValue]
    timestamp: int
    ttl: int | None


@dataclass(frozen=True)
class RowDelete:
    """``DELETE``: a row (full key), a partition (partition key only) or some cells (``columns``)."""

    table: TableDef
    key: Mapping[str, CellValue]
    timestamp: int
    columns: tuple[str, ...] | None = None

    @property
    def partition_wide(self) -> bool:
        return len(self.key) < len(self.table.key_columns)


@dataclass(frozen=True)
class TokenRow:
    token: int
    routing_key: bytes
    row: Row


class Storage:
    """Schema (``catalog``) and data of every keyspace; ``clock`` (epoch seconds) may be swapped by tests."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.catalog = Catalog()
        self._engines: dict[str, SqliteEngine] = {}
        self._partition_tombstones: dict[tuple[str, str, bytes], int] = {}

    def now(self) -> float:
        return self.clock()

    def _engine(self, keyspace: str) -> SqliteEngine:
        engine = self._engines.get(keyspace)
        if engine is None:
            engine = self._engines[keyspace] = SqliteEngine(":memory:", clock=lambda: self.clock())
        return engine

    def close(self) -> None:
        for engine in self._engines.values():
            engine.close()
        self._engines.clear()

    # -- schema ----------------------------------------------------------------------------

    def create_keyspace(self, stmt: ast.CreateKeyspace) -> bool:
        return self.catalog.create_keyspace(stmt)

    def create_table(self, keyspace: str, stmt: ast.CreateTable) -> TableDef | None:
        table = self.catalog.create_table(keyspace, stmt)
        if table is not None:
            self._engine(keyspace).ensure_table(table.engine_schema())
        return table

    def alter_table(self, keyspace: str, stmt: ast.AlterTable) -> TableDef:
        table = self.catalog.alter_table(keyspace, stmt)
        self._engine(keyspace).ensure_table(table.engine_schema())  # the engine adds the columns
        return table

    # -- writes ----------------------------------------------------------------------------

    def apply(self, writes: Sequence[CellWrite | RowDelete]) -> None:
        """Apply the writes of one request (one engine transaction per keyspace)."""
        by_keyspace: dict[str, list[CellWrite | RowDelete]] = {}
        for w in writes:
            by_keyspace.setdefault(w.table.keyspace, []).append(w)
        for keyspace, group in by_keyspace.items():
            self._apply(keyspace, group)

    def _pk(self, table: TableDef, key: Mapping[str, CellValue]) -> tuple[str, str, bytes]:
        schema = table.engine_schema()
        return (
            table.keyspace,
            table.name,
            encode_key(schema.partition_key, [key[c] for c in table.partition_key]),
        )

    def _apply(self, keyspace: str, writes: list[CellWrite | RowDelete]) -> None:
        engine = self._engine(keyspace)
        tombstones: dict[tuple[str, str, bytes], int] = {}
        mutations: list[Mutation] = []
        try:
            for w in writes:
                if isinstance(w, RowDelete) and w.partition_wide:
                    pk = self._pk(w.table, w.key)
                    tombstones[pk] = max(tombstones.get(pk, w.timestamp), w.timestamp)
                    for row in engine.read_partition(w.table.name, dict(w.key)):
                        mutations.append(Delete(w.table.name, row.key, w.timestamp))
            for w in writes:
                if isinstance(w, RowDelete) and w.partition_wide:
                    continue
                pk = self._pk(w.table, w.key)
                known = [t for t in (self._partition_tombstones.get(pk), tombstones.get(pk)) if t is not None]
                if shadowed(Cell(None, w.timestamp), max(known, default=None)):
                    continue  # a partition tombstone shadows every write at or below it
                if isinstance(w, CellWrite):
                    mutations.append(Upsert(w.table.name, w.key, w.cells, w.timestamp, w.ttl))
                else:
                    mutations.append(Delete(w.table.name, w.key, w.timestamp, w.columns))
            engine.apply(mutations)
        except MutationError as exc:  # includes SchemaError
            raise InvalidRequest(f"cannot apply the write: {exc}") from exc
        for pk, ts in tombstones.items():
            self._partition_tombstones[pk] = max(self._partition_tombstones.get(pk, ts), ts)

    # -- reads -----------------------------------------------------------------------------

    def read_row(self, table: TableDef, key: Mapping[str, CellValue]) -> Row | None:
        return self._engine(table.keyspace).read_row(table.name, dict(key))

    def read_partition(
        self,
        table: TableDef,
        partition_key: Mapping[str, CellValue],
        start: Sequence[CellValue] | None,
        end: Sequence[CellValue] | None,
        reverse: bool,
    ) -> list[Row]:
        """Live rows of one partition in clustering order (or reversed), within inclusive prefix bounds."""
        engine = self._engine(table.keyspace)
        return engine.read_partition(table.name, dict(partition_key), start=start, end=end, reverse=reverse)

    def scan(self, table: TableDef) -> list[TokenRow]:
        """Every live row, ordered as Cassandra returns a full scan: by token, key, then clustering order."""
        partitions: dict[tuple[CellValue, ...], list[Row]] = {}
        for row in self._engine(table.keyspace).scan(table.name):
            partitions.setdefault(tuple(row.key[c] for c in table.partition_key), []).append(row)
        out: list[TokenRow] = []
        for values, rows in partitions.items():
            key = routing_key(table, values)
            tok = token(key)
            if table.clustering_order == "DESC":
                rows.reverse()  # the engine scans in ascending clustering order
            out += [TokenRow(tok, key, r) for r in rows]
        out.sort(key=lambda r: (r.token, r.routing_key))  # stable: clustering order is kept
        return out
