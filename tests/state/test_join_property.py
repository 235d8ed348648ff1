"""Property: lookup entries and the events that read them, delivered in any order with
duplicates and replays, end in the rows of the mapping applied with the final entries.

Entries of one conversation change its parent each time (created, then changed to a
parent it never had before); entry and event versions come from one grid of real
timestamps spaced 1 us, 1 ms, 1 s or a day, so entries older and newer than the events
they affect arrive before and after them. Rows carry the event's version plus at most
one per entry change (``join_model.At``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.testing import Driver
from tests.state.join_app import app, child, parent_set
from tests.state.join_model import At

#: Version spacings: 1 us, 1 ms, 1 s and a day, on real timestamps.
SPACINGS = (1, 1_000, 1_000_000, 86_400_000_000)
T0 = 1_700_000_000_000_000


@st.composite
def histories(draw: st.DrawFn, spacing: int = 1) -> tuple[list, dict]:
    convs = [f"c{i}" for i in range(draw(st.integers(1, 4)))]
    parents = [f"P{i}" for i in range(8)]
    entries, final = [], {}
    for conv in convs:
        n = draw(st.integers(0, 3))  # 0: the entry never arrives, its readers stay pending
        chosen = draw(st.permutations(parents))[:n]
        grid = st.integers(1, 1000).map(lambda i: T0 + spacing * i)
        versions = sorted(draw(st.lists(grid, min_size=n, max_size=n, unique=True)))
        for parent, v in zip(chosen, versions, strict=True):
            entries.append(parent_set(conv, parent, f"L{parent}{v}", v))
            final[conv] = (parent, f"L{parent}{v}", v)
    children = [
        child(
            f"m{i}",
            draw(st.sampled_from(convs)),
            draw(st.sampled_from(["x", "y", "z"])),
            T0 + spacing * draw(st.integers(1, 1000)),
        )  # fmt: skip
        for i in range(draw(st.integers(1, 8)))
    ]
    events = entries + children
    copies = draw(st.lists(st.integers(1, 3), min_size=len(events), max_size=len(events)))
    order = [e for e, n in zip(events, copies, strict=True) for _ in range(n)]
    order = draw(st.permutations(order))
    replay = draw(st.lists(st.sampled_from(events), max_size=6))
    oracle = {}
    for c in children:
        conv = c.payload["conv"]
        if conv in final:
            parent, label, v = final[conv]
            cells = {"body": c.payload["body"], "conv": conv, "label": label}
            oracle[(parent, c.payload["msg_id"])] = At(cells, c.version, len(entries))
    return list(order) + replay, oracle


@pytest.mark.parametrize("spacing", SPACINGS, ids=["1us", "1ms", "1s", "1day"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_joined_rows_equal_the_mapping_with_the_final_entries(spacing: int, data: st.DataObject) -> None:
    events, oracle = data.draw(histories(spacing), label="history")
    with Driver(app) as d:
        assert d.send(events) == []
        rows = {(r.key["parent"], r.key["msg_id"]): (r.values(), r.version) for r in d.rows("msg")}
        pending = {eid for eid, _, _ in d.pending()["children"]}
    assert rows == oracle
    mapped = {f"c-{m}" for _, m in oracle}
    children = {e.event_id for e in events if e.type == "child.posted"}
    assert pending == children - mapped
