"""Applying a collapsed map: cells move to their final id at their own version and stay put; late
writes under an old id converge after the next apply; the result equals every write placed
directly under its final id (the independent oracle), on the embedded SQLite store."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.mutations import Delete, Upsert
from framework.core.schema import Column, TableSchema
from framework.idmutation import IdMutation, IdRequest, OwnerColumn, collapse
from framework.idmutation.apply import apply_id_map, sweep
from framework.idmutation.collapse import TenantGraph, resolve
from stores.sqlite import SqliteStore

TABLE = TableSchema(
    name="activity",
    partition_key=(Column("tenant", "text"), Column("owner", "text")),
    clustering_key=(Column("item", "text"),),
    columns=(Column("c1", "text"), Column("c2", "text")),
)
CONFIG = IdMutation("id_requests", columns=(OwnerColumn("activity", "owner", "tenant"),))
IDS = "abcde"
TENANTS = ("t1", "t2")
ITEMS = ("i1", "i2")
COLS = ("c1", "c2")

Slot = tuple[str, str, str, str]  # tenant, owner, item, column


def req(n: int, old: str, new: str | None, at: int, tenant: str = "t1") -> IdRequest:
    op = "delete" if new is None else "convert"
    return IdRequest(executed_at=at, request_id=f"r{n}", tenant=tenant, op=op, old_id=old, new_id=new)


def write(tenant: str, owner: str, item: str, col: str, version: int) -> Upsert:
    # a replay of one event writes the same value: the value is a function of where and when
    return Upsert("activity", {"tenant": tenant, "owner": owner, "item": item},
                  {col: f"{owner}:{item}:{col}:{version}"}, version)  # fmt: skip


async def stored(store: SqliteStore) -> dict[Slot, tuple[Any, int]]:
    out: dict[Slot, tuple[Any, int]] = {}
    async for row in store.scan("activity"):
        for col, cell in row.cells.items():
            out[(row.key["tenant"], row.key["owner"], row.key["item"], col)] = (cell.value, cell.writetime)
    return out


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def fresh() -> SqliteStore:
    store = await SqliteStore.open(":memory:")
    await store.ensure_table(TABLE)
    return store


def test_a_chain_moves_every_cell_to_the_last_id_and_a_second_apply_changes_nothing() -> None:
    async def go() -> None:
        store = await fresh()
        await store.apply([write("t1", "1", "i1", "c1", 5), write("t1", "2", "i1", "c2", 7),
                           write("t1", "3", "i2", "c1", 9), write("t1", "9", "i1", "c1", 3)])  # fmt: skip
        mapped = collapse([req(1, "1", "2", 10), req(2, "2", "3", 20), req(3, "3", "4", 30)])
        report = await apply_id_map(store, CONFIG, mapped)
        assert report.partitions_read == 3 and report.cells_moved == 3 and report.cells_deleted == 3
        assert {(t, k["owner"], k["item"]) for t, k in report.touched} >= {
            ("activity", "1", "i1"), ("activity", "4", "i1"), ("activity", "4", "i2")}  # fmt: skip
        want = {
            ("t1", "4", "i1", "c1"): ("1:i1:c1:5", 5),
            ("t1", "4", "i1", "c2"): ("2:i1:c2:7", 7),
            ("t1", "4", "i2", "c1"): ("3:i2:c1:9", 9),
            ("t1", "9", "i1", "c1"): ("9:i1:c1:3", 3),
        }
        assert await stored(store) == want
        again = await apply_id_map(store, CONFIG, mapped)
        assert again.cells_moved == 0 and await stored(store) == want
        await store.close()

    run(go())


def test_late_writes_lower_stay_shadowed_higher_move_on_the_next_sweep_and_deletes_drop() -> None:
    async def go() -> None:
        store = await fresh()
        await store.apply([write("t1", "A", "i1", "c1", 50), write("t1", "D", "i1", "c1", 5)])
        mapped = collapse([req(1, "A", "B", 10), req(2, "D", None, 10)])
        await apply_id_map(store, CONFIG, mapped)
        assert await stored(store) == {("t1", "B", "i1", "c1"): ("A:i1:c1:50", 50)}
        # a worker that had not seen the map writes under the old ids
        await store.apply([write("t1", "A", "i1", "c1", 40), write("t1", "A", "i1", "c1", 60),
                           write("t1", "D", "i1", "c2", 70)])  # fmt: skip

        async def lookup(pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Any]:
            return {p: mapped[p] for p in pairs if p in mapped}

        keys = [("activity", {"tenant": "t1", "owner": "A", "item": "i1"}),
                ("activity", {"tenant": "t1", "owner": "D", "item": "i1"}),
                ("other", {"tenant": "t1", "owner": "A"})]  # fmt: skip
        report = await sweep(store, CONFIG, lookup, keys)
        assert report.partitions_read == 2 and report.cells_moved == 1 and report.cells_deleted == 2
        assert await stored(store) == {("t1", "B", "i1", "c1"): ("A:i1:c1:60", 60)}
        await store.close()

    run(go())


def test_expiring_cells_keep_their_remaining_ttl_and_integer_ids_are_integers() -> None:
    table = TableSchema("owned", (Column("org", "text"), Column("pid", "bigint")), (Column("v", "text"),))
    config = IdMutation("id_requests", columns=(OwnerColumn("owned", "pid", "org"),))
    now = [1_000_000.0]

    async def go() -> None:
        store = await SqliteStore.open(":memory:", clock=lambda: now[0])
        await store.ensure_table(table)
        await store.apply([Upsert("owned", {"org": "o", "pid": 1}, {"v": "x"}, 5, ttl=100)])
        now[0] += 40
        await apply_id_map(store, config, collapse([req(1, "1", "2", 10, "o")]), clock=lambda: now[0])
        row = await store.read_row("owned", {"org": "o", "pid": 2})
        assert row is not None and row.cells["v"].expires_at == 1_000_100 and row.cells["v"].writetime == 5
        assert await store.read_row("owned", {"org": "o", "pid": 1}) is None
        await store.close()

    run(go())


def test_a_request_whose_ids_do_not_fit_an_integer_owner_column_is_refused() -> None:
    import pytest

    from framework.idmutation import IdRequestError
    from framework.idmutation.steps import check_ids

    table = TableSchema("owned", (Column("org", "text"), Column("pid", "bigint")), (Column("v", "text"),))
    ok = req(1, "1", "2", 10, "o")
    assert check_ids(ok, [(table, "pid")]) is ok
    with pytest.raises(IdRequestError, match="not an integer"):
        check_ids(req(2, "1", "lead-7", 10, "o"), [(table, "pid")])


def test_a_row_delete_under_the_old_id_is_not_carried_over_the_documented_limit() -> None:
    async def go() -> None:
        store = await fresh()
        await store.apply([write("t1", "A", "i1", "c1", 5), Delete("activity", {"tenant": "t1", "owner": "A",
                           "item": "i1"}, 8), write("t1", "B", "i1", "c2", 6)])  # fmt: skip
        await apply_id_map(store, CONFIG, collapse([req(1, "A", "B", 10)]))
        # the oracle would shadow B's c2 at 6 by the delete at 8 resolved to B: the store keeps it
        assert await stored(store) == {("t1", "B", "i1", "c2"): ("B:i1:c2:6", 6)}
        await store.close()

    run(go())


# -- the property ------------------------------------------------------------------------------

_IDS = st.sampled_from(IDS)


@st.composite
def request_sets(draw: st.DrawFn) -> list[IdRequest]:
    out = []
    for i in range(draw(st.integers(0, 8))):
        old = draw(_IDS)
        new = draw(st.one_of(st.none(), _IDS.filter(lambda x, old=old: x != old)))
        out.append(req(i, old, new, draw(st.integers(0, 30)), draw(st.sampled_from(TENANTS))))
    return out


_writes = st.lists(
    st.tuples(
        st.sampled_from(TENANTS), _IDS, st.sampled_from(ITEMS), st.sampled_from(COLS), st.integers(0, 32)
    ),
    min_size=1,
    max_size=30,
)


def single_destination(requests: Sequence[IdRequest], writes: Sequence[tuple[str, str, str, str, int]]
                       ) -> list[tuple[str, str, str, str, int]]:  # fmt: skip
    """The writes kept so that every physical cell only ever holds writes of one final id (the
    documented limit: one cell of an id holds one value, so a shadowed write of another final id
    would be lost whatever the job does)."""
    graphs = {t: TenantGraph.of(r for r in requests if r.tenant == t) for t in TENANTS}
    dest: dict[Slot, str | None] = {}
    kept = []
    for tenant, owner, item, col, version in writes:
        final = resolve(graphs[tenant], owner, version)
        slots = [(tenant, owner, item, col)]
        if final not in (None, owner):
            slots.append((tenant, final, item, col))
        if all(dest.get(s, final) == final for s in slots):
            for s in slots:
                dest[s] = final
            kept.append((tenant, owner, item, col, version))
    return kept


def oracle(requests: Sequence[IdRequest], writes: Sequence[tuple[str, str, str, str, int]]
           ) -> dict[Slot, tuple[Any, int]]:  # fmt: skip
    """Every write placed directly under ``resolve(id, version)``; per cell the highest version wins,
    then the larger value."""
    graphs = {t: TenantGraph.of(r for r in requests if r.tenant == t) for t in TENANTS}
    out: dict[Slot, tuple[Any, int]] = {}
    for tenant, owner, item, col, version in writes:
        final = resolve(graphs[tenant], owner, version)
        if final is None:
            continue
        value = f"{owner}:{item}:{col}:{version}"
        slot = (tenant, final, item, col)
        if slot not in out or (version, value) > (out[slot][1], out[slot][0]):
            out[slot] = (value, version)
    return out


@settings(max_examples=300, deadline=None)
@given(request_sets(), _writes, st.data())
def test_any_interleaving_of_writes_and_applies_equals_every_write_under_its_final_id(
    requests: list[IdRequest], raw: list[tuple[str, str, str, str, int]], data: st.DataObject
) -> None:
    writes = single_destination(requests, raw)
    order = data.draw(st.permutations(writes))
    replays = data.draw(st.lists(st.sampled_from(writes), max_size=4)) if writes else []
    sent = list(order) + replays
    applies = set(data.draw(st.lists(st.integers(0, len(sent)), max_size=3)))
    mapped = collapse(requests)

    async def go() -> dict[Slot, tuple[Any, int]]:
        store = await fresh()
        for i, w in enumerate(sent):
            if i in applies:
                await apply_id_map(store, CONFIG, mapped, chunk=2)
            await store.apply([write(*w)])
        await apply_id_map(store, CONFIG, mapped, chunk=3)
        out = await stored(store)
        await store.close()
        return out

    assert run(go()) == oracle(requests, writes)
