"""Property: entry events applied in batches (``EntryTables.feed_many``: merged in memory, one
RocksDB write batch) end in the same table as one event at a time, whatever the order, the
duplicates and the batch cuts; what each call reports as changed is exactly what changed."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.state.entries import EntryTables
from framework.state.kv import MemoryKV, RocksKV
from tests.state.join_app import app, parent_set

entry_events = st.lists(
    st.builds(
        parent_set,
        st.sampled_from(["c1", "c2", "c3"]),
        st.sampled_from(["A", "B"]),
        st.sampled_from(["x", "y"]),
        st.integers(1, 4),
    ),  # fmt: skip
    min_size=1,
    max_size=25,
)


def _table(tables: EntryTables) -> dict[str, tuple[dict, int]]:
    out = {}
    for conv in ("c1", "c2", "c3"):
        entry = tables.get("parent", conv)
        if entry is not None:
            out[conv] = (dict(entry.value), entry.version)
    return out


@settings(max_examples=300, deadline=None)
@given(events=entry_events, cuts=st.lists(st.integers(1, 8), min_size=1, max_size=10))
def test_batched_entries_end_like_one_at_a_time(events: list, cuts: list[int]) -> None:
    one = EntryTables(app.lookups, MemoryKV())
    for e in events:
        one.feed("t.parents", e)
    with tempfile.TemporaryDirectory() as tmp:
        kv = RocksKV(Path(tmp) / "entries")
        batched = EntryTables(app.lookups, kv)
        i, sizes = 0, iter(cuts * 25)
        while i < len(events):
            chunk = events[i : i + next(sizes)]
            before = _table(batched)
            changed = batched.feed_many("t.parents", chunk)
            after = _table(batched)
            assert {k for _, k in changed} == {k for k in after if after[k] != before.get(k)}
            i += len(chunk)
        fresh = EntryTables(app.lookups, kv)  # what RocksDB holds, not the cache
        assert _table(fresh) == _table(batched) == _table(one)
        kv.close()
