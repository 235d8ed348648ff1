"""The embedded store against a plain model of Cassandra 4.x's reconcile rules.

The model below is written from Cassandra's source, not from the framework:
for every cell it keeps the list of all writes that reached it (each delivery
with the clock it arrived at, so a replayed TTL write has its own expiry) and
picks the survivor with ``_resolve``, a transcription of Cassandra 4.x
``Cells.resolveRegular``:

- the higher timestamp wins;
- on a tie, when either cell has a local deletion time (a tombstone, or an
  expiring cell whose deletion time is its expiry): the one that has it wins;
  else a tombstone beats an expiring cell; else the later deletion time wins;
- otherwise the greater value wins, compared as unsigned serialised bytes
  (``ByteBufferUtil.compareUnsigned``), so ``-0.0`` (0x80..) beats ``2.5`` (0x40..).

Row and partition tombstones hide every cell whose timestamp is at or below
theirs (``DeletionTime.deletes``). Keys are identified by their serialised
bytes and clustering is ordered as Java's ``Double.compare`` / unsigned UTF-8
bytes order them, so ``-0.0`` and ``0.0`` are two keys.

Hypothesis drives the SQLite engine and ``framework.core.cells.reconcile``
against the model; the regression tests pin the three cases of issue 13.
"""

from __future__ import annotations

import functools
import math
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.cells import Cell, reconcile
from framework.core.mutations import Delete, Mutation, Upsert
from framework.core.rows import Row
from framework.core.schema import Column, SchemaError, TableSchema
from stores.sqlite.engine import SqliteEngine

START = 1_700_000_000.5

# -- the model ------------------------------------------------------------------------------------

TYPES = {"t": "text", "d": "double", "n": "bigint", "f": "boolean", "b": "blob"}


def serialise(type_: str, value: object) -> bytes:
    """Cassandra's serialised form of a value of CQL type ``type_``."""
    if type_ == "bigint":
        return int(value).to_bytes(8, "big", signed=True)  # type: ignore[call-overload]
    if type_ == "double":
        return struct.pack(">d", float(value))  # type: ignore[arg-type]
    if type_ == "boolean":
        return b"\x01" if value else b"\x00"
    if type_ == "text":
        return value.encode("utf-8")  # type: ignore[union-attr]
    return bytes(value)  # type: ignore[arg-type]


NO_DELETION_TIME = None


@dataclass(frozen=True)
class Write:
    """One cell write as Cassandra holds it."""

    timestamp: int
    value: bytes  # serialised; b"" for a tombstone
    local_deletion_time: int | None  # expiry of an expiring cell, deletion time of a tombstone
    expiring: bool

    @property
    def tombstone(self) -> bool:
        return self.local_deletion_time is not None and not self.expiring


def _resolve(left: Write, right: Write) -> Write:
    """Cassandra 4.x ``Cells.resolveRegular``, step by step."""
    if left.timestamp != right.timestamp:
        return left if left.timestamp > right.timestamp else right
    left_has = left.local_deletion_time is not NO_DELETION_TIME
    right_has = right.local_deletion_time is not NO_DELETION_TIME
    if left_has or right_has:
        if left_has != right_has:
            return left if left_has else right
        if left.tombstone != right.tombstone:
            return left if left.tombstone else right
        if left.local_deletion_time != right.local_deletion_time:
            return left if left.local_deletion_time > right.local_deletion_time else right  # type: ignore[operator]
    return left if left.value >= right.value else right  # bytes compare unsigned, as compareUnsigned


def winner(writes: list[Write]) -> Write:
    return functools.reduce(_resolve, writes)


def visible(w: Write, now: float, deleted_at: int | None) -> bool:
    """Cassandra's ``isLive`` and ``DeletionTime.deletes`` for the surviving write."""
    if w.tombstone:
        return False
    if w.expiring and not now < w.local_deletion_time:  # type: ignore[operator]
        return False
    return deleted_at is None or w.timestamp > deleted_at


# A row as compared: ((key column, key bytes), ...) -> {column: (value bytes, timestamp, expiry)}
KeyId = tuple[tuple[str, bytes], ...]
RowState = dict[str, tuple[bytes, int, int | None]]


class Model:
    """Every write to every cell, and the tombstones over rows and partitions."""

    def __init__(self, schemas: dict[str, TableSchema]) -> None:
        self.schemas = schemas
        self.cells: dict[tuple[str, KeyId, str], list[Write]] = {}
        self.rows_deleted: dict[tuple[str, KeyId], int] = {}
        self.partitions_deleted: dict[tuple[str, KeyId], int] = {}
        self.keys: dict[tuple[str, KeyId], dict[str, object]] = {}

    def _id(self, table: str, key: dict[str, object], columns: tuple[Column, ...]) -> KeyId:
        return tuple((c.name, serialise(c.type, key[c.name])) for c in columns)

    def deliver(self, m: Mutation, clock: float) -> None:
        """One arrival of ``m`` at the store, whose clock reads ``clock``."""
        schema = self.schemas[m.table]
        now = int(clock)
        pid = self._id(m.table, m.key, schema.partition_key)  # type: ignore[arg-type]
        partition_only = set(m.key) == {c.name for c in schema.partition_key}
        if isinstance(m, Delete) and partition_only and schema.clustering_key:
            old = self.partitions_deleted.get((m.table, pid))
            self.partitions_deleted[(m.table, pid)] = m.version if old is None else max(old, m.version)
            return
        rid = self._id(m.table, m.key, schema.key_columns)  # type: ignore[arg-type]
        self.keys[(m.table, rid)] = dict(m.key)
        if isinstance(m, Delete) and m.columns is None:
            old = self.rows_deleted.get((m.table, rid))
            self.rows_deleted[(m.table, rid)] = m.version if old is None else max(old, m.version)
            return
        if isinstance(m, Delete):
            writes = {c: Write(m.version, b"", now, False) for c in m.columns}  # type: ignore[union-attr]
        else:
            assert isinstance(m, Upsert)
            writes = {}
            for c, v in m.cells.items():
                if v is None:
                    writes[c] = Write(m.version, b"", now, False)
                elif m.ttl is None:
                    writes[c] = Write(m.version, serialise(TYPES[c], v), NO_DELETION_TIME, False)
                else:
                    writes[c] = Write(m.version, serialise(TYPES[c], v), now + m.ttl, True)
        for c, w in writes.items():
            self.cells.setdefault((m.table, rid, c), []).append(w)

    def rows(self, table: str, now: float) -> dict[KeyId, RowState]:
        """The live rows of ``table`` at ``now``."""
        schema = self.schemas[table]
        npk = len(schema.partition_key)
        out: dict[KeyId, RowState] = {}
        for (t, rid, c), writes in self.cells.items():
            if t != table:
                continue
            cover = [
                v
                for v in (self.rows_deleted.get((t, rid)), self.partitions_deleted.get((t, rid[:npk])))
                if v is not None
            ]
            w = winner(writes)
            if visible(w, now, max(cover, default=None)):
                expiry = w.local_deletion_time if w.expiring else None
                out.setdefault(rid, {})[c] = (w.value, w.timestamp, expiry)
        return out


def clustering_order(schema: TableSchema, key: dict[str, object]) -> tuple[object, ...]:
    """Cassandra's clustering order: doubles by Double.compare, text by unsigned UTF-8 bytes."""
    out: list[object] = []
    for c in schema.clustering_key:
        v = key[c.name]
        if c.type == "double":
            out.append((float(v), math.copysign(1.0, float(v))))  # type: ignore[arg-type]
        elif c.type == "text":
            out.append(v.encode("utf-8"))  # type: ignore[union-attr]
        else:
            out.append(v)
    return tuple(out)


# -- what the engine returns, in the model's terms ------------------------------------------------


def observed(schema: TableSchema, row: Row) -> tuple[KeyId, RowState]:
    rid = tuple((c.name, serialise(c.type, row.key[c.name])) for c in schema.key_columns)
    cells = {
        name: (serialise(TYPES[name], cell.value), cell.writetime, cell.expires_at)
        for name, cell in row.cells.items()
    }
    return rid, cells


# -- schemas and histories ------------------------------------------------------------------------

EVENTS = TableSchema(
    "events",
    partition_key=(Column("p", "text"),),
    clustering_key=(Column("x", "double"), Column("s", "text")),
    columns=tuple(Column(n, t) for n, t in TYPES.items()),  # type: ignore[arg-type]
)
HUB = TableSchema(
    "hub",
    partition_key=(Column("k", "double"),),
    columns=tuple(Column(n, t) for n, t in TYPES.items()),  # type: ignore[arg-type]
)
SCHEMAS = {s.name: s for s in (EVENTS, HUB)}
VALUES: dict[str, list[object]] = {
    "t": ["", "a", "b", "ab", "é"],
    "d": [-1.5, -0.0, 0.0, 2.5, 3],  # 3: an int in a double column is the double 3.0
    "n": [-1, 0, 1, 2**62],
    "f": [False, True],
    "b": [b"", b"\x00", b"\xff"],
}
PARTITIONS = ["p", "q"]
XS = [-0.0, 0.0, 1.5]
HUB_KEYS = [-0.0, 0.0, 2.0]
TTLS = [None, None, 5, 50, 100_000]
versions = st.integers(0, 3)  # few versions: ties everywhere


@st.composite
def mutations(draw: st.DrawFn) -> Mutation:
    table = draw(st.sampled_from(["events", "events", "hub"]))
    if table == "events":
        key: dict[str, object] = {"p": draw(st.sampled_from(PARTITIONS))}
        if draw(st.integers(0, 9)) == 0:
            return Delete(table, key, draw(versions))  # a partition tombstone
        key |= {"x": draw(st.sampled_from(XS)), "s": draw(st.sampled_from(["", "a"]))}
    else:
        key = {"k": draw(st.sampled_from(HUB_KEYS))}
    kind = draw(st.sampled_from(["upsert"] * 5 + ["delete_row", "delete_columns"]))
    if kind == "delete_row":
        return Delete(table, key, draw(versions))
    columns = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3, unique=True))
    if kind == "delete_columns":
        return Delete(table, key, draw(versions), tuple(columns))
    cells = {c: draw(st.none() | st.sampled_from(VALUES[c])) for c in columns}
    return Upsert(table, key, cells, draw(versions), ttl=draw(st.sampled_from(TTLS)))


@dataclass(frozen=True)
class Delivery:
    """A history reaching the store: duplicated, shuffled, split into batches at moving clocks."""

    history: tuple[Mutation, ...]
    batches: tuple[tuple[Mutation, ...], ...]
    clocks: tuple[float, ...]  # the store's clock while each batch is applied
    read_at: float


@st.composite
def deliveries(draw: st.DrawFn) -> Delivery:
    history = draw(st.lists(mutations(), min_size=1, max_size=20))
    replays = draw(st.lists(st.sampled_from(history), max_size=8))
    delivered = draw(st.permutations(list(history) + replays))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(delivered) - 1)), max_size=6)))
    bounds = [0, *cuts, len(delivered)]
    batches = tuple(tuple(delivered[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if a < b)
    n = len(batches)
    steps = draw(st.lists(st.sampled_from([0.0, 0.0, 1.0, 7.0]), min_size=n, max_size=n))
    clocks = tuple(START + sum(steps[: i + 1]) for i in range(len(batches)))
    read_at = clocks[-1] + draw(st.sampled_from([0.0, 6.0, 60.0, 200_000.0]))
    return Delivery(tuple(history), batches, clocks, read_at)


def _replay(d: Delivery) -> tuple[SqliteEngine, Model]:
    clock = [START]
    engine = SqliteEngine(":memory:", clock=lambda: clock[0])
    model = Model(SCHEMAS)
    for schema in SCHEMAS.values():
        engine.ensure_table(schema)
    for batch, at in zip(d.batches, d.clocks, strict=True):
        clock[0] = at
        engine.apply(list(batch))
        for m in batch:
            model.deliver(m, at)
    clock[0] = d.read_at
    return engine, model


def _check(engine: SqliteEngine, model: Model, read_at: float, page: int) -> None:
    for name, schema in SCHEMAS.items():
        want = model.rows(name, read_at)
        scanned: dict[KeyId, RowState] = {}
        cursor = None
        while True:  # small pages: a partition (and its tombstone) spans pages
            rows, cursor = engine.scan_page(name, after=cursor, size=page)
            scanned.update(observed(schema, r) for r in rows)
            if cursor is None:
                break
        assert scanned == want, f"scan of {name}"
        for (table, rid), key in model.keys.items():
            if table == name:
                row = engine.read_row(name, key)
                got_row = dict([observed(schema, row)] if row else [])
                assert got_row == ({rid: want[rid]} if rid in want else {}), f"row {key}"
        if schema.clustering_key:
            for p in PARTITIONS:
                pid = (("p", serialise("text", p)),)
                expected = sorted(
                    (rid for rid in want if rid[:1] == pid),
                    key=lambda rid: clustering_order(schema, model.keys[(name, rid)]),
                )
                for reverse in (False, True):
                    rows = engine.read_partition(name, {"p": p}, reverse=reverse)
                    got = [observed(schema, r) for r in rows]
                    order = expected[::-1] if reverse else expected
                    assert got == [(rid, want[rid]) for rid in order], f"partition {p} reverse={reverse}"


# -- properties -----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(d=deliveries(), page=st.sampled_from([1, 2, 500]))
def test_sqlite_engine_matches_the_cassandra_model(d: Delivery, page: int) -> None:
    engine, model = _replay(d)
    try:
        _check(engine, model, d.read_at, page)
    finally:
        engine.close()


@st.composite
def cell_writes(draw: st.DrawFn) -> list[tuple[Cell, Write]]:
    """Writes to one cell, as framework cells and as model writes (same column type)."""
    column = draw(st.sampled_from(["t", "d"]))
    pool = [v for v in VALUES[column] if not isinstance(v, int) or isinstance(v, bool) or column != "d"]
    out = []
    for _ in range(draw(st.integers(1, 6))):
        ts = draw(versions)
        kind = draw(st.sampled_from(["live", "expiring", "tombstone"]))
        if kind == "tombstone":
            # a tombstone's deletion time is invisible to the framework: any value must give the same result
            out.append((Cell(None, ts), Write(ts, b"", draw(st.integers(0, 9)), False)))
            continue
        value = draw(st.sampled_from(pool))
        raw = serialise(TYPES[column], value)
        if kind == "live":
            out.append((Cell(value, ts), Write(ts, raw, NO_DELETION_TIME, False)))
        else:
            expiry = draw(st.integers(0, 3))
            out.append((Cell(value, ts, expiry), Write(ts, raw, expiry, True)))
    return out


def _seen(cell: Cell | Write) -> tuple[object, ...]:
    """What a reader can tell apart: tombstone, or (value bytes, timestamp, expiry)."""
    if isinstance(cell, Write):
        if cell.tombstone:
            return ("tombstone", cell.timestamp)
        return (cell.value, cell.timestamp, cell.local_deletion_time)
    if cell.value is None:
        return ("tombstone", cell.writetime)
    column = "d" if isinstance(cell.value, float) else "t"
    return (serialise(TYPES[column], cell.value), cell.writetime, cell.expires_at)


@settings(max_examples=300, deadline=None)
@given(writes=cell_writes(), seed=st.integers(0, 2**32))
def test_python_reconcile_matches_the_cassandra_model(writes: list[tuple[Cell, Write]], seed: int) -> None:
    cells = [c for c, _ in writes]
    random.Random(seed).shuffle(cells)  # any arrival order
    assert _seen(functools.reduce(reconcile, cells)) == _seen(winner([w for _, w in writes]))


# -- regressions of issue 13 item 7 ---------------------------------------------------------------

TIE = TableSchema("tie", (Column("k", "text"),), (Column("t", "text"), Column("d", "double")))


def _engine(*schemas: TableSchema) -> SqliteEngine:
    engine = SqliteEngine(":memory:", clock=lambda: START)
    for s in schemas:
        engine.ensure_table(s)
    return engine


@pytest.mark.parametrize("together", [False, True])
def test_an_expiring_cell_beats_a_live_cell_on_a_tie_whatever_the_values(together: bool) -> None:
    """Upsert(t="b")@9 + Upsert(t="a", ttl=100000)@9 keeps "a", as Cassandra does (CASSANDRA-14592)."""
    live = Upsert("tie", {"k": "x"}, {"t": "b"}, 9)
    expiring = Upsert("tie", {"k": "x"}, {"t": "a"}, 9, ttl=100_000)
    for order in ([live, expiring], [expiring, live]):
        with _engine(TIE) as engine:
            for batch in [order] if together else [[m] for m in order]:
                engine.apply(batch)
            row = engine.read_row("tie", {"k": "x"})
            assert row is not None and row.values() == {"t": "a"}
            assert row.cells["t"].expires_at == int(START) + 100_000
    assert reconcile(Cell("b", 9), Cell("a", 9, 10)).value == "a"
    assert reconcile(Cell("a", 9, 10), Cell("b", 9)).value == "a"


def test_two_expiring_cells_go_by_expiry_before_value_and_tombstones_beat_both() -> None:
    assert reconcile(Cell("z", 9, 100), Cell("a", 9, 200)) == Cell("a", 9, 200)
    assert reconcile(Cell("a", 9, 200), Cell("z", 9, 100)) == Cell("a", 9, 200)
    assert reconcile(Cell("z", 9, 100), Cell(None, 9)) == Cell(None, 9)
    assert reconcile(Cell("z", 9, 100), Cell("z", 10)) == Cell("z", 10)  # a later write time first
    with _engine(TIE) as engine:
        key = {"k": "x"}
        engine.apply([Upsert("tie", key, {"t": "z"}, 9, ttl=100)])
        engine.apply([Upsert("tie", key, {"t": "a"}, 9, ttl=200)])
        engine.apply([Upsert("tie", key, {"t": "zz"}, 9, ttl=150)])
        assert engine.read_row("tie", key).cells["t"] == Cell("a", 9, int(START) + 200)  # type: ignore[union-attr]
        engine.apply([Delete("tie", key, 9, ("t",))])
        engine.apply([Upsert("tie", key, {"t": "zzz"}, 9, ttl=300)])
        assert engine.read_row("tie", key) is None


@pytest.mark.parametrize("together", [False, True])
def test_minus_zero_keeps_its_bytes_and_beats_a_greater_double_on_a_tie(together: bool) -> None:
    """Upsert(d=2.5)@9 + Upsert(d=-0.0)@9 keeps -0.0: 0x80.. > 0x40.. unsigned."""
    a, b = Upsert("tie", {"k": "x"}, {"d": 2.5}, 9), Upsert("tie", {"k": "x"}, {"d": -0.0}, 9)
    for order in ([a, b], [b, a]):
        with _engine(TIE) as engine:
            for batch in [order] if together else [[m] for m in order]:
                engine.apply(batch)
            row = engine.read_row("tie", {"k": "x"})
            assert row is not None and math.copysign(1.0, row.values()["d"]) == -1.0  # type: ignore[arg-type]
    assert math.copysign(1.0, reconcile(Cell(2.5, 9), Cell(-0.0, 9)).value) == -1.0  # type: ignore[arg-type]
    assert math.copysign(1.0, reconcile(Cell(-0.0, 9), Cell(0.0, 9)).value) == -1.0  # type: ignore[arg-type]


def test_minus_zero_survives_a_file_reopen(tmp_path: Path) -> None:
    with SqliteEngine(tmp_path / "z.db") as engine:
        engine.ensure_table(HUB)
        engine.apply([Upsert("hub", {"k": -0.0}, {"d": -0.0}, 1), Upsert("hub", {"k": 0.0}, {"d": 0.0}, 1)])
    with SqliteEngine(tmp_path / "z.db") as engine:
        sign = functools.partial(math.copysign, 1.0)
        signs = {sign(r.key["k"]): sign(r.values()["d"]) for r in engine.scan("hub")}  # type: ignore[arg-type]
        assert signs == {-1.0: -1.0, 1.0: 1.0}


def test_a_partition_delete_is_a_partition_tombstone() -> None:
    """Delete with only the partition key of a clustered table (a SchemaError before)."""
    with _engine(EVENTS) as engine:
        rows = [({"p": "p", "x": x, "s": "a"}, v) for x, v in ((-0.0, 5), (0.0, 10), (1.5, 20))]
        engine.apply([Upsert("events", k, {"n": v}, v) for k, v in rows])
        engine.apply([Upsert("events", {"p": "q", "x": 0.0, "s": "a"}, {"n": 1}, 1)])
        engine.apply([Delete("events", {"p": "p"}, 10)])
        assert [r.values() for r in engine.read_partition("events", {"p": "p"})] == [{"n": 20}]
        late = {"p": "p", "x": 0.0, "s": "b"}
        engine.apply([Upsert("events", late, {"n": 10}, 10)])  # arrives late, at the tombstone's version
        assert engine.read_row("events", late) is None
        assert len(list(engine.scan("events"))) == 2
        with pytest.raises(SchemaError):
            engine.apply([Delete("events", {"p": "p"}, 11, ("n",))])
        with pytest.raises(SchemaError):
            engine.apply([Delete("events", {"p": "p", "x": 0.0}, 11)])  # a prefix: no range deletes
