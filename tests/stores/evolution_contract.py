"""Schema evolution, part of the store contract: ``ensure_table`` adds regular columns, never more.

``WideColumnContract`` inherits these tests, so they run on every store the
contract runs on (SQLite, the Cassandra adapter over the CQL test server, a
real cluster when configured).
"""

from __future__ import annotations

import dataclasses

import pytest

from framework.core.mutations import Upsert
from framework.core.schema import Column, SchemaError, TableSchema
from tests.stores.harness import WideStoreHarness, hub_schema, timeline_schema, unique

K = {"org": "acme", "id": 7}


def _with_columns(schema: TableSchema, *columns: Column) -> TableSchema:
    return dataclasses.replace(schema, columns=columns)


class SchemaEvolutionContract:
    """Needs the ``wide_store`` fixture (a WideStoreHarness)."""

    async def test_ensure_table_adds_regular_columns(self, wide_store: WideStoreHarness) -> None:
        store = await wide_store.store()
        full = hub_schema(unique("evolve"))
        t = full.name
        title, n, small, score, flag, data = full.columns
        first = _with_columns(full, title, n)
        await store.ensure_table(first)
        await store.apply([Upsert(t, K, {"title": "before", "n": 1}, 10)])
        second = _with_columns(full, small, title, n, flag)  # a new column may come first, too
        await store.ensure_table(second)
        await store.ensure_table(second)  # idempotent
        assert store.schema(t) == second
        await store.apply([Upsert(t, K, {"small": 3, "flag": True}, 20)])
        row = await store.read_row(t, K)
        assert row is not None and row.values() == {"title": "before", "n": 1, "small": 3, "flag": True}
        assert row.writetime("title") == 10 and row.writetime("small") == 20
        with pytest.raises(SchemaError, match=r"lacks columns \['small', 'flag'\].*never dropped"):
            await store.ensure_table(first)
        assert store.schema(t) == second
        if not wide_store.reopenable:
            return
        again = await wide_store.store()  # a restarted process, before it declares anything
        assert again.schema(t) == second
        with pytest.raises(SchemaError, match="never dropped"):
            await again.ensure_table(first)
        third = await wide_store.store()  # a newer writer evolves a table an earlier process made
        newest = _with_columns(full, small, title, n, flag, score, data)
        await third.ensure_table(newest)
        await third.apply([Upsert(t, K, {"score": 0.5, "data": b"\x01"}, 30)])
        assert (await third.read_row(t, K)).values() == {  # type: ignore[union-attr]
            "title": "before", "n": 1, "small": 3, "flag": True, "score": 0.5, "data": b"\x01",
        }  # fmt: skip
        assert (await wide_store.store()).schema(t) == newest

    async def test_ensure_table_never_drops_retypes_or_rekeys(self, wide_store: WideStoreHarness) -> None:
        store = await wide_store.store()
        hub, tl = hub_schema(unique("fixed")), timeline_schema(unique("fixed"), "ASC")
        for schema in (hub, tl):
            await store.ensure_table(schema)
        await store.apply([Upsert(hub.name, K, {"title": "kept"}, 1)])
        text_n = tuple(Column("n", "text") if c.name == "n" else c for c in hub.columns)
        refused = [
            (hub, _with_columns(hub, *hub.columns[1:]), r"lacks columns \['title'\]"),
            (hub, _with_columns(hub, *text_n), "column n is bigint, declared text"),
            (
                hub,
                dataclasses.replace(
                    hub, partition_key=hub.partition_key[:1], columns=(Column("id", "bigint"), *hub.columns)
                ),
                "partition key is",
            ),  # fmt: skip
            (hub, dataclasses.replace(hub, clustering_key=(Column("day", "bigint"),)), "clustering key is"),
            (tl, dataclasses.replace(tl, clustering_order="DESC"), "clustering order is ASC, declared DESC"),
        ]
        stores = [store]
        if wide_store.reopenable:
            stores.append(await wide_store.store())  # a store that did not declare the tables itself
        for s in stores:
            for schema, declared, match in refused:
                with pytest.raises(SchemaError, match=match):
                    await s.ensure_table(declared)
                assert s.schema(schema.name) == schema
            row = await s.read_row(hub.name, K)
            assert row is not None and row.values() == {"title": "kept"}
