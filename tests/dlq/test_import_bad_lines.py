"""``converge dlq import`` of a file with a line it cannot read: exit 2 naming the line, nothing imported."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.cli import main
from framework.dlq import DeadLetterStore, DeadLetterWAL
from tests.dlq.support import FakeClock, rec

DEEP = "[" * 100_000 + "]" * 100_000
BAD_LINES: dict[str, str | bytes] = {
    "nested 100,000 deep": DEEP,
    "a 5,000-digit number": '{"offset": ' + "9" * 5000 + "}",
    "a deep object": '{"a": ' * 100_000 + "1" + "}" * 100_000,
    "not UTF-8": b'{"offset": "\xff\xfe"}',
}


def _export(tmp_path: Path) -> Path:
    root = tmp_path / "wal"
    clock = FakeClock(1_700_000_000.0)
    with DeadLetterWAL(root, clock=clock) as wal:
        for i in range(2):
            clock.tick(60)
            wal.park_sync(rec(i))
    dump = tmp_path / "dump.jsonl"
    assert main(["dlq", "export", "--root", str(root), "--out", str(dump)]) == 0
    return dump


@pytest.mark.parametrize("what", sorted(BAD_LINES))
def test_a_bad_line_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    dump = _export(tmp_path)
    lines = dump.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3  # header and two records
    bad = tmp_path / "bad.jsonl"
    raw = BAD_LINES[what] if isinstance(BAD_LINES[what], bytes) else BAD_LINES[what].encode()
    bad.write_bytes(b"\n".join([lines[0].encode(), lines[1].encode(), raw, lines[2].encode()]) + b"\n")
    capsys.readouterr()
    other = tmp_path / "other"
    assert main(["dlq", "import", "--root", str(other), str(bad)]) == 2  # exited 1 (RecursionError) before
    err = capsys.readouterr().err
    assert err.startswith(f"converge dlq import: error: {bad}:3: ") and err.count("\n") == 1, err
    # the whole file is checked first
    assert not other.exists() or list(DeadLetterStore(other).ordered()) == []


def test_a_deep_header_is_not_an_export_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(DEEP + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["dlq", "import", "--root", str(tmp_path / "other"), str(bad)]) == 2
    assert f"{bad}: not a converge-dlq-export file" in capsys.readouterr().err


def test_the_good_file_still_imports(tmp_path: Path) -> None:
    dump = _export(tmp_path)
    other = tmp_path / "other"
    assert main(["dlq", "import", "--root", str(other), str(dump)]) == 0
    assert [e.record.offset for e in DeadLetterStore(other).ordered()] == [0, 1]
