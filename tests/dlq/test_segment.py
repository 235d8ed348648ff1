"""Damaged segment files: torn tails and garbage are skipped with a warning, good records survive."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from framework.dlq import DeadLetterWAL
from framework.dlq.segment import SegmentReader, decode_line, encode_line
from tests.dlq.support import FakeClock, rec


def _one_segment(root: Path, n: int) -> Path:
    with DeadLetterWAL(root, clock=FakeClock()) as wal:
        for i in range(n):
            wal.park_sync(rec(i))
        (seg,) = wal.segments()
        return wal.store.abspath(seg)


def _offsets(root: Path) -> list[int]:
    with DeadLetterWAL(root, clock=FakeClock()) as wal:
        return [e.record.offset for e in wal.iterate()]


def test_line_format_detects_every_kind_of_damage() -> None:
    line = encode_line({"a": 1, "b": "\n"})
    assert line.count(b"\n") == 1 and decode_line(line) == {"a": 1, "b": "\n"}
    for bad, why in [(line[:-1], "torn"), (line[:-5] + b"\n", "checksum"),
                     (b"zzzzzzzz " + line[9:], "checksum"), (b"garbage\n", "malformed")]:  # fmt: skip
        with pytest.raises(ValueError, match=why):
            decode_line(bad)


@pytest.mark.parametrize("cut", [1, 10, 40])
def test_torn_last_record_is_skipped_with_a_warning(tmp_path: Path, cut: int, caplog) -> None:
    path = _one_segment(tmp_path / "wal", 5)
    data = path.read_bytes()
    last_start = data.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(data[: last_start + cut])  # the last record ends mid-line
    with caplog.at_level(logging.WARNING, logger="framework.dlq"):
        assert _offsets(tmp_path / "wal") == [0, 1, 2, 3]
    assert "torn line" in caplog.text and f"offset {last_start}" in caplog.text


def test_garbage_appended_is_skipped_with_a_warning(tmp_path: Path, caplog) -> None:
    path = _one_segment(tmp_path / "wal", 3)
    with open(path, "ab") as f:
        f.write(b"\x00\xff garbage \x13\n\x00\x00partial")
    with caplog.at_level(logging.WARNING, logger="framework.dlq"):
        assert _offsets(tmp_path / "wal") == [0, 1, 2]
    r = SegmentReader(path).scan()
    assert r.count == 3 and [d[2] for d in r.damage] == ["malformed line", "torn line (no newline)"]


def test_a_corrupt_record_in_the_middle_costs_only_that_record(tmp_path: Path, caplog) -> None:
    path = _one_segment(tmp_path / "wal", 5)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"offset":1', b'"offset":9')  # payload changed, checksum not
    path.write_bytes(b"".join(lines))
    with caplog.at_level(logging.WARNING, logger="framework.dlq"):
        assert _offsets(tmp_path / "wal") == [0, 2, 3, 4]
    assert "checksum mismatch" in caplog.text
