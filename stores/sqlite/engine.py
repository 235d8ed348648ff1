"""Cassandra's wide-column semantics on one SQLite file (synchronous).

Layout: one EAV table ``converge_cells`` keyed by (table, encoded partition
key, encoded clustering key, column). A row tombstone is stored in the same
table under the column name ``''`` (never a valid identifier), so one ordered
query returns it before the cells of its row. A partition tombstone (a
``Delete`` naming only the partition key of a clustered table) is the row
tombstone of the empty clustering key ``b""``, which no row of a clustered
table has, so it comes before every row of its partition. Keys use
``stores.sqlite.keycodec``, so SQL can order, range and page rows of a partition
by memcmp. Cell conflicts within a batch are resolved with
``framework.core.cells.reconcile``; against stored cells the SQL upsert applies
the same order (``framework.core.cells.rank``).

Durability: WAL journal with ``synchronous=FULL``, so a returned ``apply`` has
been fsynced. Thread safety: one connection guarded by a lock. Several processes
(the workers of one app) may share a file: SQLite takes one writer at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from framework.core.cells import Cell, is_live, order_bytes, reconcile, shadowed
from framework.core.mutations import CellValue, Delete, LogState, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, SchemaError, TableSchema
from stores.errors import StoreError
from stores.evolution import added_columns
from stores.sqlite.keycodec import (
    decode_key,
    encode_checked_key,
    encode_key,
    normalize,
    partition_hash,
    prefix_end,
)

__all__ = ["SqliteEngine", "ScanCursor", "schema_to_json", "schema_from_json"]

#: Where a scan page stopped: the last (encoded partition key, encoded clustering key) read.
ScanCursor = tuple[bytes, bytes]
_START: ScanCursor = (b"", b"")
_ROW_TOMBSTONE = ""
#: The clustering key under which a clustered table's partition tombstone is stored.
_PARTITION = b""

_DDL = (
    "CREATE TABLE IF NOT EXISTS converge_tables (name TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS converge_cells ("
    " tbl TEXT NOT NULL, pk BLOB NOT NULL, ck BLOB NOT NULL, col TEXT NOT NULL,"
    " val, wt INTEGER NOT NULL, exp INTEGER, ph INTEGER NOT NULL, ob BLOB,"
    " PRIMARY KEY (tbl, pk, ck, col)) WITHOUT ROWID",
)
# A row and, in a clustered table, its partition's tombstone (clustering key x'', sorted first).
_SELECT_ROW = (
    "SELECT ck, col, val, wt, exp FROM converge_cells WHERE tbl = ? AND pk = ? AND ck IN (x'', ?)"
    " ORDER BY ck, col"
)
_SELECT_PARTITION_TOMBSTONE = (
    "SELECT wt FROM converge_cells WHERE tbl = ? AND pk = ? AND ck = x'' AND col = ''"
)


# The cell rules in SQL (framework.core.cells.rank): a write replaces the stored cell only when its
# rank is higher: (write time; tie class live 0 < expiring 1 < tombstone 2; expiry of an expiring cell
# else 0; order bytes of the value). So nothing is read first. A fixed statement; every value is bound.
_UPSERT_CELL = (
    "INSERT INTO converge_cells (tbl, pk, ck, col, val, wt, exp, ph, ob) VALUES (?,?,?,?,?,?,?,?,?)"
    " ON CONFLICT (tbl, pk, ck, col) DO UPDATE SET"
    " val = excluded.val, wt = excluded.wt, exp = excluded.exp, ob = excluded.ob"
    " WHERE (excluded.wt,"
    " CASE WHEN excluded.val IS NULL THEN 2 WHEN excluded.exp IS NULL THEN 0 ELSE 1 END,"
    " CASE WHEN excluded.val IS NULL THEN 0 ELSE coalesce(excluded.exp, 0) END, excluded.ob)"
    " > (converge_cells.wt,"
    " CASE WHEN converge_cells.val IS NULL THEN 2 WHEN converge_cells.exp IS NULL THEN 0 ELSE 1 END,"
    " CASE WHEN converge_cells.val IS NULL THEN 0 ELSE coalesce(converge_cells.exp, 0) END,"
    " converge_cells.ob)"
)
_PURGE_SHADOWED = "DELETE FROM converge_cells WHERE tbl = ? AND pk = ? AND ck = ? AND col <> '' AND wt <= ?"
# A partition tombstone drops every cell and row tombstone of its partition at or below its version.
_PURGE_PARTITION = "DELETE FROM converge_cells WHERE tbl = ? AND pk = ? AND ck <> x'' AND wt <= ?"
#: Chunk sizes of multi-partition reads: a chunk is padded to the next size, so the statements
#: are fixed (placeholders only) and few.
_MANY_PARTITIONS = (1, 8, 64, 256)
_PARTITIONS_QUERIES = {
    n: "SELECT pk, ck, col, val, wt, exp FROM converge_cells WHERE tbl = ? AND pk IN ("  # noqa: S608
    + ",".join("?" * n)
    + ") ORDER BY pk, ck, col"
    for n in _MANY_PARTITIONS
}
_SCAN_KEYS = (
    "SELECT DISTINCT pk, ck FROM converge_cells WHERE tbl = ? AND ph % ? = ? AND (pk, ck) > (?, ?)"
    " ORDER BY pk, ck LIMIT ?"
)
_SCAN_CELLS = (
    "SELECT pk, ck, col, val, wt, exp FROM converge_cells WHERE tbl = ? AND ph % ? = ?"
    " AND (pk, ck) > (?, ?) AND (pk, ck) <= (?, ?) ORDER BY pk, ck, col"
)
# Partition reads: fixed fragments only (lower bound, upper bound, direction); values are bound.
_PARTITION_QUERIES = {
    (lo, hi, desc): "SELECT ?, ck, col, val, wt, exp FROM converge_cells WHERE tbl = ? AND pk = ?"  # noqa: S608
    + (" AND ck >= ?" if lo else "")
    + (" AND ck < ?" if hi else "")
    + (" ORDER BY ck DESC, col" if desc else " ORDER BY ck ASC, col")
    for lo in (False, True)
    for hi in (False, True)
    for desc in (False, True)
}


def schema_to_json(schema: TableSchema) -> str:
    """A canonical JSON form of ``schema``."""
    return json.dumps(dataclasses.asdict(schema), sort_keys=True)


def schema_from_json(body: str) -> TableSchema:
    """The schema stored by ``schema_to_json``."""
    d = json.loads(body)
    for part in ("partition_key", "clustering_key", "columns"):
        d[part] = tuple(Column(**c) for c in d[part])
    return TableSchema(**d)


@dataclasses.dataclass
class _RowPlan:
    """The reduced writes of one batch to one row."""

    schema: TableSchema
    ph: int
    partition: bool = False  # a partition tombstone (clustering key ``_PARTITION``), never cells
    tombstone: int | None = None
    cells: dict[str, Cell] = dataclasses.field(default_factory=dict)


def _is_partition_delete(schema: TableSchema, m: Delete) -> bool:
    """True for a ``Delete`` naming exactly the partition key of a table with clustering columns."""
    return bool(schema.clustering_key) and set(m.key) == {c.name for c in schema.partition_key}


def _later(version: int | None, other: int) -> int:
    return other if version is None else max(version, other)


def _to_sql(value: CellValue) -> Any:
    return int(value) if isinstance(value, bool) else value


def _from_sql(schema: TableSchema, col: str, value: CellValue) -> CellValue:
    if value is None:
        return None
    t = schema.column(col).type
    if t == "boolean":
        return bool(value)
    if t == "double":
        return float(value)
    return value


#: Seconds a statement waits for another connection's lock (SQLite's busy timeout), and the
#: longest an open retries a set-up that found the file busy.
_BUSY_TIMEOUT = 10.0


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    """A connection in WAL mode with the cell tables. Processes opening a new file at once can
    get SQLITE_BUSY from the switch to WAL without SQLite's busy handler ever waiting, so the
    set-up is retried until ``timeout``."""
    deadline, pause = time.monotonic() + timeout, 0.005
    while True:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=timeout)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            # 64 MiB of page cache instead of 2: the cell table's pages stay in memory as it grows
            conn.execute("PRAGMA cache_size=-65536")
            for ddl in _DDL:
                conn.execute(ddl)
            return conn
        except sqlite3.OperationalError as e:
            conn.close()
            busy = getattr(e, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


class SqliteEngine:
    """Per-cell last-write-wins rows with clustering, tombstones and TTL in SQLite."""

    def __init__(self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self._conn = _connect(os.fspath(path), _BUSY_TIMEOUT)
        self._schemas: dict[str, TableSchema] = {
            name: schema_from_json(body)
            for name, body in self._conn.execute("SELECT name, body FROM converge_tables")
        }
        self._add_order_bytes()

    def _add_order_bytes(self) -> None:
        """Files written before the cell rules ran in SQL lack the ``ob`` column: add and fill it."""
        if self._has_order_bytes():
            return
        with self._transaction():
            if self._has_order_bytes():  # another process added it while this one waited
                return
            self._conn.execute("ALTER TABLE converge_cells ADD COLUMN ob BLOB")
            rows = self._conn.execute("SELECT tbl, pk, ck, col, val FROM converge_cells").fetchall()
            updates = []
            for tbl, pk, ck, col, val in rows:
                schema = self._schemas.get(tbl)
                value = _from_sql(schema, col, val) if schema is not None and col != _ROW_TOMBSTONE else val
                updates.append((order_bytes(value), tbl, pk, ck, col))
            self._conn.executemany(
                "UPDATE converge_cells SET ob = ? WHERE tbl = ? AND pk = ? AND ck = ? AND col = ?", updates
            )

    def _has_order_bytes(self) -> bool:
        return "ob" in {row[1] for row in self._conn.execute("PRAGMA table_info(converge_cells)")}

    # -- schema -------------------------------------------------------------

    def ensure_table(self, schema: TableSchema) -> None:
        """Declare ``schema`` (idempotent); a redefinition may only add regular columns
        (``stores.evolution``), else SchemaError."""
        if not isinstance(schema, TableSchema):
            raise SchemaError("schema", f"expected a TableSchema, got {type(schema).__name__}")
        with self._lock:
            self._check_open()
            old = self._schemas.get(schema.name)
            if old == schema:
                return
            if old is not None:
                added_columns(old, schema)  # cells are stored generically: a new column needs no DDL
            with self._transaction():
                self._conn.execute(
                    "INSERT OR REPLACE INTO converge_tables (name, body) VALUES (?, ?)",
                    (schema.name, schema_to_json(schema)),
                )
            self._schemas[schema.name] = schema

    def schema(self, table: str) -> TableSchema:
        """The declared schema of ``table``; SchemaError when undeclared."""
        try:
            return self._schemas[table]
        except (KeyError, TypeError):
            raise SchemaError("table", f"table {table!r} is not declared") from None

    def tables(self) -> list[str]:
        """Names of the declared tables, sorted."""
        return sorted(self._schemas)

    # -- writes -------------------------------------------------------------

    def apply(self, mutations: Sequence[Mutation]) -> None:
        """Validate every mutation, merge them per row, then write them all in one durable
        transaction; the cell rules run in SQL, so nothing is read first."""
        with self._lock:
            self._check_open()
            plans = self._plan(mutations)
            if not plans:
                return
            tombstones: list[tuple[Any, ...]] = []
            partition_marks: list[tuple[Any, ...]] = []
            cells: list[tuple[Any, ...]] = []
            deleted = {(t, pk): p.tombstone for (t, pk, _), p in plans.items() if p.partition}
            for (table, pk, ck), plan in plans.items():
                if plan.tombstone is not None:
                    mark = (_ROW_TOMBSTONE, None, plan.tombstone, None, plan.ph, b"")
                    (partition_marks if plan.partition else tombstones).append((table, pk, ck, *mark))
                known = (plan.tombstone, deleted.get((table, pk)))
                cover = max((v for v in known if v is not None), default=None)
                ph, key = plan.ph, (table, pk, ck)
                cells += [
                    (*key, name, _to_sql(c.value), c.writetime, c.expires_at, ph, order_bytes(c.value))
                    for name, c in plan.cells.items()
                    if not shadowed(c, cover)
                ]
            with self._transaction():
                if partition_marks:
                    self._conn.executemany(_UPSERT_CELL, partition_marks)
                    self._conn.executemany(_PURGE_PARTITION, [(m[0], m[1], m[5]) for m in partition_marks])
                if tombstones:
                    self._conn.executemany(_UPSERT_CELL, tombstones)
                    self._conn.executemany(_PURGE_SHADOWED, [m[:3] + (m[5],) for m in tombstones])
                if cells:
                    self._conn.executemany(_UPSERT_CELL, cells)

    def _plan(
        self, mutations: Sequence[Mutation], now: int | None = None
    ) -> dict[tuple[str, bytes, bytes], _RowPlan]:
        if isinstance(mutations, Upsert | Delete | LogState) or not isinstance(mutations, Iterable):
            raise SchemaError("mutations", "expected a sequence of mutations")
        if now is None:
            now = int(self._clock())
        plans: dict[tuple[str, bytes, bytes], _RowPlan] = {}
        for m in mutations:
            if isinstance(m, LogState):
                m = m.as_upsert()
            if not isinstance(m, Upsert | Delete):
                raise SchemaError("mutations", f"not a mutation: {type(m).__name__}")
            schema = self.schema(m.table)
            if isinstance(m, Delete) and _is_partition_delete(schema, m):
                self._plan_partition_delete(plans, schema, m)
                continue
            schema.check_key(m.key)
            pk, ck = encode_checked_key(schema, m.key)
            plan = plans.get((m.table, pk, ck))
            if plan is None:
                plan = plans[(m.table, pk, ck)] = _RowPlan(schema, partition_hash(pk))
            if isinstance(m, Upsert):
                schema.check_cells(m.cells)
                ttl = m.ttl if m.ttl is not None else schema.default_ttl
                expires = None if ttl is None else now + ttl
                for name, value in m.cells.items():
                    value = normalize(schema.column(name), value)
                    self._merge(plan, name, Cell(value, m.version, None if value is None else expires))
            elif m.columns is None:
                plan.tombstone = m.version if plan.tombstone is None else max(plan.tombstone, m.version)
            else:
                schema.check_cells(dict.fromkeys(m.columns))
                for name in m.columns:
                    self._merge(plan, name, Cell(None, m.version))
        return plans

    @staticmethod
    def _plan_partition_delete(
        plans: dict[tuple[str, bytes, bytes], _RowPlan], schema: TableSchema, m: Delete
    ) -> None:
        schema.check_key(m.key, partition_only=True)
        if m.columns is not None:
            raise SchemaError("columns", f"{schema.name}: cells can only be deleted in one row (full key)")
        pk = encode_key(schema.partition_key, [m.key[c.name] for c in schema.partition_key])
        plan = plans.get((m.table, pk, _PARTITION))
        if plan is None:
            plan = plans[(m.table, pk, _PARTITION)] = _RowPlan(schema, partition_hash(pk), partition=True)
        plan.tombstone = m.version if plan.tombstone is None else max(plan.tombstone, m.version)

    @staticmethod
    def _merge(plan: _RowPlan, name: str, cell: Cell) -> None:
        old = plan.cells.get(name)
        plan.cells[name] = cell if old is None else reconcile(old, cell)

    # -- reads --------------------------------------------------------------

    def read_row(self, table: str, key: Mapping[str, CellValue]) -> Row | None:
        """The row at the full primary ``key``; None when it has no live cell."""
        schema = self.schema(table)
        schema.check_key(key)
        pk = encode_key(schema.partition_key, [key[c.name] for c in schema.partition_key])
        ck = encode_key(schema.clustering_key, [key[c.name] for c in schema.clustering_key])
        with self._lock:
            self._check_open()
            rows = self._conn.execute(_SELECT_ROW, (table, pk, ck)).fetchall()
            now = self._clock()
        return next(self._rows(schema, ((pk, *r) for r in rows), now, {}), None)

    def read_rows(self, table: str, keys: Sequence[Mapping[str, CellValue]]) -> list[Row | None]:
        """``read_row`` of each key, in order; in a table without clustering columns a row is
        its partition, so they are read by ``read_partitions``."""
        schema = self.schema(table)
        if schema.clustering_key:
            return [self.read_row(table, k) for k in keys]
        return [rows[0] if rows else None for rows in self.read_partitions(table, keys)]

    def read_partition(
        self,
        table: str,
        partition_key: Mapping[str, CellValue],
        *,
        start: Sequence[CellValue] | None = None,
        end: Sequence[CellValue] | None = None,
        limit: int | None = None,
        reverse: bool = False,
    ) -> list[Row]:
        """Live rows of one partition in clustering order (or reversed), bounded and limited."""
        schema = self.schema(table)
        schema.check_key(partition_key, partition_only=True)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise SchemaError("limit", f"must be a non-negative integer or None, got {limit!r}")
        pk = encode_key(schema.partition_key, [partition_key[c.name] for c in schema.partition_key])
        lo = self._bound(schema, start, "start")
        hi = self._bound(schema, end, "end")
        hi = None if hi is None else prefix_end(hi)
        desc = (schema.clustering_order == "DESC") != bool(reverse)
        sql = _PARTITION_QUERIES[(lo is not None, hi is not None, desc)]
        params = [pk, table, pk, *(b for b in (lo, hi) if b is not None)]
        out: list[Row] = []
        if limit == 0:
            return out
        with self._lock:
            self._check_open()
            now = self._clock()
            deleted = self._partition_tombstone(schema, pk)
            cursor = self._conn.execute(sql, params)
            try:
                for row in self._rows(schema, cursor, now, deleted):
                    out.append(row)
                    if limit is not None and len(out) >= limit:
                        break
            finally:
                cursor.close()
        return out

    def read_partitions(
        self, table: str, partition_keys: Sequence[Mapping[str, CellValue]]
    ) -> list[list[Row]]:
        """``read_partition`` of each partition key, in order, from one statement per
        ``_MANY_PARTITIONS[-1]`` distinct partitions."""
        schema = self.schema(table)
        pks = []
        for key in partition_keys:
            schema.check_key(key, partition_only=True)
            pks.append(encode_key(schema.partition_key, [key[c.name] for c in schema.partition_key]))
        distinct = sorted(set(pks))
        found: dict[bytes, list[Row]] = {}
        desc = schema.clustering_order == "DESC"
        step = _MANY_PARTITIONS[-1]
        with self._lock:
            self._check_open()
            now = self._clock()
            for i in range(0, len(distinct), step):
                chunk = distinct[i : i + step]
                size = next(n for n in _MANY_PARTITIONS if n >= len(chunk))
                padded = chunk + chunk[-1:] * (size - len(chunk))  # a repeated key matches nothing more
                cursor = self._conn.execute(_PARTITIONS_QUERIES[size], (table, *padded))
                try:
                    # ascending, so a partition tombstone (clustering key x'') comes first in its partition
                    for pk, records in itertools.groupby(cursor, key=operator.itemgetter(0)):
                        rows = list(self._rows(schema, records, now, {}))
                        found[pk] = rows[::-1] if desc else rows
                finally:
                    cursor.close()
        return [list(found.get(pk, ())) for pk in pks]

    @staticmethod
    def _bound(schema: TableSchema, values: Sequence[CellValue] | None, what: str) -> bytes | None:
        if values is None:
            return None
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise SchemaError(what, "must be a sequence of clustering values (a prefix)")
        if len(values) > len(schema.clustering_key):
            raise SchemaError(
                what, f"{len(values)} values for {len(schema.clustering_key)} clustering columns"
            )
        return encode_key(schema.clustering_key, list(values)) if values else None

    def scan(self, table: str, *, shard: int = 0, shards: int = 1) -> Iterator[Row]:
        """Every live row of ``table`` whose partition hash is ``shard`` modulo ``shards``."""
        cursor: ScanCursor | None = _START
        while cursor is not None:
            rows, cursor = self.scan_page(table, shard=shard, shards=shards, after=cursor)
            yield from rows

    def scan_page(
        self,
        table: str,
        *,
        shard: int = 0,
        shards: int = 1,
        after: ScanCursor | None = None,
        size: int = 500,
    ) -> tuple[list[Row], ScanCursor | None]:
        """Up to ``size`` rows after ``after``, and the cursor of the next page (None at the end)."""
        schema = self.schema(table)
        for name, value, low in (("shards", shards, 1), ("shard", shard, 0), ("size", size, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise SchemaError(name, f"must be an integer >= {low}, got {value!r}")
        if shard >= shards:
            raise SchemaError("shard", f"must be below shards={shards}, got {shard}")
        pk0, ck0 = _START if after is None else after
        with self._lock:
            self._check_open()
            keys = self._conn.execute(_SCAN_KEYS, (table, shards, shard, pk0, ck0, size)).fetchall()
            if not keys:
                return [], None
            last = (keys[-1][0], keys[-1][1])
            now = self._clock()
            # the first partition may continue one of the last page: its tombstone was read there
            deleted = self._partition_tombstone(schema, keys[0][0])
            cells = self._conn.execute(_SCAN_CELLS, (table, shards, shard, pk0, ck0, *last)).fetchall()
        return list(self._rows(schema, cells, now, deleted)), (last if len(keys) == size else None)

    def _partition_tombstone(self, schema: TableSchema, pk: bytes) -> dict[bytes, int]:
        """``{pk: version}`` of the partition tombstone of ``pk`` if it has one (clustered tables)."""
        if not schema.clustering_key:
            return {}
        found = self._conn.execute(_SELECT_PARTITION_TOMBSTONE, (schema.name, pk)).fetchone()
        return {} if found is None else {pk: found[0]}

    def _rows(
        self,
        schema: TableSchema,
        records: Iterable[tuple[Any, ...]],
        now: float,
        deleted: Mapping[bytes, int],
    ) -> Iterator[Row]:
        """Group ordered (pk, ck, col, val, wt, exp) records into live rows.

        ``deleted`` holds partition tombstones known beforehand; those met in
        ``records`` (ascending order puts them first in their partition) are added.
        """
        clustered = bool(schema.clustering_key)
        current: tuple[bytes, bytes] | None = None
        partition: bytes | None = None
        partition_tombstone: int | None = None
        tombstone: int | None = None
        cells: dict[str, Cell] = {}
        for pk, ck, col, val, wt, exp in records:
            if pk != partition:
                partition, partition_tombstone = pk, deleted.get(pk)
            if (pk, ck) != current:
                if cells and current is not None:
                    yield self._row(schema, current, cells)
                current, tombstone, cells = (pk, ck), partition_tombstone, {}
            if col == _ROW_TOMBSTONE:
                if clustered and ck == _PARTITION:
                    partition_tombstone = _later(partition_tombstone, wt)
                tombstone = _later(tombstone, wt)
                continue
            cell = Cell(_from_sql(schema, col, val), wt, exp)
            if is_live(cell, now) and not shadowed(cell, tombstone):
                cells[col] = cell
        if cells and current is not None:
            yield self._row(schema, current, cells)

    @staticmethod
    def _row(schema: TableSchema, key: tuple[bytes, bytes], cells: dict[str, Cell]) -> Row:
        values = decode_key(schema.partition_key, key[0]) + decode_key(schema.clustering_key, key[1])
        names = [c.name for c in schema.key_columns]
        ordered = {c.name: cells[c.name] for c in schema.columns if c.name in cells}
        return Row(key=dict(zip(names, values, strict=True)), cells=ordered)

    # -- lifecycle ----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the SQLite engine is closed")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any error."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def __enter__(self) -> SqliteEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
