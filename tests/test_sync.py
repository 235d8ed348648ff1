"""run_sync: blocking calls into async APIs, with and without a running loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from framework.core.mutations import Upsert
from framework.core.schema import Column, TableSchema
from framework.core.sync import run_sync
from stores.sqlite.store import SqliteStore


async def _whoami(fail: bool = False) -> int:
    await asyncio.sleep(0)
    if fail:
        raise KeyError("boom")
    return threading.get_ident()


def test_without_a_loop_it_runs_here() -> None:
    assert run_sync(_whoami()) == threading.get_ident()
    with pytest.raises(KeyError):
        run_sync(_whoami(fail=True))


async def test_inside_a_running_loop_it_uses_a_helper_thread() -> None:
    assert run_sync(_whoami()) != threading.get_ident()
    with pytest.raises(KeyError):
        run_sync(_whoami(fail=True))


def test_refuses_non_coroutines() -> None:
    with pytest.raises(TypeError):
        run_sync(42)  # type: ignore[arg-type]


def test_drives_a_store_from_blocking_code() -> None:
    schema = TableSchema("t", (Column("id", "text"),), (Column("n", "bigint"),))
    store = SqliteStore(":memory:")
    run_sync(store.ensure_table(schema))
    run_sync(store.apply([Upsert("t", {"id": "a"}, {"n": 5}, 1)]))
    row = run_sync(store.read_row("t", {"id": "a"}))
    assert row is not None and row.values() == {"n": 5}
    run_sync(store.close())
