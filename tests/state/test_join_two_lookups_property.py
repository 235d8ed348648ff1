"""Property (issue 22): an agent reading two lookups ends in the rows of each event mapped once
with the final entries, whatever the delivery (shuffled, duplicated, replayed).

Versions lie on a grid of real timestamps spaced 1 us, 1 ms, 1 s or a day, 24 steps wide, so an
event's entries are often older and newer than it, change below the other lookup's version,
tie, and are replaced at the same version by another value (equal ranks and non-ASCII text
included). The expected state is computed by the model of ``tests.state.join_model`` (written
from the docs): final entries by version, rank, UTF-8 bytes; each event's cells written at its
version plus at most one per entry change; the thread rows that several events write keep the
later event's cells (events of one thread lie more than that apart: the docs' limit).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import Event
from framework.testing import Driver
from tests.state import join_model as model
from tests.state.two_lookups_app import Cells, app, expected_cells, item, owner_set, tag_set

LABELS = ["a", "b", "z", "é", "Ω", "ab", "日本"]
TAGS = ["a", "b", "z", "ü", "€", "bb"]
#: Version spacings: 1 us, 1 ms, 1 s and a day; versions are real timestamps (2023) on that grid.
SPACINGS = (1, 1_000, 1_000_000, 86_400_000_000)
T0 = 1_700_000_000_000_000


@st.composite
def histories(draw: st.DrawFn, spacing: int | None = None) -> tuple[list[Event], Cells, set[str]]:
    s = draw(st.sampled_from(SPACINGS)) if spacing is None else spacing
    versions = st.integers(1, 24).map(lambda i: T0 + s * i)
    owners: dict[str, list] = {}
    for k in ("k0", "k1"):
        drawn = []
        for _ in range(draw(st.integers(0, 3))):
            row, label, note = (
                draw(st.sampled_from(["r0", "r1"])),
                draw(st.sampled_from(LABELS)),
                draw(st.sampled_from(["x", "y"])),
            )
            v = draw(versions)
            drawn.append((v, {"row": row, "label": label, "note": note}, owner_set(k, row, label, note, v)))
        owners[k] = drawn
    tags: dict[str, list] = {}
    for k in ("t0", "t1"):
        drawn = []
        for _ in range(draw(st.integers(0, 3))):
            tag, v = draw(st.sampled_from(TAGS)), draw(versions)
            drawn.append((v, {"tag": tag}, tag_set(k, tag, v)))
        tags[k] = drawn
    entry_events = {e.event_id: e for per in (owners, tags) for key in per.values() for _, _, e in key}
    slack = len(entry_events)  # an item is mapped again at most once per entry change
    items, last = [], {}  # the items of one thread lie more than ``slack`` us apart (the README's limit)
    for i, v in enumerate(sorted(draw(st.lists(versions, min_size=1, max_size=5)))):
        thread = draw(st.sampled_from(["h0", "h1"]))
        v = max(v, last.get(thread, v - slack - 1) + slack + 1)
        last[thread] = v
        items.append(item(f"m{i}", draw(st.sampled_from(["k0", "k1"])), draw(st.sampled_from(["t0", "t1"])),
                          thread, draw(st.sampled_from(["p", "q"])), v))  # fmt: skip
    events = list(entry_events.values()) + items
    copies = draw(st.lists(st.integers(1, 3), min_size=len(events), max_size=len(events)))
    order = draw(st.permutations([e for e, n in zip(events, copies, strict=True) for _ in range(n)]))
    replay = draw(st.lists(st.sampled_from(events), max_size=6))
    # the model: every item mapped once with the final entries
    final_owner = {k: model.final_entry((v, value) for v, value, _ in es) for k, es in owners.items()}
    final_tag = {k: model.final_entry((v, value) for v, value, _ in es) for k, es in tags.items()}
    cells, waiting = expected_cells(items, final_owner, final_tag, slack)
    return list(order) + replay, cells, waiting


@pytest.mark.parametrize("spacing", SPACINGS, ids=["1us", "1ms", "1s", "1day"])
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_two_lookups_end_in_the_mapping_with_the_final_entries(spacing: int, data: st.DataObject) -> None:
    events, expected, waiting = data.draw(histories(spacing), label="history")
    with Driver(app) as d:
        assert d.send(events) == []  # nothing parked
        stored = {
            (table, tuple(r.key.values())): {c: (x.value, x.writetime) for c, x in r.cells.items()}
            for table in ("item", "thread")
            for r in d.rows(table)
        }
        pending = {eid for eid, _, _ in d.pending()["items"]}
    assert stored == expected
    assert pending == waiting
    assert expected or waiting  # every item is either stored or waiting
