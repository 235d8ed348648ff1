"""Discard, time-window splits, cleanup after a grace period, and the portable export file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.export import export_records, import_file, read_export
from framework.dlq.lifecycle import cleanup, discard
from tests.dlq.support import FakeClock, rec


def _fill(root: Path, clock: FakeClock, n: int = 12, **kw: object) -> None:
    """Park ``n`` records one second apart in two partitions (even/odd offsets), then seal."""
    with DeadLetterWAL(root, clock=clock, **kw) as wal:  # type: ignore[arg-type]
        for i in range(n):
            clock.tick(1)
            wal.park_sync(rec(i, error_class="Even" if i % 2 == 0 else "Odd"))


def _live(store: DeadLetterStore, **flt: object) -> list[int]:
    return [e.record.offset for e in store.records(SegmentFilter(**flt))]  # type: ignore[arg-type]


def test_discard_marks_segments_and_cleanup_deletes_them_after_the_grace_period(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    _fill(tmp_path, clock, max_segment_bytes=800)
    store = DeadLetterStore(tmp_path, clock=clock)
    before = store.segments(SegmentFilter(error_class="Even"))
    out = discard(store, SegmentFilter(error_class="Even"))
    assert (out.segments, out.records, out.skipped_open) == (len(before), 6, 0)
    assert _live(store) == [1, 3, 5, 7, 9, 11]
    discarded = store.segments(SegmentFilter(statuses=(Status.DISCARDED,)))
    assert {s.id for s in discarded} == {s.id for s in before}
    assert all(store.abspath(s).exists() for s in discarded)  # discard only marks

    clock.tick(3599)
    rep = cleanup(store, grace_s=3600)
    assert (rep.segments, rep.orphans) == (0, [])
    clock.tick(1)
    assert cleanup(store, grace_s=3600, dry_run=True).segments == len(before)
    assert all(store.abspath(s).exists() for s in discarded)
    rep = cleanup(store, grace_s=3600)
    assert (rep.segments, rep.bytes) == (len(before), sum(s.bytes for s in before))
    assert not any(store.abspath(s).exists() for s in discarded)
    assert not store.abspath(discarded[0]).parent.exists()  # the empty partition directory is pruned
    assert store.segments(SegmentFilter(statuses=(Status.DISCARDED,))) == []
    assert _live(store) == [1, 3, 5, 7, 9, 11]


def test_discard_by_time_window_splits_a_partly_covered_segment(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    _fill(tmp_path, clock)  # offsets 0..11 parked at t = 1..12, one segment per partition
    store = DeadLetterStore(tmp_path, clock=clock)
    out = discard(store, SegmentFilter(error_class="Odd", since=4.0, until=9.0))  # offsets 3, 5, 7
    assert out.records == 3
    assert _live(store, error_class="Odd") == [1, 9, 11]
    parts = store.segments(SegmentFilter(error_class="Odd"))
    assert sorted((s.status, s.count) for s in parts) == [(Status.DISCARDED, 3), (Status.SEALED, 3)]
    kept = store.segments(SegmentFilter(error_class="Odd", statuses=(Status.SEALED,)))[0]
    assert (kept.first_ts, kept.last_ts, kept.first_lsn, kept.last_lsn) == (2.0, 12.0, 2, 12)
    assert kept.bytes == store.abspath(kept).stat().st_size
    assert len(list(store.abspath(kept).parent.iterdir())) == 2  # the original file is gone
    assert _live(store, error_class="Even") == [0, 2, 4, 6, 8, 10]  # other partition untouched
    assert discard(store, SegmentFilter(error_class="Odd", since=100.0)).records == 0


def test_open_segments_are_left_to_their_writer(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    with DeadLetterWAL(tmp_path, clock=clock) as wal:
        wal.park_sync(rec(0))
        out = discard(wal.store, SegmentFilter())
        assert (out.records, out.skipped_open) == (0, 1)
        assert [e.record.offset for e in wal.iterate()] == [0]


def test_cleanup_reports_unindexed_files_and_leaves_them(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    _fill(tmp_path, clock, n=2)
    store = DeadLetterStore(tmp_path, clock=clock)
    (seg, _) = store.segments()
    stray = store.abspath(seg).with_name("0000000000000099-deadbeef.seg")
    stray.write_bytes(store.abspath(seg).read_bytes())
    rep = cleanup(store, grace_s=0)
    assert rep.orphans == [store.relpath(stray)] and stray.exists()


def test_export_is_portable_json_lines_and_imports_back(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    root, out = tmp_path / "a", tmp_path / "orders.jsonl"
    with DeadLetterWAL(root, clock=clock) as wal:
        for i in range(6):
            clock.tick(1)
            key = None if i == 3 else b"\x00k%d" % i
            value = bytes(range(i * 40, i * 40 + 40))
            wal.park_sync(rec(i, key=key, value=value, error_class="Even" if i % 2 == 0 else "Odd"))
        originals = [e.record for e in wal.store.ordered()]
    store = DeadLetterStore(root, clock=clock)
    assert export_records(store, SegmentFilter(pipeline="orders"), out).records == 6
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["format"] == "converge-dlq-export" and header["filter"]["pipeline"] == "orders"
    assert [json.loads(x)["offset"] for x in lines[1:]] == [0, 1, 2, 3, 4, 5]  # global write order
    assert [r for _, r in read_export(out)] == originals

    with DeadLetterWAL(tmp_path / "b", clock=clock) as wal:
        assert import_file(wal, out) == 6
        assert [e.record for e in wal.store.ordered()] == originals
        assert {s.partition.error_class for s in wal.segments()} == {"Even", "Odd"}

    assert export_records(store, SegmentFilter(error_class="Odd", since=3.0, until=5.0), out).records == 1
    assert [r.offset for _, r in read_export(out)] == [3]


def test_import_refuses_a_damaged_file_before_parking_anything(tmp_path: Path) -> None:
    clock = FakeClock(0.0)
    _fill(tmp_path / "a", clock, n=3)
    out = tmp_path / "x.jsonl"
    export_records(DeadLetterStore(tmp_path / "a"), SegmentFilter(), out)
    lines = out.read_text().splitlines()
    bad = json.loads(lines[2]) | {"key": "??"}
    out.write_text("\n".join([*lines[:2], json.dumps(bad), lines[3]]) + "\n")
    with DeadLetterWAL(tmp_path / "b") as wal:
        with pytest.raises(ValueError, match=r"x\.jsonl:3"):
            import_file(wal, out)
        assert list(wal.iterate()) == []
