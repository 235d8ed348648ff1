"""Convergence properties any ``WideColumnStore`` must satisfy.

A random history of upserts, null-cell writes, row, column and partition
deletes and state-log appends over a few keys is applied with duplicates, replays, in a
random order and random batch splits; the store must then hold exactly what
``tests.stores.oracle`` derives from the history sorted by version.

Reuse: call ``check_history`` / ``check_current_state`` with a store factory
``make_store(clock) -> WideColumnStore`` (a fresh store per example) from a
``@given(case=cases(...))`` test. Stores without a controllable clock pass
``ttl=False`` to ``cases`` (no TTL writes, reads at the write clock).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hypothesis import strategies as st

from framework.core.mutations import Delete, LogState, Mutation, Upsert
from framework.core.schema import Column, TableSchema, state_log_schema
from framework.core.state_log import current_state
from stores.base import WideColumnStore
from tests.stores import oracle
from tests.stores.harness import ManualClock

HUB, LOG = "conv_hub", "conv_log"
PRECEDENCE = ("sent", "opened", "clicked", "replied")
WRITE_CLOCK = 1_700_000_000.5
VALUES: dict[str, list[object]] = {
    "a": [-2, -1, 0, 1, 2**62],
    "b": ["", "a", "ab", "b"],
    "c": [-1.5, -0.0, 0.0, 2.0, 2.5, 3],  # 3 is an int written to a double column; -0.0 is not 0.0
    "d": [False, True],
    "e": [b"", b"\x00", b"\x01\x02"],
}
HUB_KEYS = [{"org": "o", "id": 1}, {"org": "p", "id": 1}]
ENTITIES = ["m1", "m2"]
StoreFactory = Callable[[ManualClock], Awaitable[WideColumnStore]]


def hub_schema(name: str = HUB) -> TableSchema:
    types = {"a": "bigint", "b": "text", "c": "double", "d": "boolean", "e": "blob"}
    return TableSchema(
        name=name,
        partition_key=(Column("org", "text"), Column("id", "bigint")),
        columns=tuple(Column(c, t) for c, t in types.items()),  # type: ignore[arg-type]
    )


def log_schema(name: str = LOG) -> TableSchema:
    return state_log_schema(name, (Column("entity", "text"),), attrs=(Column("actor", "text"),))


versions = st.integers(0, 4)  # few versions: many ties


@st.composite
def hub_mutations(draw: st.DrawFn, ttl: bool, keys: int = len(HUB_KEYS)) -> Mutation:
    key = draw(st.sampled_from(HUB_KEYS[:keys]))
    kind = draw(st.sampled_from(["upsert", "upsert", "upsert", "delete_row", "delete_columns"]))
    version = draw(versions)
    if kind == "delete_row":
        return Delete(HUB, key, version)
    columns = draw(st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3, unique=True))
    if kind == "delete_columns":
        return Delete(HUB, key, version, tuple(columns))
    cells = {c: draw(st.none() | st.sampled_from(VALUES[c])) for c in columns}
    return Upsert(HUB, key, cells, version, ttl=draw(st.none() | st.integers(1, 10)) if ttl else None)


@st.composite
def log_mutations(draw: st.DrawFn) -> Mutation:
    entity = draw(st.sampled_from(ENTITIES))
    at, event_id = draw(st.integers(0, 3)), draw(st.sampled_from(["e1", "e2", "e3"]))
    erase = draw(st.integers(0, 14))
    if erase == 0:  # an erased log row
        return Delete(LOG, {"entity": entity, "at": at, "event_id": event_id}, draw(versions))
    if erase == 1:  # an erased log: a partition tombstone
        return Delete(LOG, {"entity": entity}, draw(versions))
    state = draw(st.sampled_from((*PRECEDENCE, "bounced")))
    attrs = draw(st.sampled_from([{}, {"actor": "ann"}, {"actor": "bob"}, {"actor": None}]))
    return LogState(LOG, {"entity": entity}, state, at, event_id, draw(versions), attrs)


@dataclass(frozen=True)
class Case:
    """A history and the way it reaches the store: with replays, shuffled, in batches."""

    history: tuple[Mutation, ...]
    batches: tuple[tuple[Mutation, ...], ...]
    read_after: float
    seed: int = 0


@st.composite
def cases(
    draw: st.DrawFn, *, ttl: bool = True, hub: bool = True, log: bool = True, hub_keys: int = len(HUB_KEYS)
) -> Case:
    """Histories over the hub and/or log tables; ``hub_keys=1`` concentrates every write on one row."""
    kinds = ([hub_mutations(ttl, hub_keys)] if hub else []) + ([log_mutations()] if log else [])
    history = draw(st.lists(st.one_of(kinds), min_size=1, max_size=24))
    replays = draw(st.lists(st.sampled_from(history), max_size=8))
    delivered = draw(st.permutations(list(history) + replays))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(delivered) - 1)), max_size=6)))
    bounds = [0, *cuts, len(delivered)]
    batches = tuple(tuple(delivered[a:b]) for a, b in zip(bounds, bounds[1:], strict=False) if a < b)
    read_after = draw(st.sampled_from([0.0, 3.0, 7.0, 20.0])) if ttl else 0.0
    return Case(tuple(history), batches, read_after, draw(st.integers(0, 2**32)))


def _rename(m: Mutation, names: dict[str, str]) -> Mutation:
    return dataclasses.replace(m, table=names[m.table])


async def _applied(
    make_store: StoreFactory, case: Case, names: dict[str, str]
) -> tuple[WideColumnStore, float]:
    clock = ManualClock(WRITE_CLOCK)
    store = await make_store(clock)
    await store.ensure_table(hub_schema(names[HUB]))
    await store.ensure_table(log_schema(names[LOG]))
    for batch in case.batches:
        await store.apply([_rename(m, names) for m in batch])
    clock.advance(case.read_after)
    return store, clock()


def _exact(value: object) -> object:
    """``value`` compared with its type and, for a float, its sign (-0.0 == 0.0 in Python)."""
    return (type(value), value, math.copysign(1.0, value) if isinstance(value, float) else None)


def _cells(row: object) -> dict[str, tuple[object, int, int | None]]:
    if row is None:
        return {}
    return {c: (_exact(cell.value), cell.writetime, cell.expires_at) for c, cell in row.cells.items()}  # type: ignore[attr-defined]


def _oracle(double_columns: list[str]) -> oracle.Oracle:
    return oracle.Oracle(double_columns, partition_keys={LOG: ["entity"]})


def _expected(history: tuple[Mutation, ...], double_columns: list[str], read_clock: float) -> dict:
    rows = _oracle(double_columns).rows(history, WRITE_CLOCK, read_clock)
    return {k: {c: (_exact(v), wt, exp) for c, (v, wt, exp) in cols.items()} for k, cols in rows.items()}


async def check_history(make_store: StoreFactory, case: Case, names: dict[str, str] | None = None) -> None:
    """Assert the store's rows, partitions and scan equal the oracle's after ``case``."""
    names = names or {HUB: HUB, LOG: LOG}
    store, read_clock = await _applied(make_store, case, names)
    try:
        expected = _expected(case.history, ["c"], read_clock)
        for key in HUB_KEYS:
            row = await store.read_row(names[HUB], key)
            want = expected.get((HUB, tuple(sorted(key.items()))), {})
            assert _cells(row) == want, f"row {key}"
        scanned = {tuple(sorted(r.key.items())): _cells(r) async for r in store.scan(names[HUB])}
        assert scanned == {k: v for (t, k), v in expected.items() if t == HUB}
        for entity in ENTITIES:
            rows = await store.read_partition(names[LOG], {"entity": entity})
            got = [((r.key["at"], r.key["event_id"]), _cells(r)) for r in rows]
            want_log = sorted(
                ((dict(k)["at"], dict(k)["event_id"]), v)
                for (t, k), v in expected.items()
                if t == LOG and dict(k)["entity"] == entity
            )
            assert got == want_log, f"log of {entity}"
    finally:
        await store.close()


async def check_current_state(
    make_store: StoreFactory, case: Case, names: dict[str, str] | None = None
) -> None:
    """Assert ``current_state`` over the stored (and re-shuffled) log equals the oracle's choice."""
    names = names or {HUB: HUB, LOG: LOG}
    store, read_clock = await _applied(make_store, case, names)
    try:
        expected = _oracle([]).rows(case.history, WRITE_CLOCK, read_clock)
        for entity in ENTITIES:
            rows = await store.read_partition(names[LOG], {"entity": entity})
            random.Random(case.seed).shuffle(rows)
            got = current_state(rows, PRECEDENCE)
            want = oracle.current_state(expected, LOG, {"entity": entity}, PRECEDENCE)
            if want is None:
                assert got is None
            else:
                assert got is not None
                assert (got.state, got.at, got.event_id, dict(got.attrs)) == want
    finally:
        await store.close()
