"""The synchronous SQLite engine: durability settings, schema persistence, atomicity, key encoding."""

from __future__ import annotations

import math
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.mutations import Delete, Upsert
from framework.core.schema import Column, SchemaError, TableSchema
from stores.errors import StoreError
from stores.sqlite.engine import SqliteEngine
from stores.sqlite.keycodec import decode_key, encode_key, prefix_end
from tests.stores.harness import ManualClock, hub_schema, timeline_schema

K = {"org": "acme", "id": 7}


def test_file_engine_is_wal_and_fully_synchronous(tmp_path: Path) -> None:
    with SqliteEngine(tmp_path / "e.db") as engine:
        engine.ensure_table(hub_schema("hub"))
    conn = sqlite3.connect(tmp_path / "e.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    with SqliteEngine(tmp_path / "e.db") as engine:
        assert engine._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_memory_engine_works_and_is_private() -> None:
    with SqliteEngine(":memory:") as a, SqliteEngine(":memory:") as b:
        a.ensure_table(hub_schema("hub"))
        a.apply([Upsert("hub", K, {"n": 1}, 1)])
        assert a.read_row("hub", K).values() == {"n": 1}  # type: ignore[union-attr]
        assert b.tables() == []


def test_schemas_persist_and_may_only_grow(tmp_path: Path) -> None:
    path = tmp_path / "e.db"
    base = hub_schema("hub")
    grown = TableSchema(base.name, base.partition_key, (*base.columns, Column("extra", "text")))
    with SqliteEngine(path) as engine:
        engine.ensure_table(base)
        engine.ensure_table(timeline_schema("tl", "DESC"))
        engine.apply([Upsert("hub", K, {"n": 1}, 1)])
        engine.ensure_table(grown)
        engine.apply([Upsert("hub", K, {"extra": "x"}, 2)])
        with pytest.raises(SchemaError):
            engine.ensure_table(TableSchema("hub", (Column("org", "text"),), base.columns))
        with pytest.raises(SchemaError):
            engine.ensure_table(TableSchema("hub", base.partition_key, (Column("n", "text"),)))
    with SqliteEngine(path) as engine:
        assert engine.tables() == ["hub", "tl"]
        assert engine.schema("hub") == grown and engine.schema("tl") == timeline_schema("tl", "DESC")
        assert engine.read_row("hub", K).values() == {"n": 1, "extra": "x"}  # type: ignore[union-attr]


def test_a_failing_transaction_leaves_nothing_behind() -> None:
    """The rows' write fails (an injected I/O error) after the partition tombstone was written:
    the tombstone is rolled back."""
    engine = SqliteEngine(":memory:")
    engine.ensure_table(timeline_schema("tl"))
    real = engine._conn

    class RowsWriteFails:
        calls = 0

        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def executemany(self, sql: str, rows: object) -> object:
            RowsWriteFails.calls += 1
            raise sqlite3.OperationalError("disk I/O error (injected)")

    day = {"org": "acme", "day": 1, "seq": "a"}
    engine._conn = RowsWriteFails()  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError):
        engine.apply([Delete("tl", {"org": "acme"}, 5), Upsert("tl", day, {"note": "x"}, 6)])
    engine._conn = real
    assert RowsWriteFails.calls == 1
    assert real.execute("SELECT count(*) FROM converge_rows").fetchone() == (0,)  # the tombstone too
    engine.apply([Upsert("tl", day, {"note": "y"}, 6)])  # the connection is usable again
    assert engine.read_row("tl", day).values() == {"note": "y"}  # type: ignore[union-attr]


def test_bad_arguments_raise_typed_errors() -> None:
    engine = SqliteEngine(":memory:", clock=ManualClock())
    engine.ensure_table(timeline_schema("tl"))
    p = {"org": "o"}
    with pytest.raises(SchemaError):
        engine.apply(Upsert("tl", {**p, "day": 1, "seq": "s"}, {"note": "x"}, 1))  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        engine.apply(["not a mutation"])  # type: ignore[list-item]
    with pytest.raises(SchemaError):
        engine.read_partition("tl", p, start=[1, "s", "extra"])
    with pytest.raises(SchemaError):
        engine.read_partition("tl", p, start=["day must be an int"])
    with pytest.raises(SchemaError):
        engine.read_partition("tl", p, end="1")  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        engine.read_partition("tl", p, limit=True)
    for kwargs in ({"shard": 2, "shards": 2}, {"shard": -1}, {"shards": 0}, {"size": 0}):
        with pytest.raises(SchemaError):
            engine.scan_page("tl", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(SchemaError):
        engine.ensure_table("tl")  # type: ignore[arg-type]
    engine.close()
    with pytest.raises(StoreError):
        engine.apply([Upsert("tl", {**p, "day": 1, "seq": "s"}, {"note": "x"}, 1)])


def test_double_keys_address_rows_as_cassandra_does() -> None:
    """3 and 3.0 name one row; -0.0 and 0.0 are two (distinct serialised keys), -0.0 sorting first."""
    schema = TableSchema("d", (Column("x", "double"),), (Column("v", "bigint"),))
    with SqliteEngine(":memory:") as engine:
        engine.ensure_table(schema)
        engine.apply([Upsert("d", {"x": -0.0}, {"v": 1}, 1), Upsert("d", {"x": 0.0}, {"v": 2}, 2)])
        engine.apply([Upsert("d", {"x": 3}, {"v": 3}, 1), Delete("d", {"x": 3.0}, 1)])
        rows = sorted(engine.scan("d"), key=lambda r: r.values()["v"])
        assert [(r.key, r.values()) for r in rows] == [({"x": -0.0}, {"v": 1}), ({"x": 0.0}, {"v": 2})]
        assert [math.copysign(1.0, r.key["x"]) for r in rows] == [-1.0, 1.0]  # type: ignore[arg-type]
        assert engine.read_row("d", {"x": -0.0}).values() == {"v": 1}  # type: ignore[union-attr]
    clustered = TableSchema("c", (Column("p", "text"),), (Column("v", "bigint"),), (Column("x", "double"),))
    with SqliteEngine(":memory:") as engine:
        engine.ensure_table(clustered)
        xs = [0.0, -0.0, -1e-300, 1e-300]
        engine.apply([Upsert("c", {"p": "a", "x": x}, {"v": i}, 1) for i, x in enumerate(xs)])
        got = [(r.key["x"], r.values()["v"]) for r in engine.read_partition("c", {"p": "a"})]
        assert [v for _, v in got] == [2, 1, 0, 3]  # Double.compare order: -1e-300 < -0.0 < 0.0 < 1e-300


def test_threads_sharing_an_engine_do_not_lose_writes(tmp_path: Path) -> None:
    engine = SqliteEngine(tmp_path / "e.db")
    engine.ensure_table(hub_schema("hub"))

    def writer(base: int) -> None:
        for i in range(25):
            engine.apply([Upsert("hub", {"org": "t", "id": base + i}, {"n": i}, 1)])

    threads = [threading.Thread(target=writer, args=(b,)) for b in (0, 100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(engine.scan("hub"))) == 75
    engine.close()


def _open_and_write(path: Path, n: int, barrier: Any, results: Any) -> None:
    barrier.wait()
    try:
        with SqliteEngine(path) as engine:
            engine.ensure_table(hub_schema("hub"))
            engine.apply([Upsert("hub", {"org": "t", "id": n}, {"n": n}, 1)])
        results.put(None)
    except Exception as e:  # noqa: BLE001 - reported to the test
        results.put(repr(e))


def test_processes_opening_a_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Workers of one app start together on one file: switching a new file to WAL can answer
    SQLITE_BUSY without the busy timeout waiting (about one round in ten failed before)."""
    ctx = multiprocessing.get_context("fork")
    for round_ in range(25):
        path = tmp_path / f"r{round_}.db"
        barrier, results = ctx.Barrier(4), ctx.Queue()
        procs = [ctx.Process(target=_open_and_write, args=(path, n, barrier, results)) for n in range(4)]
        for p in procs:
            p.start()
        errors = [e for e in (results.get(timeout=60) for _ in procs) if e]
        for p in procs:
            p.join(30)
        assert errors == [], f"round {round_}: {errors}"
        with SqliteEngine(path) as engine:
            assert sorted(r.key["id"] for r in engine.scan("hub")) == [0, 1, 2, 3]


_KEY_COLUMNS = (Column("i", "bigint"), Column("f", "double"), Column("t", "text"), Column("b", "blob"))
_key_values = st.tuples(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
)


def _natural(v: tuple) -> tuple:
    """The order Cassandra gives the key: doubles as Java's Double.compare (-0.0 below 0.0)."""
    return (v[0], (v[1], math.copysign(1.0, v[1])), v[2].encode("utf-8"), v[3])


@settings(max_examples=500, deadline=None)
@given(a=_key_values, b=_key_values, bools=st.tuples(st.booleans(), st.booleans()))
def test_key_encoding_round_trips_and_preserves_order(a: tuple, b: tuple, bools: tuple) -> None:
    ea, eb = encode_key(_KEY_COLUMNS, a), encode_key(_KEY_COLUMNS, b)
    decoded = decode_key(_KEY_COLUMNS, ea)
    assert decoded == a and math.copysign(1.0, decoded[1]) == math.copysign(1.0, a[1])  # type: ignore[arg-type]
    assert (ea < eb) == (_natural(a) < _natural(b)) and (ea == eb) == (_natural(a) == _natural(b))
    for n in range(1, 5):  # a prefix bound [prefix, prefix_end) holds exactly the keys with that prefix
        prefix = encode_key(_KEY_COLUMNS, a[:n])
        end = prefix_end(prefix)
        inside = eb >= prefix and (end is None or eb < end)
        assert inside == (_natural(b)[:n] == _natural(a)[:n])
        mixed = encode_key(_KEY_COLUMNS, a[:n] + b[n:])
        assert mixed >= prefix and (end is None or mixed < end)
    flags = (Column("x", "boolean"), Column("y", "boolean"))
    assert decode_key(flags, encode_key(flags, bools)) == bools


@pytest.mark.parametrize("data", [b"abc", b"ab\x00", b"a\x00\xffb", b"a\x00\x01extra"])
def test_a_damaged_text_key_is_an_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_key((Column("t", "text"),), data)


_OLD_LAYOUT = (
    "CREATE TABLE converge_cells (tbl TEXT NOT NULL, pk BLOB NOT NULL, ck BLOB NOT NULL,"
    " col TEXT NOT NULL, val, wt INTEGER NOT NULL, exp INTEGER, ph INTEGER NOT NULL,"
    " PRIMARY KEY (tbl, pk, ck, col)) WITHOUT ROWID"
)


def test_a_file_of_the_cell_per_row_layout_is_converted(tmp_path: Path) -> None:
    """A file of the earlier layout (one SQLite row per cell, ``col = ''`` a row tombstone) is
    converted to packed rows on open: every value type, TTLs, tombstones and their shadowing hold,
    and the cell rules go on from the converted cells."""
    path = tmp_path / "old.db"
    schema = TableSchema(
        "t",
        partition_key=(Column("org", "text"),),
        clustering_key=(Column("id", "bigint"),),
        columns=(Column("n", "bigint"), Column("f", "double"), Column("b", "blob"), Column("ok", "boolean"),
                 Column("s", "text")),
    )  # fmt: skip
    with SqliteEngine(path) as engine:
        engine.ensure_table(schema)
        old = engine._conn
        old.execute("DROP TABLE converge_rows")
        old.execute(_OLD_LAYOUT)
        pk, ck7, ck8 = encode_key(schema.partition_key, ["acme"]), encode_key(schema.clustering_key, [7]), \
            encode_key(schema.clustering_key, [8])  # fmt: skip
        old.executemany(
            "INSERT INTO converge_cells (tbl, pk, ck, col, val, wt, exp, ph)"
            " VALUES ('t', ?, ?, ?, ?, ?, ?, 1)",
            [(pk, ck7, "n", 5, 10, None), (pk, ck7, "f", -0.0, 10, None),
             (pk, ck7, "b", b"\x00\xff", 10, None), (pk, ck7, "ok", 1, 10, None),
             (pk, ck7, "s", "t\u00e9", 10, 4_000_000_000),
             (pk, ck8, "", None, 20, None), (pk, ck8, "n", 1, 15, None), (pk, ck8, "s", "kept", 25, None)],
        )  # fmt: skip
    with SqliteEngine(path, clock=ManualClock()) as engine:
        names = {r[0] for r in engine._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "converge_cells" not in names and engine._conn.execute(
            "SELECT count(*) FROM converge_rows"
        ).fetchone() == (2,)
        row7, row8 = engine.read_partition("t", {"org": "acme"})
        assert row7.values() == {"n": 5, "f": -0.0, "b": b"\x00\xff", "ok": True, "s": "t\u00e9"}
        assert math.copysign(1.0, row7.values()["f"]) == -1.0 and row7.cells["s"].expires_at == 4_000_000_000
        assert row8.values() == {"s": "kept"}  # n (15) is shadowed by the row tombstone (20)
        engine.apply(
            [Upsert("t", {"org": "acme", "id": 7}, {"n": 4}, 10)]
        )  # same write time, smaller value: loses
        assert engine.read_row("t", {"org": "acme", "id": 7}).values()["n"] == 5  # type: ignore[union-attr]
        engine.apply([Upsert("t", {"org": "acme", "id": 7}, {"n": 6}, 10)])  # larger value wins the tie
        assert engine.read_row("t", {"org": "acme", "id": 7}).values()["n"] == 6  # type: ignore[union-attr]
        engine.apply([Upsert("t", {"org": "acme", "id": 8}, {"n": 2}, 19)])  # still under the tombstone
        assert engine.read_row("t", {"org": "acme", "id": 8}).values() == {"s": "kept"}  # type: ignore[union-attr]


_ORGS = st.sampled_from(["a", "b", "c", "d"])
_KINDS = st.sampled_from(["upsert"] * 4 + ["delete_row", "delete_cell", "delete_partition"])
_TIMELINE_OPS = st.lists(
    st.tuples(_KINDS, _ORGS, st.integers(0, 3), st.integers(1, 9), st.sampled_from([None, 5, 50])),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(
    ops=_TIMELINE_OPS,
    order=st.sampled_from(["ASC", "DESC"]),
    keys=st.lists(_ORGS | st.just("none"), max_size=8),
)
def test_read_partitions_equals_read_partition_of_each_key(ops: list, order: str, keys: list[str]) -> None:
    """Whatever the tombstones and expired cells, the one-statement multi-partition read gives
    what reading each partition alone gives."""
    clock = ManualClock()
    with SqliteEngine(":memory:", clock=clock) as engine:
        engine.ensure_table(timeline_schema("t", order))
        for kind, org, day, version, ttl in ops:
            key = {"org": org, "day": day, "seq": "s"}
            if kind == "upsert":  # a TTL of 5 s outlives two more operations (2 s each)
                engine.apply([Upsert("t", key, {"note": f"v{version}", "weight": 1.0}, version, ttl=ttl)])
            elif kind == "delete_row":
                engine.apply([Delete("t", key, version)])
            elif kind == "delete_cell":
                engine.apply([Delete("t", key, version, ("note",))])
            else:
                engine.apply([Delete("t", {"org": org}, version)])
            clock.advance(2)
        partition_keys = [{"org": k} for k in keys]
        assert engine.read_partitions("t", partition_keys) == [
            engine.read_partition("t", k) for k in partition_keys
        ]
