"""Delivery orders and event builders."""

from __future__ import annotations

from collections import Counter

from hypothesis import find, given, settings
from hypothesis import strategies as st

from framework.core.events import Event
from framework.testing import Timeline, deliveries, make_event

HISTORY = Timeline()
for i in range(8):
    HISTORY.add("item.set", {"item": f"i{i % 3}", "n": i}, key=f"i{i % 3}")


def _by_key(events: list[Event]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in events:
        out.setdefault(e.ordering_key, []).append(e.event_id)
    return out


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_every_event_is_delivered_at_least_once_and_nothing_else(data: st.DataObject) -> None:
    order = data.draw(deliveries(HISTORY, max_duplicates=4))
    counts = Counter(e.event_id for e in order)
    assert set(counts) == {e.event_id for e in HISTORY}
    assert len(order) <= 2 * (len(HISTORY) + 4)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_keep_key_order_keeps_each_keys_order(data: st.DataObject) -> None:
    order = data.draw(deliveries(HISTORY, max_duplicates=0, replay=False, keep_key_order=True))
    assert _by_key(order) == _by_key(list(HISTORY))


def test_the_strategy_reaches_disorder_duplicates_and_replays() -> None:
    ids = [e.event_id for e in HISTORY]
    reversed_keys = find(deliveries(HISTORY), lambda o: [e.event_id for e in o][:2] == [ids[-1], ids[-2]])
    assert reversed_keys[0] == HISTORY[-1]
    duplicated = find(deliveries(HISTORY, replay=False), lambda o: len(o) > len(HISTORY))
    assert len(duplicated) == len(HISTORY) + 1
    replayed = find(deliveries(HISTORY, max_duplicates=0), lambda o: len(o) > len(HISTORY))
    assert replayed[-1] == replayed[len(HISTORY) - 1]  # a replayed tail repeats the end of the delivery
    assert find(deliveries([]), lambda o: True) == []


def test_in_key_order_is_not_the_default_shuffle() -> None:
    crossed = find(
        deliveries(HISTORY, replay=False, max_duplicates=0), lambda o: _by_key(o) != _by_key(list(HISTORY))
    )
    assert sorted(e.event_id for e in crossed) == sorted(e.event_id for e in HISTORY)


def test_make_event_defaults_and_stable_ids() -> None:
    e = make_event("item.set", {"item": "a"}, version=7)
    assert (e.ordering_key, e.version, e.occurred_at, e.payload) == ("k", 7, 7, {"item": "a"})
    assert make_event("item.set", {"item": "a"}, version=7).event_id == e.event_id
    assert make_event("item.set", {"item": "b"}, version=7).event_id != e.event_id
    assert make_event("item.set", event_id="x", occurred_at=3).event_id == "x"


def test_timeline_steps_versions_and_accepts_explicit_ones() -> None:
    t = Timeline(start=100, step=10)
    assert [t.add("a").version, t.add("a", version=500).version, t.add("a").version] == [100, 500, 510]
    assert len(t) == 3 and all(isinstance(e, Event) for e in t)
