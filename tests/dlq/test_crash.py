"""A writer killed with SIGKILL at the worst moments leaves a readable log with every acked record."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from framework.dlq import DeadLetterStore, DeadLetterWAL, Status
from tests.dlq.support import rec

REPO = Path(__file__).resolve().parents[2]


def _run_and_kill(root: Path, mode: str, acks_before_kill: int | None = None) -> list[int]:
    """Start the child, wait for WAIT (or ``acks_before_kill`` acks), SIGKILL it; returns acked offsets."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.dlq.crash_child", str(root), mode],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    acked: list[int] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "WAIT" or (acks_before_kill is not None and len(acked) >= acks_before_kill):
                break
            acked.append(int(line))
        else:
            raise AssertionError(f"child ended early: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    return acked


def _reopen(root: Path) -> tuple[list[int], list[Status]]:
    with DeadLetterWAL(root) as wal:
        offsets = [e.record.offset for e in wal.iterate()]
        statuses = [s.status for s in wal.segments()]
        wal.park_sync(rec(1000))  # the log stays writable after recovery
        assert [e.record.offset for e in wal.iterate()][-1] == 1000
    return offsets, statuses


def test_killed_while_parking_in_a_loop(tmp_path: Path) -> None:
    acked = _run_and_kill(tmp_path / "wal", "loop", acks_before_kill=60)
    offsets, statuses = _reopen(tmp_path / "wal")
    assert offsets[: len(acked)] == acked == list(range(len(acked)))
    assert offsets == list(range(len(offsets)))  # at most unacked records after them, never a gap
    assert len(statuses) > 1 and Status.OPEN not in statuses  # rotated, and recovered segments sealed


def test_killed_between_write_and_fsync(tmp_path: Path, caplog) -> None:
    acked = _run_and_kill(tmp_path / "wal", "before-fsync")
    assert acked == [0, 1, 2, 3, 4]
    with caplog.at_level(logging.WARNING, logger="framework.dlq"):
        offsets, _ = _reopen(tmp_path / "wal")
    # The 6th record was written (the page cache survives a process crash) but never acked: recovery
    # recounts the file and keeps it (at least once); the index, updated only after fsync, said 5.
    assert offsets == [0, 1, 2, 3, 4, 5]
    assert "damaged" not in caplog.text
    assert not any(h.damaged for h in DeadLetterStore(tmp_path / "wal").check_all())


def test_killed_mid_write_leaves_a_torn_tail_that_is_skipped(tmp_path: Path, caplog) -> None:
    acked = _run_and_kill(tmp_path / "wal", "half-write")
    assert acked == [0, 1, 2, 3, 4]
    with caplog.at_level(logging.WARNING, logger="framework.dlq"):
        offsets, statuses = _reopen(tmp_path / "wal")
    assert offsets == [0, 1, 2, 3, 4]
    assert "torn line" in caplog.text
    assert statuses == [Status.SEALED]
    # The torn segment was sealed at recovery with its true size and count; the record parked after
    # recovery went to a new segment rather than after the torn bytes.
    store = DeadLetterStore(tmp_path / "wal")
    torn, fresh = store.segments()
    assert (torn.count, torn.bytes) == (5, store.abspath(torn).stat().st_size)
    assert (fresh.count, fresh.first_lsn) == (1, 6)  # the torn, never-acked lsn 6 is free again
    # The torn bytes lay past what the index recorded as durable: recovery cut them off, so the
    # segment is not damaged (nothing acknowledged was lost) and can be replayed and cleaned up.
    assert store.abspath(torn).read_bytes().endswith(b"\n")
    assert [h.damaged for h in store.check_all()] == [False, False]
