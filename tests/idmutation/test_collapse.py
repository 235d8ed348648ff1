"""Collapsing ID mutation requests: chains, merges, deletes, re-used ids and cycles; the intervals
agree with the rule at every version, whatever the order and duplicates of the requests."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.idmutation import IdRequest, IdRequestError, collapse, final_of, parse_request
from framework.idmutation.collapse import TenantGraph, resolve


def req(n: int, old: str, new: str | None, at: int, tenant: str = "t1") -> IdRequest:
    op = "delete" if new is None else "convert"
    return IdRequest(executed_at=at, request_id=f"r{n}", tenant=tenant, op=op, old_id=old, new_id=new)


def test_a_chain_collapses_to_its_last_id() -> None:
    out = collapse([req(3, "3", "4", 30), req(1, "1", "2", 10), req(2, "2", "3", 20)])
    assert out == {("t1", i): [(None, None, "4")] for i in ("1", "2", "3")}


def test_merges_meet_and_a_delete_ends_the_chain() -> None:
    out = collapse([req(1, "A", "C", 10), req(2, "B", "C", 11), req(3, "C", None, 20), req(4, "X", "Y", 5)])
    assert out[("t1", "A")] == out[("t1", "B")] == out[("t1", "C")] == [(None, None, None)]
    assert out[("t1", "X")] == [(None, None, "Y")]


def test_tenants_are_apart() -> None:
    out = collapse([req(1, "1", "2", 10, "a"), req(1, "2", "3", 20, "b")])
    assert out == {("a", "1"): [(None, None, "2")], ("b", "2"): [(None, None, "3")]}


def test_an_id_moved_twice_splits_its_versions_at_the_first_move() -> None:
    out = collapse([req(1, "1", "2", 10), req(2, "1", "5", 50)])
    assert out[("t1", "1")] == [(None, 10, "2"), (10, None, "5")]
    assert final_of(out[("t1", "1")], "1", 10) == "2"
    assert final_of(out[("t1", "1")], "1", 11) == "5"
    assert final_of(out[("t1", "1")], "1", 99) == "5"  # late: still follows the last move


def test_a_re_used_id_is_live_again_after_it_is_named_as_a_new_id() -> None:
    graph = TenantGraph.of([req(1, "1", "2", 10), req(2, "3", "1", 30)])
    assert resolve(graph, "1", 5) == "2"
    assert resolve(graph, "1", 20) == "2"  # late event of the old 1
    assert resolve(graph, "1", 31) == "1"  # the re-used 1
    assert resolve(graph, "3", 31) == "1"
    assert resolve(graph, "3", 5) == "2"  # the documented limit: an old version follows the old chain


def test_a_cycle_ends_at_the_new_id_of_its_latest_request() -> None:
    graph = TenantGraph.of([req(1, "1", "2", 10), req(2, "2", "1", 20)])
    assert {resolve(graph, i, v) for i in ("1", "2") for v in (1, 10, 15, 20, 25)} == {"1"}


def test_duplicates_count_once_and_a_conflicting_duplicate_is_decided_by_value() -> None:
    a, b = req(1, "1", "2", 10), req(1, "1", "9", 10)
    assert collapse([a, b, a]) == collapse([b, a]) == {("t1", "1"): [(None, None, "2")]}


def test_bad_requests_are_named() -> None:
    with pytest.raises(IdRequestError, match="needs a new_id"):
        IdRequest(executed_at=1, request_id="r", tenant="t", op="merge", old_id="a", new_id="a")
    with pytest.raises(IdRequestError, match="no new_id"):
        parse_request({"request_id": "r", "tenant": "t", "op": "delete", "old_id": "a", "new_id": "b",
                       "executed_at": 1})  # fmt: skip
    with pytest.raises(IdRequestError, match="op must be"):
        parse_request(b'{"request_id": "r", "tenant": "t", "op": "split", "old_id": "a", "executed_at": 1}')
    with pytest.raises(IdRequestError, match="not JSON"):
        parse_request(b"{")
    r = req(1, "1", "2", 10)
    assert parse_request(IdRequest.to_dict(r)) == r


_IDS = st.sampled_from("abcdef")


@st.composite
def request_sets(draw: st.DrawFn) -> list[IdRequest]:
    n = draw(st.integers(1, 12))
    out = []
    for i in range(n):
        old = draw(_IDS)
        new = draw(st.one_of(st.none(), _IDS.filter(lambda x, old=old: x != old)))
        out.append(req(i, old, new, draw(st.integers(0, 40)), draw(st.sampled_from(["t1", "t2"]))))
    return out


@settings(max_examples=300, deadline=None)
@given(request_sets(), st.randoms(use_true_random=False))
def test_intervals_agree_with_the_rule_in_any_order_and_finals_are_fixed_points(
    requests: list[IdRequest], rnd: random.Random
) -> None:
    out = collapse(requests)
    shuffled = requests + rnd.sample(requests, k=len(requests) // 2)
    rnd.shuffle(shuffled)
    assert collapse(shuffled) == out
    for tenant in ("t1", "t2"):
        graph = TenantGraph.of(r for r in requests if r.tenant == tenant)
        for ident in "abcdef":
            for v in range(0, 43):
                final = resolve(graph, ident, v)
                assert final_of(out.get((tenant, ident), []), ident, v) == final
                if final is not None:  # a moved cell is never moved again
                    assert resolve(graph, final, v) == final
