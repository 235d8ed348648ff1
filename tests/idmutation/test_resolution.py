"""The stream's id resolution through the test driver: late events of a mutated owner id end up
under its final id, a deleted owner's writes are dropped (counted, never parked), versions outside
every interval keep their id, and an app without ``id_mutation`` pays nothing."""

from __future__ import annotations

import pytest

from framework import App
from framework.core.mutations import Delete, LogState, Upsert
from framework.idmutation import IdRequest, collapse, map_topic_of
from framework.idmutation.resolution import IdMap, IdResolution, check_intervals, mapped_event
from framework.runtime.processor import AgentProcessor
from framework.testing import Driver
from tests.idmutation.stream_app import (
    OWNER_ACTIVITY,
    OwnerAgent,
    activity,
    app,
    linked,
    note,
    removed,
    status,
)

MAP = map_topic_of(app.name)


def req(n: int, old: str, new: str | None, at: int, tenant: str = "t1") -> IdRequest:
    op = "delete" if new is None else "convert"
    return IdRequest(executed_at=at, request_id=f"r{n}", tenant=tenant, op=op, old_id=old, new_id=new)


def send_map(d: Driver, requests: list[IdRequest], version: int) -> None:
    for (tenant, ident), intervals in collapse(requests).items():
        d.send(mapped_event(tenant, ident, intervals, version), topic=MAP)


def owners(d: Driver, table: str = "owner_activity") -> dict[tuple[str, str], dict]:
    return {(r.key["owner_id"], r.key.get("activity_id", r.key.get("event_id"))): r.values()
            for r in d.rows(table)}  # fmt: skip


def test_a_late_event_of_a_converted_id_lands_under_the_final_id() -> None:
    with Driver(app) as d:
        d.send(activity("e1", "t1", "lead1", "a1", 100, body="before"))
        send_map(d, [req(1, "lead1", "contact1", 150), req(2, "contact1", "contact9", 160)], version=1)
        assert d.send(activity("e2", "t1", "lead1", "a2", 200, body="late")) == []
        d.send(status("e3", "t1", "lead1", "won", 210))
        d.send(removed("e4", "t1", "contact1", "a9", 220))
        got = owners(d)
        # the row written before the map came is the job's to move; the late one is already moved
        assert got == {("lead1", "a1"): {"body": "before"}, ("contact9", "a2"): {"body": "late"}}
        assert [r.key["owner_id"] for r in d.rows("owner_log")] == ["contact9"]
        counters = d._agents["owner_activity"].resolve.counters()  # noqa: SLF001
        assert counters == {"id_resolved": 3, "id_deleted": 0}


def test_a_deleted_owner_drops_the_write_without_parking() -> None:
    with Driver(app) as d:
        send_map(d, [req(1, "lead1", "lead2", 10), req(2, "lead2", None, 20)], version=3)
        assert (
            d.send([activity("e1", "t1", "lead1", "a1", 100, body="x"), status("e2", "t1", "lead2", "s", 5)])
            == []
        )
        assert d.rows("owner_activity") == [] and d.rows("owner_log") == []
        assert d._agents["owner_activity"].resolve.deleted == 2  # noqa: SLF001


def test_versions_follow_the_intervals_and_other_tenants_are_apart() -> None:
    with Driver(app) as d:
        # 1 -> 2 at t=10, then 3 -> 1 at t=30 re-uses 1: what 1 holds after 30 stays under 1
        send_map(d, [req(1, "1", "2", 10), req(2, "3", "1", 30)], version=1)
        d.send([activity("e1", "t1", "1", "a", 5, body="old"), activity("e2", "t1", "1", "b", 31, body="new"),
                activity("e3", "t2", "1", "c", 5, body="other tenant")])  # fmt: skip
        assert owners(d) == {
            ("2", "a"): {"body": "old"},
            ("1", "b"): {"body": "new"},
            ("1", "c"): {"body": "other tenant"},
        }


def test_the_higher_map_version_wins_whatever_the_arrival_order() -> None:
    with Driver(app) as d:
        d.send(mapped_event("t1", "x", [(None, None, "y2")], 2), topic=MAP)
        d.send(mapped_event("t1", "x", [(None, None, "y1")], 1), topic=MAP)  # an older batch, late
        d.send(activity("e1", "t1", "x", "a", 5, body="b"))
        assert owners(d) == {("y2", "a"): {"body": "b"}}


def test_a_bad_map_entry_is_skipped_and_parks_nothing() -> None:
    with Driver(app) as d:
        bad = mapped_event("t1", "x", [(None, None, "y")], 1)
        bad = type(bad)(
            bad.event_id, bad.ordering_key, 1, 1, bad.type, {"tenant": "t1", "id": "x", "intervals": "?"}
        )
        assert d.send(bad, topic=MAP) == []
        assert d.id_map is not None and d.id_map.size() == 0
        d.send(activity("e1", "t1", "x", "a", 5, body="b"))
        assert owners(d) == {("x", "a"): {"body": "b"}}


def test_check_intervals_names_the_problem() -> None:
    assert check_intervals([[None, 5, "a"], [5, None, None]]) == [(None, 5, "a"), (5, None, None)]
    for bad in ([], [[1, 2]], [["1", None, "a"]], [[None, None, ""]], [[True, None, "a"]]):
        with pytest.raises(ValueError):
            check_intervals(bad)


def test_every_mutation_kind_keeps_its_other_fields() -> None:
    m = IdMap("a")
    m.feed(mapped_event("t", "x", [(None, None, "y")], 1))
    r = IdResolution(app.id_mutation.columns, m)  # type: ignore[union-attr]
    key = {"tenant": "t", "owner_id": "x"}
    up = Upsert("owner_activity", {**key, "activity_id": "a"}, {"body": "b"}, 7, ttl=60)
    de = Delete("owner_activity", {**key, "activity_id": "a"}, 8, columns=("body",))
    ls = LogState("owner_log", key, "s", 3, "e", 9, {"by": "me"})
    other = Upsert("elsewhere", {"owner_id": "x"}, {"v": 1}, 1)
    written = r(None, [up, de, ls, other])  # type: ignore[arg-type]
    out = [o for o in written if o.table != "converge_id_routes"]
    records = {(o.key["col"], o.key["placed"]) for o in written if o.table == "converge_id_routes"}
    assert records == {(c, p) for c in ("body", "state", "by") for p in ("", "y")}  # origin x, placed y
    assert [dict(o.key).get("owner_id") for o in out] == ["y", "y", "y", "x"]
    assert (
        out[0].ttl == 60 and out[1].columns == ("body",) and out[2].attrs == {"by": "me"} and out[3] is other
    )


def test_no_declaration_no_resolution_and_an_empty_map_returns_the_same_list() -> None:
    plain = App("plain", agents=[OwnerAgent()])
    with Driver(plain) as d:
        processor = d._agents["owner_activity"]  # noqa: SLF001
        assert isinstance(processor, AgentProcessor) and processor.resolve is None and d.id_map is None
    r = IdResolution(app.id_mutation.columns, IdMap("a"))  # type: ignore[union-attr]
    ms = [Upsert(OWNER_ACTIVITY.name, {"tenant": "t", "owner_id": "x", "activity_id": "a"}, {"body": "b"}, 1)]
    assert r(None, ms) is ms  # type: ignore[arg-type]


def test_a_join_agent_resolves_at_its_write_version_and_a_remap_moves_the_resolved_row() -> None:
    with Driver(app) as d:
        send_map(d, [req(1, "lead1", "contact1", 10), req(2, "lead2", "contact2", 10)], version=1)
        d.send(linked("l1", "t1", "lead1", "th", 50))
        d.send(note("n1", "th", "note1", "hello", 40))  # a first mapping: at the note's version
        assert {k: v for k, v in owners(d).items()} == {("contact1", "note1"): {"body": "hello"}}
        assert d.rows("owner_activity")[0].writetime("body") == 40
        d.send(linked("l2", "t1", "lead2", "th", 60))  # the thread moves: the note is mapped again
        assert owners(d) == {("contact2", "note1"): {"body": "hello"}}
        assert d._agents["notes"].book.resolve.resolved == 2  # noqa: SLF001
        assert d.rows("owner_activity")[0].writetime("body") == 41  # one above the mapping it replaces


def test_a_map_reopened_from_its_kv_is_not_empty() -> None:
    from framework.state.kv import MemoryKV

    kv = MemoryKV()
    first = IdMap("a", kv)
    assert first.empty
    first.feed(mapped_event("t", "x", [(None, None, "y")], 1))
    first.tables.set_offset(map_topic_of("a"), 0, 1)  # as the worker's feed stores it
    again = IdMap("a", kv)
    assert not again.empty and again.intervals("t", "x") == [(None, None, "y")]
