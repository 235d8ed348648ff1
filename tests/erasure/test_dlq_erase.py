"""Removing a subject's records from a real dead-letter WAL and its export files, crash-safely."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from framework.dlq import DeadLetterStore, DeadLetterWAL, ParkedRecord, SegmentFilter, Status
from framework.dlq.erase import drop_records, matching_records, scrub_export
from framework.erasure.find import record_finder
from tests.erasure.support import export

ANN = "ann@example.org"
MATCH = record_finder(ANN)


def _record(i: int, who: str, error: str = "bad") -> ParkedRecord:
    value = json.dumps({"payload": {"to": [who]}, "n": i}).encode()
    return ParkedRecord(pipeline="p", topic="t", partition=0, offset=i, key=b"k", value=value, stage="map",
                        error_class="E", error=error, parked_at=time.time(), event_type="x")  # fmt: skip


def _fill(root: Path, who: list[str]) -> None:
    with DeadLetterWAL(root) as wal:
        for i, w in enumerate(who):
            wal.park_sync(_record(i, w))


def _records(root: Path) -> list[tuple[int, bytes]]:
    store = DeadLetterStore(root)
    try:
        return [(e.lsn, e.record.value or b"") for e in store.records(SegmentFilter(statuses=tuple(Status)))]
    finally:
        store.close()


def test_drop_rewrites_segments_without_the_subject(tmp_path: Path) -> None:
    root = tmp_path / "dlq"
    _fill(root, ["bo@x.io", ANN, "cy@x.io", "ANN@example.org", "joann@example.org"])
    before = _records(root)
    store = DeadLetterStore(root)
    try:
        assert len(list(matching_records(store, MATCH))) == 2
        dry = drop_records(store, MATCH, dry_run=True)
        assert dry.records == 2 and _records(root) == before
        done = drop_records(store, MATCH)
        assert (done.records, done.held_open, done.damaged, done.orphans) == (2, 0, [], 0)
        assert list(matching_records(store, MATCH)) == []
        assert all(not h.damaged for h in store.check_all())
        assert sum(s.count for s in store.segments(SegmentFilter(statuses=tuple(Status)))) == 3
    finally:
        store.close()
    assert _records(root) == [before[0], before[2], before[4]]  # same lsns, same bytes


def test_a_live_writers_open_segment_is_reported_then_dropped_after_close(tmp_path: Path) -> None:
    root = tmp_path / "dlq"
    wal = DeadLetterWAL(root)
    wal.park_sync(_record(0, ANN))
    store = DeadLetterStore(root)
    try:
        held = drop_records(store, MATCH)
        assert (held.records, held.held_open) == (0, 1)
        wal.close()
        assert drop_records(store, MATCH).records == 1
        assert list(matching_records(store, MATCH)) == []
    finally:
        wal.close()
        store.close()


def test_a_crash_before_the_swap_leaves_the_segment_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "dlq"
    _fill(root, [ANN, "bo@x.io"])
    before = _records(root)
    store = DeadLetterStore(root)
    try:
        monkeypatch.setattr(store.index, "replace", lambda *a, **k: (_ for _ in ()).throw(OSError("crash")))
        with pytest.raises(OSError):
            drop_records(store, MATCH)
    finally:
        store.close()
    assert _records(root) == before
    assert len(list((root / "segments").rglob("*.seg"))) == 1  # the new file was removed


def test_an_unindexed_copy_left_by_a_crash_after_the_swap_is_deleted(tmp_path: Path) -> None:
    root = tmp_path / "dlq"
    _fill(root, [ANN, "bo@x.io"])
    (seg,) = list((root / "segments").rglob("*.seg"))
    leftover = seg.with_name("0000000000000000-deadbeef.seg")
    shutil.copy(seg, leftover)  # what a crash between the index swap and the unlink leaves
    _fill(tmp_path / "other", ["bo@x.io"])
    (clean,) = list((tmp_path / "other" / "segments").rglob("*.seg"))
    stray = seg.with_name("0000000000000000-cafecafe.seg")
    shutil.copy(clean, stray)  # an unindexed file without the subject stays
    store = DeadLetterStore(root)
    try:
        assert len(list(matching_records(store, MATCH))) == 2
        done = drop_records(store, MATCH)
        assert (done.records, done.orphans) == (1, 1)
        assert not leftover.exists() and stray.exists()
        assert list(matching_records(store, MATCH)) == []
    finally:
        store.close()


def test_a_damaged_segment_is_never_rewritten(tmp_path: Path) -> None:
    root = tmp_path / "dlq"
    _fill(root, [ANN, "bo@x.io"])
    (seg,) = list((root / "segments").rglob("*.seg"))
    with open(seg, "ab") as f:
        f.write(b"00000000 {torn")
    raw = seg.read_bytes()
    store = DeadLetterStore(root)
    try:
        done = drop_records(store, MATCH)
        assert done.records == 0 and len(done.damaged) == 1
    finally:
        store.close()
    assert seg.read_bytes() == raw


def test_scrub_export_keeps_the_other_lines_byte_for_byte(tmp_path: Path) -> None:
    root, out = tmp_path / "dlq", tmp_path / "parked.jsonl"
    _fill(root, ["bo@x.io", ANN, "cy@x.io"])
    assert export(root, out) == 3
    lines = out.read_text().splitlines(keepends=True)
    assert scrub_export(out, MATCH, dry_run=True) == 1 and out.read_text() == "".join(lines)
    assert scrub_export(out, MATCH) == 1
    assert out.read_text() == "".join([lines[0], lines[1], lines[3]])
    assert scrub_export(out, MATCH) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(lines[0] + lines[2] + "{not json\n")
    with pytest.raises(ValueError):
        scrub_export(bad, MATCH)
    assert bad.read_text() == lines[0] + lines[2] + "{not json\n"
