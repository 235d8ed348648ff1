"""The SQLite engine's row cache: a write merges with the rows this engine wrote before, never
with a copy that another connection or a failed write has made stale."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.mutations import Upsert
from stores.sqlite.engine import SqliteEngine
from tests.stores.harness import hub_schema

K = {"org": "acme", "id": 7}


def _values(engine: SqliteEngine) -> dict[str, object]:
    row = engine.read_row("hub", K)
    assert row is not None
    return row.values()


def test_a_write_by_another_connection_is_seen(tmp_path: Path) -> None:
    """Engine a caches the row it wrote; b (another connection, as another worker or a repair job
    on the same file) writes a newer cell; a's next write of another cell keeps b's."""
    path = tmp_path / "e.db"
    with SqliteEngine(path) as a, SqliteEngine(path) as b:
        a.ensure_table(hub_schema("hub"))
        b.ensure_table(hub_schema("hub"))
        a.apply([Upsert("hub", K, {"title": "a", "n": 1}, 10)])
        b.apply([Upsert("hub", K, {"n": 2}, 20)])
        a.apply([Upsert("hub", K, {"title": "a2"}, 30)])
        assert _values(a) == _values(b) == {"title": "a2", "n": 2}
        assert a._cache  # the cache was in use: the last write refilled it


def test_a_failed_write_empties_the_cache(tmp_path: Path) -> None:
    """A write whose commit fails leaves nothing cached from it: the next write reads the row back."""
    engine = SqliteEngine(tmp_path / "e.db")
    engine.ensure_table(hub_schema("hub"))
    engine.apply([Upsert("hub", K, {"title": "a", "n": 1}, 10)])
    real = engine._conn

    class CommitFails:
        def __getattr__(self, name: str) -> object:
            return getattr(real, name)

        def execute(self, sql: str, *args: object) -> object:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("disk I/O error (injected)")
            return real.execute(sql, *args)

    engine._conn = CommitFails()  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError):
        engine.apply([Upsert("hub", K, {"n": 5}, 50)])
    engine._conn = real
    assert not engine._cache
    engine.apply([Upsert("hub", K, {"title": "b"}, 60)])
    assert _values(engine) == {"title": "b", "n": 1}
    engine.close()


_WRITE = st.tuples(
    st.sampled_from(["a", "b"]),  # which connection
    st.integers(0, 3),  # which row
    st.sampled_from(["title", "n"]),
    st.integers(0, 5),  # the version: ties included
)


@settings(max_examples=60, deadline=None)
@given(writes=st.lists(_WRITE, min_size=1, max_size=25), bound=st.sampled_from([0, 1, 2, 64]))
def test_two_connections_converge_to_the_model(
    tmp_path_factory: pytest.TempPathFactory, writes: list[tuple[str, int, str, int]], bound: int
) -> None:
    """Writes through two engines on one file, each with a small or no cache, give per cell the
    value of the highest version (the greatest value on a tie), as a model of the writes says."""
    path = tmp_path_factory.mktemp("cache") / "e.db"
    model: dict[tuple[int, str], tuple[int, str]] = {}
    with SqliteEngine(path, row_cache=bound) as a, SqliteEngine(path, row_cache=bound) as b:
        for engine in (a, b):
            engine.ensure_table(hub_schema("hub"))
        for i, (who, row, column, version) in enumerate(writes):
            value = f"v{i:03d}"
            key = {"org": "acme", "id": row}
            cells: dict[str, object] = {"title": value} if column == "title" else {"n": i}
            (a if who == "a" else b).apply([Upsert("hub", key, cells, version)])
            cell = (version, value if column == "title" else f"{i:020d}")
            seen = model.get((row, column))
            if seen is None or cell > seen:  # higher version, then the greater value (same width)
                model[(row, column)] = cell
        for row in range(4):
            stored = a.read_row("hub", {"org": "acme", "id": row})
            expected = {c: (v if c == "title" else int(v)) for (r, c), (_, v) in model.items() if r == row}
            assert (stored.values() if stored is not None else {}) == expected
