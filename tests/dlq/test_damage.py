"""Damaged parking: unreadable records are counted, named and never marked, split or deleted."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from framework.cli import main
from framework.dlq import DeadLetterStore, DeadLetterWAL, SegmentFilter, Status
from framework.dlq.lifecycle import cleanup, discard, settle
from tests.dlq.damage_support import damaged_wal
from tests.dlq.support import FakeClock, rec


def test_verify_names_every_damaged_segment_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = damaged_wal(tmp_path / "wal")
    assert main(["dlq", "verify", "--root", str(w.root)]) == 1
    out = capsys.readouterr().out
    flipped, cut = w.segments["Bitflip"].path, w.segments["Cut"].path
    assert f"DAMAGED {flipped} (segment 1, sealed): 1 unreadable record at byte {w.flip_at} (" in out
    assert "checksum mismatch" in out
    assert f"DAMAGED {cut} (segment 2, sealed): 1 unreadable record at byte {w.torn_at} (30 bytes)" in out
    assert "torn line" in out
    assert out.rstrip().endswith("3 segments checked: 2 damaged, 2 unreadable records")

    assert main(["dlq", "verify", "--root", str(w.root), "--json"]) == 1
    rows = {r["error_class"]: r for r in json.loads(capsys.readouterr().out)}
    assert {k: (r["indexed"], r["readable"], r["unreadable"]) for k, r in rows.items()} == {
        "Bitflip": (28, 27, 1), "Cut": (2, 1, 1), "Intact": (9, 9, 0),
    }  # fmt: skip
    assert rows["Bitflip"]["damage"] == [
        {"offset": w.flip_at, "length": rows["Bitflip"]["damage"][0]["length"], "reason": "checksum mismatch"}
    ]
    assert rows["Intact"]["damage"] == []

    assert main(["dlq", "verify", "--root", str(w.root), "--error-class", "Intact"]) == 0
    assert "1 segments checked: 0 damaged, 0 unreadable records" in capsys.readouterr().out


def test_verify_checks_a_live_writers_open_segment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with DeadLetterWAL(tmp_path, clock=FakeClock()) as wal:
        for i in range(3):
            wal.park_sync(rec(i))
        (seg,) = wal.segments()
        assert seg.status is Status.OPEN
        assert main(["dlq", "verify", "--root", str(tmp_path)]) == 0
        assert "1 segments checked: 0 damaged" in capsys.readouterr().out
        path = wal.store.abspath(seg)
        data = bytearray(path.read_bytes())
        data[-20] ^= 0x01  # the last (durable, acknowledged) record
        path.write_bytes(bytes(data))
        assert main(["dlq", "verify", "--root", str(tmp_path)]) == 1
        assert "(segment 1, open): 1 unreadable record" in capsys.readouterr().out


def test_list_shows_damaged_counts_per_partition_segment_and_in_total(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = damaged_wal(tmp_path / "wal")
    assert main(["dlq", "list", "--root", str(w.root), "--json"]) == 0
    rows = {r["error_class"]: r for r in json.loads(capsys.readouterr().out)}
    assert {k: (r["live"], r["damaged"], r["damaged_segments"]) for k, r in rows.items()} == {
        "Bitflip": (28, 1, 1), "Cut": (2, 1, 1), "Intact": (9, 0, 0),
    }  # fmt: skip
    assert main(["dlq", "list", "--root", str(w.root), "--segments", "--json"]) == 0
    segs = json.loads(capsys.readouterr().out)
    assert [(s["error_class"], s["records"], s["damaged"]) for s in segs] == [
        ("Bitflip", 28, 1), ("Cut", 2, 1), ("Intact", 9, 0),
    ]  # fmt: skip
    for extra in ([], ["--segments"]):
        assert main(["dlq", "list", "--root", str(w.root), *extra]) == 0
        out = capsys.readouterr().out
        assert "damaged: 2 unreadable records in 2 segments" in out


def test_export_writes_the_readable_records_and_exits_1_naming_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = damaged_wal(tmp_path / "wal")
    out = tmp_path / "all.jsonl"
    assert main(["dlq", "export", "--root", str(w.root), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"exported 37 of 39 records to {out}: 2 records could not be read" in err
    assert f"{w.segments['Bitflip'].path} (segment 1, sealed): 1 unreadable record at byte {w.flip_at}" in err
    assert f"{w.segments['Cut'].path} (segment 2, sealed): 1 unreadable record at byte {w.torn_at}" in err
    offsets = [json.loads(x)["offset"] for x in out.read_text().splitlines()[1:]]
    assert offsets == [i for i in range(39) if i not in (10, 29)]

    assert main(["dlq", "export", "--root", str(w.root), "--error-class", "Intact", "--out", str(out)]) == 0
    assert capsys.readouterr().err == f"exported 9 records to {out}\n"


def test_cleanup_never_deletes_a_damaged_segment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Segments marked replayed by a replay that could not read them (as before this check) are kept."""
    w = damaged_wal(tmp_path / "wal")
    store = w.store()
    for seg in w.segments.values():
        assert store.index.set_status(seg.id, Status.REPLAYED, 0.0, expect=Status.SEALED)
    assert main(["dlq", "cleanup", "--root", str(w.root), "--grace", "0"]) == 1
    captured = capsys.readouterr()
    assert "deleted 1 replayed/discarded segments" in captured.out
    assert "not deleted (damaged)" in captured.err and w.segments["Bitflip"].path in captured.err
    assert w.path("Bitflip").exists() and w.path("Cut").exists() and not w.path("Intact").exists()
    assert sorted(s.partition.error_class for s in store.segments()) == ["Bitflip", "Cut"]
    rep = cleanup(store, grace_s=0)
    assert (rep.segments, sorted(h.segment.id for h in rep.damaged)) == (0, [1, 2])


def test_discard_leaves_damaged_segments_sealed_and_never_splits_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = damaged_wal(tmp_path / "wal")
    store = w.store()
    before = w.path("Bitflip").read_bytes()
    out = discard(store, SegmentFilter())
    assert (out.segments, out.records, [h.segment.id for h in out.damaged]) == (1, 9, [1, 2])
    assert [s.status for s in store.segments()] == [Status.SEALED, Status.SEALED, Status.DISCARDED]
    # A window covering part of a damaged segment would split it, rewriting only what reads back.
    window = SegmentFilter(since=1_700_000_005.0, until=1_700_000_015.0)
    assert settle(store, w.segments["Bitflip"], window, Status.DISCARDED) is None
    assert w.path("Bitflip").read_bytes() == before
    assert [s.id for s in store.segments(SegmentFilter(error_class="Bitflip"))] == [1]
    assert main(["dlq", "discard", "--root", str(w.root), "--all"]) == 1
    assert "not discarded (damaged)" in capsys.readouterr().err


def test_salvage_quarantines_the_damaged_file_and_keeps_its_readable_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from framework.dlq.lifecycle import QUARANTINE, salvage

    w = damaged_wal(tmp_path / "wal")
    damaged_bytes = w.path("Bitflip").read_bytes()
    assert main(["dlq", "salvage", "--root", str(w.root), "--dry-run"]) == 0
    assert "would salvage 2 damaged segments" in capsys.readouterr().out
    assert main(["dlq", "verify", "--root", str(w.root)]) == 1
    capsys.readouterr()

    done = salvage(w.store(), SegmentFilter(error_class="Bitflip"))
    (s,) = done
    assert (s.health.readable, s.health.unreadable) == (27, 1)
    assert (w.root / s.quarantined).read_bytes() == damaged_bytes
    assert s.quarantined == f"{QUARANTINE}/{w.segments['Bitflip'].path}"
    assert main(["dlq", "salvage", "--root", str(w.root)]) == 0
    assert "salvaged 1 damaged segments" in capsys.readouterr().out
    assert main(["dlq", "verify", "--root", str(w.root)]) == 0
    store = w.store()
    assert [e.record.offset for e in store.ordered()] == [i for i in range(39) if i not in (10, 29)]
    assert [(s.partition.error_class, s.status, s.count) for s in store.segments()] == [
        ("Bitflip", Status.SEALED, 27), ("Cut", Status.SEALED, 1), ("Intact", Status.SEALED, 9),
    ]  # fmt: skip
    assert cleanup(store, grace_s=0).orphans == []  # quarantine/ is outside segments/


def test_recovery_cuts_only_an_unacknowledged_torn_tail(tmp_path: Path) -> None:
    """An open segment cut short inside its durable bytes is damage; the index keeps its true counts."""
    with DeadLetterWAL(tmp_path, clock=FakeClock()) as wal:
        for i in range(5):
            wal.park_sync(rec(i))
        (seg,) = wal.segments()
    db = sqlite3.connect(tmp_path / "index.sqlite3")
    with db:
        db.execute("UPDATE segments SET status = 'open'")  # as a killed writer leaves it
    db.close()
    path = DeadLetterStore(tmp_path).abspath(seg)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]) + lines[3][:25])  # records 0, 1, then half of record 2
    with DeadLetterWAL(tmp_path, clock=FakeClock()) as wal:
        (after,) = wal.segments()
        assert (after.status, after.count, after.bytes) == (Status.SEALED, 5, seg.bytes)
        health = wal.store.check(after)
        assert health is not None and (health.readable, health.unreadable) == (2, 3)
        assert path.stat().st_size == sum(len(x) for x in lines[:3]) + 25  # nothing was cut
