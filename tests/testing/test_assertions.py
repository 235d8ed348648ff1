"""assert_converges passes for a convergent app and fails, readably, for broken ones."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from framework.testing import (
    Timeline,
    assert_converges,
    check_convergence,
    differences,
    make_event,
    run_history,
)
from tests.testing.apps import call_counting_shop, clock_shop, counting_shop, shop


def _history() -> Timeline:
    t = Timeline(start=100, step=100)
    t.add("item.set", {"item": "a", "name": "Lamp", "price": 30}, key="a")
    t.add("item.status", {"item": "a", "state": "listed", "by": "ann"}, key="a", occurred_at=1)
    t.add("item.set", {"item": "b", "name": "Desk"}, key="b")
    t.add("item.set", {"item": "a", "price": 25}, key="a")
    t.add("item.deleted", {"item": "b"}, key="b")
    t.add("item.status", {"item": "a", "state": "sold", "by": "bob"}, key="a", occurred_at=1)
    t.add("item.set", {"item": "a", "name": "Lamp 2"}, key="a")
    t.add("item.flash", {"item": "c", "text": "sale"}, key="c")
    return t


HISTORY = _history()


def test_a_convergent_app_converges_under_drawn_deliveries() -> None:
    delivered = assert_converges(shop(), HISTORY, max_examples=60)
    assert set(delivered.tables["items"]) == {("a",), ("c",)}
    assert delivered.documents["catalog"]["a"][0]["status"] == "sold"


def test_bad_messages_park_the_same_in_any_delivery() -> None:
    """A duplicate of a bad message parks again; the parked set is what must converge."""
    history = [*HISTORY, b"{not json", make_event("item.painted", {"item": "a"}, key="a", version=5)]
    delivered = assert_converges(shop(), history, max_examples=30, allow_unrouted=True)
    assert {(stage, error) for _, stage, error, _ in delivered.parked} == {
        ("parse", "EventError"),
        ("route", "EventError"),
    }


def test_check_convergence_runs_a_property_over_histories() -> None:
    items = st.sampled_from(["a", "b"])
    event = st.builds(
        lambda item, kind, n: (item, kind, n),
        items,
        st.sampled_from(["set", "deleted", "status"]),
        st.integers(0, 9),
    )

    def timeline(specs: list[tuple[str, str, int]]) -> Timeline:
        t = Timeline()
        for item, kind, n in specs:
            if kind == "set":
                t.add("item.set", {"item": item, "price": n}, key=item)
            elif kind == "deleted":
                t.add("item.deleted", {"item": item}, key=item)
            else:
                t.add("item.status", {"item": item, "state": "listed"}, key=item, occurred_at=n)
        return t

    check_convergence(shop(), st.lists(event, max_size=6).map(timeline), max_examples=40)


def test_a_processing_clock_app_fails_with_a_readable_diff() -> None:
    with pytest.raises(AssertionError) as failure:
        assert_converges(clock_shop(), HISTORY, list(reversed(HISTORY)))
    text = str(failure.value)
    assert "clock-shop: the delivery does not converge to the in-order pass" in text
    assert "table items row ('a',) cell price: (25, " in text  # in order: the newest price wins
    assert "delivery of 8 messages" in text


def test_a_delivery_counting_app_passes_the_same_order_and_fails_a_duplicate() -> None:
    assert_converges(counting_shop(), HISTORY, list(HISTORY))  # the same order: the same counts
    with pytest.raises(AssertionError, match=r"table items row \('a',\) cell n: \(5, 700\) -> \(6, 700\)"):
        assert_converges(counting_shop(), HISTORY, [HISTORY[0], *HISTORY])


def test_hypothesis_finds_a_failing_delivery_of_a_broken_app() -> None:
    with pytest.raises(AssertionError, match="counting-shop: the delivery does not converge"):
        assert_converges(counting_shop(), HISTORY[:4], max_examples=50)


def test_an_impure_projection_is_caught_in_the_documents() -> None:
    with pytest.raises(AssertionError, match=r"projection catalog doc 'a' field builds"):
        assert_converges(call_counting_shop(), HISTORY, list(HISTORY))


def test_differences_lists_rows_cells_documents_and_parked() -> None:
    a = run_history(shop(), HISTORY[:3])
    b = run_history(shop(), [*HISTORY[:2], b"nope"])
    found = differences(a, b)
    assert "table items row ('b',): {'name': ('Desk', 300)} -> no row" in found
    assert any(
        line.startswith("projection catalog doc 'b': ") and line.endswith("-> no document") for line in found
    )
    assert found[-1].startswith("parked only when delivered: ") and "parse" in found[-1]
    assert differences(a, a) == []
