"""Deriving the current state of an entity from its state log."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core.cells import Cell
from framework.core.mutations import Delete, LogState
from framework.core.rows import Row
from framework.core.schema import Column, state_log_schema
from framework.core.state_log import StateEntry, current_state
from stores.sqlite.store import SqliteStore

PRECEDENCE = ("sent", "opened", "clicked", "replied")


def row(at: int, event_id: str, state: str | None, version: int = 1, **attrs: object) -> Row:
    cells = {} if state is None else {"state": Cell(state, version)}
    cells.update({k: Cell(v, version) for k, v in attrs.items()})  # type: ignore[arg-type]
    return Row({"entity": "m1", "at": at, "event_id": event_id}, cells)


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([row(1, "a", "sent"), row(2, "b", "sent")], (2, "b", "sent")),  # latest at wins
        ([row(5, "b", "replied"), row(6, "a", "sent")], (6, "a", "sent")),  # even over higher precedence
        ([row(5, "z", "opened"), row(5, "a", "clicked")], (5, "a", "clicked")),  # tie: precedence
        ([row(5, "a", "opened"), row(5, "b", "opened")], (5, "b", "opened")),  # tie: event_id
        ([row(5, "z", "bounced"), row(5, "a", "sent")], (5, "a", "sent")),  # unknown ranks lowest
        ([row(9, "z", None, actor="x"), row(1, "a", "sent")], (1, "a", "sent")),  # no state cell: skipped
    ],
)
def test_current_state_rules(rows: list[Row], expected: tuple) -> None:
    for ordering in (rows, rows[::-1]):
        got = current_state(ordering, PRECEDENCE)
        assert got is not None and (got.at, got.event_id, got.state) == expected


def test_entry_carries_attrs_and_version() -> None:
    got = current_state([row(3, "e", "opened", 17, actor="bob")], PRECEDENCE)
    assert got == StateEntry("opened", 3, "e", 17, {"actor": "bob"})
    assert current_state([], PRECEDENCE) is None


def test_misuse_raises() -> None:
    with pytest.raises(TypeError):
        current_state([], "sent")
    with pytest.raises(ValueError):
        current_state([Row({"entity": "m1"}, {"state": Cell("sent", 1)})], PRECEDENCE)


_rows = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from("abc"), st.sampled_from((*PRECEDENCE, "bounced"))),
    max_size=10,
    unique_by=lambda r: r[:2],
)


@settings(max_examples=500, deadline=None)
@given(entries=_rows, order=st.randoms(use_true_random=False))
def test_result_is_independent_of_arrival_order(entries: list[tuple], order) -> None:  # noqa: ANN001
    rows = [row(at, ev, state) for at, ev, state in entries]
    shuffled = list(rows)
    order.shuffle(shuffled)
    got, again = current_state(rows, PRECEDENCE), current_state(shuffled, PRECEDENCE)
    assert got == again
    if entries:  # plainly: the greatest (at, precedence, event_id)
        at, ev, state = max(
            entries, key=lambda e: (e[0], PRECEDENCE.index(e[2]) if e[2] in PRECEDENCE else -1, e[1])
        )
        assert got is not None and (got.at, got.event_id, got.state) == (at, ev, state)
    else:
        assert got is None


async def test_read_current_state_from_a_store() -> None:
    schema = state_log_schema("mail_log", (Column("entity", "text"),), order="DESC")
    async with SqliteStore(":memory:") as store:
        await store.ensure_table(schema)
        e = {"entity": "m1"}
        await store.apply(
            [LogState("mail_log", e, "clicked", 20, "ev3", 3), LogState("mail_log", e, "sent", 10, "ev1", 1)]
        )
        await store.apply([LogState("mail_log", e, "opened", 20, "ev2", 2)])
        got = current_state(await store.read_partition("mail_log", e), PRECEDENCE)
        assert got is not None and (got.state, got.event_id) == ("clicked", "ev3")
        await store.apply([Delete("mail_log", {**e, "at": 20, "event_id": "ev3"}, 5)])  # erased
        got = current_state(await store.read_partition("mail_log", e), PRECEDENCE)
        assert got is not None and (got.state, got.event_id) == ("opened", "ev2")
        assert current_state(await store.read_partition("mail_log", {"entity": "none"}), PRECEDENCE) is None
