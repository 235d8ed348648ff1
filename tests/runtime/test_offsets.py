"""OffsetTracker: only the contiguous prefix of finished offsets is ever released."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.runtime.offsets import OffsetOrderError, OffsetTracker


@settings(max_examples=500, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10_000), min_size=1, max_size=60, unique=True).map(sorted),
    data=st.data(),
)
def test_release_is_the_finished_prefix(offsets: list[int], data: st.DataObject) -> None:
    order = data.draw(st.permutations(offsets))
    t: OffsetTracker[int] = OffsetTracker()
    for o in offsets:
        t.track(o, o)
    finished: set[int] = set()
    released: list[int] = []
    for o in order:
        finished.add(o)
        released += t.finish(o)
        # oracle: the longest prefix of `offsets` that is all finished
        prefix = []
        for x in offsets:
            if x not in finished:
                break
            prefix.append(x)
        assert released == prefix
        assert t.low_watermark == (offsets[len(prefix)] if len(prefix) < len(offsets) else None)
    assert released == offsets
    assert t.pending == 0


def test_out_of_order_tracking_and_double_finish_are_errors() -> None:
    t: OffsetTracker[str] = OffsetTracker()
    t.track(5, "a")
    with pytest.raises(OffsetOrderError):
        t.track(5, "b")
    with pytest.raises(OffsetOrderError):
        t.finish(6)
    assert t.finish(5) == ["a"]
    with pytest.raises(OffsetOrderError):
        t.finish(5)


def test_a_hole_holds_back_later_offsets() -> None:
    t: OffsetTracker[int] = OffsetTracker()
    for o in (1, 2, 3):
        t.track(o, o)
    assert t.finish(2) == []
    assert t.finish(3) == []
    assert t.low_watermark == 1
    assert t.finish(1) == [1, 2, 3]
