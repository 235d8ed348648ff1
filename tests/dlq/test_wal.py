"""DeadLetterWAL: parking, partitions, rotation, index metadata, the writer lock, reading order."""

from __future__ import annotations

import asyncio
import tempfile
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status, WALLockedError
from framework.dlq.segment import SegmentReader
from tests.dlq.support import FakeClock, rec


async def test_park_is_async_and_records_read_back_per_partition(tmp_path: Path) -> None:
    clock = FakeClock()
    wal = DeadLetterWAL(tmp_path, clock=clock)
    await asyncio.gather(*(wal.park(rec(i, error_class=f"E{i % 2}")) for i in range(10)))
    by_class: dict[str, list[int]] = defaultdict(list)
    for e in wal.iterate():
        by_class[e.record.error_class].append(e.record.offset)
    assert sorted(by_class["E0"]) == [0, 2, 4, 6, 8] and sorted(by_class["E1"]) == [1, 3, 5, 7, 9]
    assert {s.partition.error_class for s in wal.segments()} == {"E0", "E1"}
    wal.close()


def test_index_metadata_counts_bytes_and_timestamps(tmp_path: Path) -> None:
    clock = FakeClock(1000.0)
    with DeadLetterWAL(tmp_path, clock=clock) as wal:
        for i, t in enumerate([1005.0, 1001.0, 1009.0]):  # parked_at given, not in order
            wal.park_sync(rec(i, parked_at=t))
        wal.park_sync(rec(3))  # parked_at from the clock
        (seg,) = wal.segments()
        assert seg.status is Status.OPEN
        assert (seg.count, seg.first_ts, seg.last_ts) == (4, 1000.0, 1009.0)
        assert (seg.first_lsn, seg.last_lsn) == (1, 4)
        assert seg.bytes == wal.store.abspath(seg).stat().st_size
        assert seg.created_at == 1000.0
    (seg,) = DeadLetterStore(tmp_path).segments()
    assert seg.status is Status.SEALED and seg.count == 4
    r = SegmentReader(DeadLetterStore(tmp_path).abspath(seg)).scan()
    assert (r.count, r.first_ts, r.last_ts, r.damage) == (4, 1000.0, 1009.0, [])
    assert r.header is not None and r.header["error_class"] == "ValidationError"


def test_rotation_by_size_keeps_segments_under_the_limit(tmp_path: Path) -> None:
    with DeadLetterWAL(tmp_path, max_segment_bytes=1000, clock=FakeClock()) as wal:
        for i in range(20):
            wal.park_sync(rec(i))
        segs = wal.segments()
        assert len(segs) > 3
        assert all(s.bytes <= 1000 for s in segs)
        assert [s.status for s in segs] == [Status.SEALED] * (len(segs) - 1) + [Status.OPEN]
        assert sum(s.count for s in segs) == 20
        assert [e.record.offset for e in wal.iterate()] == list(range(20))
        big = rec(99, value=b"x" * 3000)  # larger than a segment: gets a segment of its own
        wal.park_sync(big)
        assert wal.segments()[-1].count == 1


def test_rotation_by_age_on_park_and_on_rotate(tmp_path: Path) -> None:
    clock = FakeClock()
    with DeadLetterWAL(tmp_path, max_segment_age_s=60, clock=clock) as wal:
        wal.park_sync(rec(0, error_class="A"))
        wal.park_sync(rec(1, error_class="B"))
        clock.tick(59)
        wal.park_sync(rec(2, error_class="A"))
        assert [s.status for s in wal.segments()] == [Status.OPEN, Status.OPEN]
        clock.tick(1)
        wal.park_sync(rec(3, error_class="A"))  # seals both expired segments, A gets a new one
        st_a = [s.status for s in wal.segments(SegmentFilter(error_class="A"))]
        assert st_a == [Status.SEALED, Status.OPEN]
        assert [s.status for s in wal.segments(SegmentFilter(error_class="B"))] == [Status.SEALED]
        clock.tick(30)
        assert wal.rotate_sync() == 0
        clock.tick(30)
        assert asyncio.run(wal.rotate()) == 1
        assert all(s.status is Status.SEALED for s in wal.segments())


def test_one_writer_per_root_and_readers_alongside(tmp_path: Path) -> None:
    wal = DeadLetterWAL(tmp_path, clock=FakeClock())
    wal.park_sync(rec(0))
    with pytest.raises(WALLockedError):
        DeadLetterWAL(tmp_path, lock_timeout_s=0.1)
    reader = DeadLetterStore(tmp_path)
    assert [e.record.offset for e in reader.records()] == [0]
    wal.park_sync(rec(1))
    assert [e.record.offset for e in reader.records()] == [0, 1]
    wal.close()
    DeadLetterWAL(tmp_path).close()
    with pytest.raises(RuntimeError, match="closed"):
        wal.park_sync(rec(2))


def test_an_open_segment_is_read_only_up_to_its_acknowledged_bytes(tmp_path: Path) -> None:
    """Bytes past the last fsync+index update (a write in progress) are invisible to readers."""
    with DeadLetterWAL(tmp_path, clock=FakeClock()) as wal:
        wal.park_sync(rec(0))
        (seg,) = wal.segments()
        with open(wal.store.abspath(seg), "ab") as f:
            f.write(b"0000 in-flight")
        assert [e.record.offset for e in DeadLetterStore(tmp_path).records()] == [0]


def test_lsn_continues_across_restarts_and_cleanup(tmp_path: Path) -> None:
    with DeadLetterWAL(tmp_path) as wal:
        assert [wal.park_sync(rec(i)) for i in range(3)] == [1, 2, 3]
    with DeadLetterWAL(tmp_path) as wal:
        assert wal.park_sync(rec(3)) == 4


@st.composite
def _ops(draw: st.DrawFn) -> list[tuple[str, int, bytes | None]]:
    n = draw(st.integers(1, 40))
    return [
        (draw(st.sampled_from(["park", "park", "park", "park", "rotate", "reopen"])),
         draw(st.integers(0, 3)), draw(st.none() | st.binary(max_size=120)))
        for _ in range(n)
    ]  # fmt: skip


PARTS = ["p", "../x", "a/b", "ünï"]


@given(_ops(), st.integers(250, 2000))
@settings(max_examples=40, deadline=None)
def test_property_iterate_returns_what_was_parked_per_partition_in_order(
    ops: list[tuple[str, int, bytes | None]], max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as d:
        clock = FakeClock()
        wal = DeadLetterWAL(d, max_segment_bytes=max_bytes, max_segment_age_s=5, clock=clock)
        expected: dict[str, list[tuple[int, bytes | None]]] = defaultdict(list)
        order: list[int] = []
        try:
            for i, (op, part, value) in enumerate(ops):
                clock.tick(1)
                if op == "rotate":
                    wal.rotate_sync(force=part == 0)
                elif op == "reopen":
                    wal.close()
                    wal = DeadLetterWAL(d, max_segment_bytes=max_bytes, max_segment_age_s=5, clock=clock)
                else:
                    r = replace(rec(i, event_type=PARTS[part], key=None if part else b"k"), value=value)
                    wal.park_sync(r)
                    expected[PARTS[part]].append((i, value))
                    order.append(i)
            got: dict[str, list[tuple[int, bytes | None]]] = defaultdict(list)
            for e in wal.iterate():
                got[e.record.event_type].append((e.record.offset, e.record.value))
            assert got == expected
            assert [e.record.offset for e in wal.store.ordered()] == order
            segs = wal.segments()
            assert sum(s.count for s in segs) == len(order)
            assert all(s.count == 0 or s.bytes <= max_bytes for s in segs if s.count > 1)
        finally:
            wal.close()
