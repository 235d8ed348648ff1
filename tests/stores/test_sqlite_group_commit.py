"""Group commit: concurrent applies share transactions, a bad batch fails alone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from framework.core.mutations import Upsert
from framework.core.schema import Column, SchemaError, TableSchema
from stores.sqlite.store import SqliteStore

T = TableSchema("g", partition_key=(Column("k", "text"),), columns=(Column("n", "bigint"),))


async def test_concurrent_applies_all_land_and_a_bad_one_fails_alone(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "g.db")
    await store.ensure_table(T)
    good = [store.apply([Upsert("g", {"k": f"k{i}"}, {"n": i}, 10 + i)]) for i in range(200)]
    bad = store.apply([Upsert("g", {"k": "bad"}, {"n": "not a number"}, 1)])
    results = await asyncio.gather(*good, bad, return_exceptions=True)
    assert all(r is None for r in results[:-1])
    assert isinstance(results[-1], SchemaError)
    await store.close()
    reopened = SqliteStore(tmp_path / "g.db")
    await reopened.ensure_table(T)
    rows = [r async for r in reopened.scan("g")]
    assert sorted(int(r.values()["n"]) for r in rows) == list(range(200))  # type: ignore[arg-type]
    assert all(r.cells["n"].writetime == 10 + int(r.values()["n"]) for r in rows)  # type: ignore[arg-type]
    await reopened.close()


async def test_apply_after_close_is_an_error(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "c.db")
    await store.ensure_table(T)
    await store.close()
    with pytest.raises(Exception, match="closed"):
        await store.apply([Upsert("g", {"k": "a"}, {"n": 1}, 1)])
