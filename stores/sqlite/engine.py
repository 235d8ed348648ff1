"""Cassandra's wide-column semantics on one SQLite file (synchronous).

Layout: one SQLite row per wide-column row in ``converge_rows``, keyed by (table, encoded
partition key, encoded clustering key). It holds the row tombstone's version (``ts``) and
every cell of the row packed in one JSON object (``stores.sqlite.packing``): live cells,
cell tombstones and expiring cells, each with its write time. A partition tombstone (a
``Delete`` naming only the partition key of a clustered table) is the row tombstone of the
empty clustering key ``b""``, which no row of a clustered table has, so it comes before every
row of its partition. Keys use ``stores.sqlite.keycodec``, so SQL can order, range and page
rows of a partition by memcmp.

A write reads the rows it touches and merges them with ``framework.core.cells.reconcile``
inside its transaction (``BEGIN IMMEDIATE`` holds the file's write lock, so no other
connection writes in between); a row whose merge changes nothing is not rewritten. Files of
the earlier layout (one SQLite row per cell, ``converge_cells``) are converted on open.

Rows a write merged stay in a bounded in-memory cache (``row_cache`` rows, the longest
cached dropped first), so a later write of the same row merges with them instead of reading
them back. The cache is emptied whenever another connection has committed to the file since
this one's last write (``PRAGMA data_version``, read inside the write transaction, where no
other writer can intervene) and after any failed write.

Durability: WAL journal with ``synchronous=FULL``, so a returned ``apply`` has been fsynced.
Thread safety: one connection guarded by a lock. Several processes (the workers of one app)
may share a file: SQLite takes one writer at a time.
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

from framework.core.cells import Cell, reconcile, shadowed
from framework.core.mutations import CellValue, Delete, LogState, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, SchemaError, TableSchema
from stores.errors import StoreError
from stores.evolution import added_columns
from stores.sqlite.keycodec import (
    decode_key,
    encode_checked_key,
    encode_checked_value,
    encode_key,
    partition_hash,
    prefix_end,
)
from stores.sqlite.packing import (
    Item,
    blob_columns,
    cell_of,
    columns_of,
    dump,
    item_of,
    items,
    live_cells,
    pack,
)

__all__ = ["SqliteEngine", "ScanCursor", "schema_to_json", "schema_from_json"]

#: Where a scan page stopped: the last (encoded partition key, encoded clustering key) read.
ScanCursor = tuple[bytes, bytes]
_START: ScanCursor = (b"", b"")
#: The clustering key under which a clustered table's partition tombstone is stored.
_PARTITION = b""

_DDL = (
    "CREATE TABLE IF NOT EXISTS converge_tables (name TEXT PRIMARY KEY, body TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS converge_rows ("
    " tbl TEXT NOT NULL, pk BLOB NOT NULL, ck BLOB NOT NULL, ph INTEGER NOT NULL, ts INTEGER,"
    " cells TEXT NOT NULL, PRIMARY KEY (tbl, pk, ck)) WITHOUT ROWID",
)
# A row and, in a clustered table, its partition's tombstone (clustering key x'', sorted first).
_SELECT_ROW = (
    "SELECT ck, ts, cells FROM converge_rows WHERE tbl = ? AND pk = ? AND ck IN (x'', ?) ORDER BY ck"
)
_SELECT_PARTITION_TOMBSTONE = "SELECT ts FROM converge_rows WHERE tbl = ? AND pk = ? AND ck = x''"
_SELECT_PARTITION_ROWS = "SELECT ck, ts, cells FROM converge_rows WHERE tbl = ? AND pk = ? AND ck <> x''"
# Fixed statements; every value is bound.
_WRITE_ROW = "INSERT OR REPLACE INTO converge_rows (tbl, pk, ck, ph, ts, cells) VALUES (?,?,?,?,?,?)"
_DELETE_ROW = "DELETE FROM converge_rows WHERE tbl = ? AND pk = ? AND ck = ?"
#: Chunk sizes of multi-partition reads: a chunk is padded to the next size, so the statements
#: are fixed (placeholders only) and few.
_MANY_PARTITIONS = (1, 8, 64, 256)
_PARTITIONS_QUERIES = {
    n: "SELECT pk, ck, ts, cells FROM converge_rows WHERE tbl = ? AND pk IN ("  # noqa: S608
    + ",".join("?" * n)
    + ") ORDER BY pk, ck"
    for n in _MANY_PARTITIONS
}
# The stored rows of many (pk, ck) keys of one table, each found by the primary key.
_STORED_ROWS = {
    n: "SELECT r.pk, r.ck, r.ts, r.cells FROM (VALUES "  # noqa: S608
    + ",".join(["(?,?)"] * n)
    + ") AS v JOIN converge_rows AS r ON r.tbl = ? AND r.pk = v.column1 AND r.ck = v.column2"
    for n in _MANY_PARTITIONS
}
_SCAN_ROWS = (
    "SELECT pk, ck, ts, cells FROM converge_rows WHERE tbl = ? AND ph % ? = ? AND (pk, ck) > (?, ?)"
    " ORDER BY pk, ck LIMIT ?"
)
# Partition reads: fixed fragments only (lower bound, upper bound, direction); values are bound.
_PARTITION_QUERIES = {
    (lo, hi, desc): "SELECT ?, ck, ts, cells FROM converge_rows WHERE tbl = ? AND pk = ?"  # noqa: S608
    + (" AND ck >= ?" if lo else "")
    + (" AND ck < ?" if hi else "")
    + (" ORDER BY ck DESC" if desc else " ORDER BY ck ASC")
    for lo in (False, True)
    for hi in (False, True)
    for desc in (False, True)
}
#: The earlier layout (one SQLite row per cell; ``col = ''`` a row tombstone), converted on open.
_OLD_CELLS = "SELECT tbl, pk, ck, col, val, wt, exp, ph FROM converge_cells ORDER BY tbl, pk, ck, col"


def schema_to_json(schema: TableSchema) -> str:
    """A canonical JSON form of ``schema``."""
    return json.dumps(dataclasses.asdict(schema), sort_keys=True)


def schema_from_json(body: str) -> TableSchema:
    """The schema stored by ``schema_to_json``."""
    d = json.loads(body)
    for part in ("partition_key", "clustering_key", "columns"):
        d[part] = tuple(Column(**c) for c in d[part])
    return TableSchema(**d)


class _Compiled:
    """What planning an upsert needs of one schema, found once: the key column names, the only
    key column of a table keyed by one partition column (else None), the regular columns by
    name and the names of the double columns."""

    __slots__ = ("schema", "key_names", "one_pk", "regular", "doubles")

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.key_names = frozenset(c.name for c in schema.key_columns)
        self.one_pk = schema.partition_key[0] if len(schema.key_columns) == 1 else None
        self.regular = {c.name: c for c in schema.columns}
        self.doubles = columns_of(schema, "double")


class _RowPlan:
    """The reduced writes of one batch to one row: ``ph`` the partition hash of a partition
    tombstone (other rows: ``SqliteEngine._merged``), ``partition`` for a partition tombstone
    (clustering key ``_PARTITION``, never cells), the row ``tombstone`` and the ``cells``."""

    __slots__ = ("schema", "ph", "partition", "tombstone", "cells")

    def __init__(self, schema: TableSchema, ph: int = 0, partition: bool = False) -> None:
        self.schema, self.ph, self.partition = schema, ph, partition
        self.tombstone: int | None = None
        self.cells: dict[str, Cell] = {}


#: The key column names and the regular column names of each schema seen, by its identity.
_LAYOUTS: dict[int, tuple[TableSchema, tuple[str, ...], tuple[str, ...]]] = {}


def _layout(schema: TableSchema) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``schema``'s key column names and regular column names, in order."""
    known = _LAYOUTS.get(id(schema))
    if known is None or known[0] is not schema:
        if len(_LAYOUTS) > 4096:
            _LAYOUTS.clear()
        keys, columns = tuple(c.name for c in schema.key_columns), tuple(c.name for c in schema.columns)
        known = _LAYOUTS[id(schema)] = (schema, keys, columns)
    return known[1], known[2]


def _is_partition_delete(schema: TableSchema, m: Delete) -> bool:
    """True for a ``Delete`` naming exactly the partition key of a table with clustering columns."""
    return bool(schema.clustering_key) and set(m.key) == {c.name for c in schema.partition_key}


def _later(version: int | None, other: int | None) -> int | None:
    """The later of two tombstone versions, either of which may be absent."""
    if version is None:
        return other
    return version if other is None or version >= other else other


def _from_sql(schema: TableSchema, col: str, value: CellValue) -> CellValue:
    if value is None:
        return None
    t = schema.column(col).type
    if t == "boolean":
        return bool(value)
    if t == "double":
        return float(value)
    return value


#: Rows an engine keeps in memory by default (``SqliteEngine(row_cache=...)``; 0: none).
ROW_CACHE = 65_536

#: A cached row: (row tombstone, packed cells, partition hash); None: no stored row. Only text and
#: numbers, so the garbage collector does not track the cache.
_Cached = tuple[int | None, str, int] | None

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
            # 64 MiB of page cache instead of 2: the row table's pages stay in memory as it grows
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

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        row_cache: int = ROW_CACHE,
    ) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self._row_cache = max(0, row_cache)
        self._cache: dict[tuple[str, bytes, bytes], _Cached] = {}
        self._compiled: dict[str, _Compiled] = {}
        self._data_version: int | None = None
        self._closed = False
        self._conn = _connect(os.fspath(path), _BUSY_TIMEOUT)
        self._schemas: dict[str, TableSchema] = {
            name: schema_from_json(body)
            for name, body in self._conn.execute("SELECT name, body FROM converge_tables")
        }
        self._convert_cell_table()

    def _convert_cell_table(self) -> None:
        """Convert a file of the earlier layout (one SQLite row per cell) to packed rows, once."""
        if not self._has_cell_table():
            return
        with self._transaction():
            if not self._has_cell_table():  # another process converted it while this one waited
                return
            rows = []
            records = self._conn.execute(_OLD_CELLS).fetchall()
            for (table, pk, ck), group in itertools.groupby(records, key=operator.itemgetter(0, 1, 2)):
                schema = self.schema(table)
                tombstone: int | None = None
                cells: dict[str, Cell] = {}
                records_of_row = list(group)
                ph = records_of_row[0][7]
                for _, _, _, col, val, wt, exp, _ in records_of_row:
                    if col == "":
                        tombstone = _later(tombstone, wt)
                    else:
                        cells[col] = Cell(_from_sql(schema, col, val), wt, exp)
                kept = {n: c for n, c in cells.items() if not shadowed(c, tombstone)}
                rows.append((table, pk, ck, ph, tombstone, pack(schema, kept)))
            self._conn.executemany(_WRITE_ROW, rows)
            self._conn.execute("DROP TABLE converge_cells")

    def _has_cell_table(self) -> bool:
        found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'converge_cells'"
        return self._conn.execute(found).fetchone() is not None

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
        """Validate every mutation and merge them per row, then merge each row with its stored
        cells and write the rows that changed, all in one durable transaction."""
        with self._lock:
            self._check_open()
            plans = self._plan(mutations)
            if not plans:
                return
            merged: dict[tuple[str, bytes, bytes], _Cached] = {}
            try:
                with self._transaction():
                    cache = self._valid_cache()
                    deleted = {(t, pk): p.tombstone for (t, pk, _), p in plans.items() if p.partition}
                    if deleted:  # rows of those partitions change beyond the plans
                        cache.clear()
                    for (table, pk, _), plan in plans.items():
                        if plan.partition:
                            self._delete_partition(table, pk, plan)
                    missing = [k for k, p in plans.items() if not p.partition and k not in cache]
                    stored = self._stored(missing)
                    writes = []
                    for key, plan in plans.items():
                        if plan.partition:
                            continue
                        old = cache[key] if key in cache else stored.get(key)
                        row = self._merged(key, plan, old, deleted.get(key[:2]))
                        if row is not None:
                            writes.append(row)
                            merged[key] = (row[4], row[5], row[3])
                        elif key not in cache:
                            merged[key] = old
                    if writes:
                        self._conn.executemany(_WRITE_ROW, writes)
            except BaseException:
                self._cache.clear()  # what was committed is unknown: read it back next time
                raise
            self._remember(merged)

    def _valid_cache(self) -> dict[tuple[str, bytes, bytes], _Cached]:
        """The row cache, emptied first when another connection committed since this one's last
        transaction; called inside a write transaction."""
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        if version != self._data_version:
            self._cache.clear()
            self._data_version = version
        return self._cache

    def _remember(self, rows: dict[tuple[str, bytes, bytes], _Cached]) -> None:
        """Keep committed ``rows``, dropping the longest cached beyond the bound."""
        if not self._row_cache:
            return
        cache = self._cache
        cache.update(rows)
        excess = len(cache) - self._row_cache
        if excess > 0:
            for key in list(itertools.islice(cache, excess + self._row_cache // 4)):
                del cache[key]

    def _stored(self, keys: list[tuple[str, bytes, bytes]]) -> dict[tuple[str, bytes, bytes], _Cached]:
        """The stored row of each of ``keys`` (None where there is none), read by one statement
        per table and ``_MANY_PARTITIONS[-1]`` keys."""
        found: dict[tuple[str, bytes, bytes], _Cached] = dict.fromkeys(keys)
        step = _MANY_PARTITIONS[-1]
        for table, group in itertools.groupby(sorted(keys), key=operator.itemgetter(0)):
            rows = [(pk, ck) for _, pk, ck in group]
            for i in range(0, len(rows), step):
                chunk = rows[i : i + step]
                size = next(n for n in _MANY_PARTITIONS if n >= len(chunk))
                params = [v for key in chunk + chunk[-1:] * (size - len(chunk)) for v in key]
                for pk, ck, tombstone, text in self._conn.execute(_STORED_ROWS[size], (*params, table)):
                    found[(table, pk, ck)] = (tombstone, text, partition_hash(pk))
        return found

    @staticmethod
    def _merged(
        key: tuple[str, bytes, bytes],
        plan: _RowPlan,
        stored: _Cached,
        partition_deleted: int | None,
    ) -> tuple[Any, ...] | None:
        """The ``stored`` row merged with ``plan`` (a row to write), or None when nothing changes.
        Works on the packed items: only a write-time tie makes cells to ``reconcile``."""
        old_tombstone: int | None = None
        row: dict[str, Item] = {}
        if stored is None:
            ph = partition_hash(key[1])
        else:
            old_tombstone, row, ph = stored[0], items(stored[1]), stored[2]
        tombstone = _later(old_tombstone, plan.tombstone)
        changed = stored is None or tombstone != old_tombstone
        if tombstone is not None and tombstone != old_tombstone:
            row = {n: i for n, i in row.items() if i[1] > tombstone}
        cover = _later(tombstone, partition_deleted)
        blobs = blob_columns(plan.schema)
        for name, cell in plan.cells.items():
            if cover is not None and shadowed(cell, cover):
                continue
            old = row.get(name)
            if old is None or cell.writetime > old[1]:
                if cell.expires_at is None and name not in blobs:  # item_of's common case
                    row[name], changed = [cell.value, cell.writetime], True
                else:
                    row[name], changed = item_of(blobs, name, cell), True
            elif cell.writetime == old[1]:
                stored_cell = cell_of(blobs, name, old)
                if reconcile(stored_cell, cell) is not stored_cell:
                    row[name], changed = item_of(blobs, name, cell), True
        if not changed or (not row and tombstone is None):
            return None
        return (*key, ph, tombstone, dump(row))

    def _delete_partition(self, table: str, pk: bytes, plan: _RowPlan) -> None:
        """Write a partition tombstone and drop what it shadows from the partition's rows."""
        version = plan.tombstone
        for ck, tombstone, text in self._conn.execute(_SELECT_PARTITION_ROWS, (table, pk)).fetchall():
            row: dict[str, Item] = items(text)
            kept = {n: i for n, i in row.items() if i[1] > version}
            left = tombstone if tombstone is not None and tombstone > version else None
            if not kept and left is None:
                self._conn.execute(_DELETE_ROW, (table, pk, ck))
            elif len(kept) != len(row) or left != tombstone:
                self._conn.execute(_WRITE_ROW, (table, pk, ck, plan.ph, left, dump(kept)))
        found = self._conn.execute(_SELECT_PARTITION_TOMBSTONE, (table, pk)).fetchone()
        mark = _later(None if found is None else found[0], version)
        self._conn.execute(_WRITE_ROW, (table, pk, _PARTITION, plan.ph, mark, "{}"))

    def _plan(
        self, mutations: Sequence[Mutation], now: int | None = None
    ) -> dict[tuple[str, bytes, bytes], _RowPlan]:
        if isinstance(mutations, Upsert | Delete | LogState) or not isinstance(mutations, Iterable):
            raise SchemaError("mutations", "expected a sequence of mutations")
        if now is None:
            now = int(self._clock())
        plans: dict[tuple[str, bytes, bytes], _RowPlan] = {}
        schemas = self._schemas
        for m in mutations:
            if type(m) is not Upsert:  # the common case first: no isinstance against a union
                if isinstance(m, LogState):
                    m = m.as_upsert()
                if not isinstance(m, Upsert | Delete):
                    raise SchemaError("mutations", f"not a mutation: {type(m).__name__}")
            schema = schemas.get(m.table) or self.schema(m.table)
            if isinstance(m, Upsert):
                ttl = m.ttl if m.ttl is not None else schema.default_ttl
                self._plan_upsert(plans, schema, m, None if ttl is None else now + ttl)
                continue
            if isinstance(m, Delete) and _is_partition_delete(schema, m):
                self._plan_partition_delete(plans, schema, m)
                continue
            schema.check_key(m.key)
            pk, ck = encode_checked_key(schema, m.key)
            plan = plans.get((m.table, pk, ck))
            if plan is None:
                plan = plans[(m.table, pk, ck)] = _RowPlan(schema)
            if m.columns is None:
                plan.tombstone = m.version if plan.tombstone is None else max(plan.tombstone, m.version)
            else:
                schema.check_cells(dict.fromkeys(m.columns))
                for name in m.columns:
                    self._merge(plan, name, Cell(None, m.version))
        return plans

    def _plan_upsert(
        self,
        plans: dict[tuple[str, bytes, bytes], _RowPlan],
        schema: TableSchema,
        m: Upsert,
        expires: int | None,
    ) -> None:
        """``_plan`` of an upsert (its cells expiring at ``expires``): the schema's checks and key
        encoding through its ``_Compiled`` form (the schema's own checks raise the errors)."""
        c = self._compiled.get(m.table)
        if c is None or c.schema is not schema:
            c = self._compiled[m.table] = _Compiled(schema)
        key = m.key
        one = c.one_pk
        if one is None or key.keys() != c.key_names or key[one.name] is None:
            schema.check_key(key)
            pk, ck = encode_checked_key(schema, key)
        else:
            value = key[one.name]
            one.check(value)
            pk, ck = encode_checked_value(one, value), b""
        plan = plans.get((m.table, pk, ck))
        if plan is None:
            plan = plans[(m.table, pk, ck)] = _RowPlan(schema)
        regular, doubles, cells, version = c.regular, c.doubles, plan.cells, m.version
        for name, value in m.cells.items():
            column = regular.get(name)
            if column is None:
                schema.check_cells(m.cells)  # raises: not a regular column
            assert column is not None
            column.check(value)
            if value is None:
                cell = Cell(None, version)
            else:
                cell = Cell(float(value) if name in doubles else value, version, expires)
            old = cells.get(name)
            cells[name] = cell if old is None else reconcile(old, cell)

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
            records = self._conn.execute(_SCAN_ROWS, (table, shards, shard, pk0, ck0, size)).fetchall()
            if not records:
                return [], None
            last = (records[-1][0], records[-1][1])
            now = self._clock()
            # the first partition may continue one of the last page: its tombstone was read there
            deleted = self._partition_tombstone(schema, records[0][0])
        return list(self._rows(schema, records, now, deleted)), (last if len(records) == size else None)

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
        """The live rows of ordered (pk, ck, ts, cells) records.

        ``deleted`` holds partition tombstones known beforehand; those met in
        ``records`` (ascending order puts them first in their partition) are added.
        """
        clustered = bool(schema.clustering_key)
        partition: bytes | None = None
        partition_tombstone: int | None = None
        values: tuple[CellValue, ...] | None = None  # the partition key's, decoded once a partition
        for pk, ck, tombstone, text in records:
            if pk != partition:
                partition, partition_tombstone, values = pk, deleted.get(pk), None
            if clustered and ck == _PARTITION:
                partition_tombstone = _later(partition_tombstone, tombstone)
                continue
            cells = live_cells(schema, text, now, _later(partition_tombstone, tombstone))
            if cells:
                if values is None:
                    values = decode_key(schema.partition_key, pk)
                yield self._row(schema, values + decode_key(schema.clustering_key, ck), cells)

    @staticmethod
    def _row(schema: TableSchema, values: tuple[CellValue, ...], cells: dict[str, Cell]) -> Row:
        names, columns = _layout(schema)
        ordered = {name: cells[name] for name in columns if name in cells}
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
