"""One job of a coordinated cycle, as its own OS process, for tests/jobs/test_coordinator*.py.

``python -m tests.jobs.coordinator_worker --locks URL --checkpoints URL --domain D --job A
--predecessor C --start-with A --rounds N --record PATH [--hang-at-round R]``

Loops over rounds until the domain has taken N turns. On each of its turns
it records ``(round, job, pid, start, end, seen_checkpoint)`` in the SQLite
file PATH (start when the batch begins, end when it ends, both inside the
turn), sleeps ``--batch-seconds`` as its batch, and commits its own turn
count as its checkpoint. With ``--hang-at-round R`` it records the start of
round R and then sleeps forever, holding the lock, until it is killed.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time

from framework.coordination import open_checkpoint_store, open_domain_locks
from framework.jobs import CoordinatorSettings, JobCoordinator

RECORD_DDL = (
    "CREATE TABLE IF NOT EXISTS turns (round INTEGER NOT NULL, job TEXT NOT NULL, pid INTEGER NOT NULL,"
    " start REAL NOT NULL, end REAL, seen TEXT)"
)


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--locks", required=True)
    p.add_argument("--checkpoints", required=True)
    p.add_argument("--domain", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--predecessor", required=True)
    p.add_argument("--start-with", default=None)
    p.add_argument("--rounds", type=int, required=True)
    p.add_argument("--record", required=True)
    p.add_argument("--hang-at-round", type=int, default=0)
    p.add_argument("--batch-seconds", type=float, default=0.01)
    p.add_argument("--poll", type=float, default=0.01)
    p.add_argument("--lease", type=float, default=10.0)
    p.add_argument("--session-timeout", type=float, default=10.0)
    p.add_argument("--deadline", type=float, default=90.0, help="give up after this many seconds")
    return p.parse_args(argv)


def open_record(path: str) -> sqlite3.Connection:
    """The shared record file (autocommit, WAL)."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(RECORD_DDL)
    return db


def main(argv: list[str]) -> int:
    a = _args(argv)
    record = open_record(a.record)
    locks = open_domain_locks(a.locks, lease=a.lease, session_timeout=a.session_timeout)
    checkpoints = open_checkpoint_store(a.checkpoints)
    coordinator = JobCoordinator(
        locks,
        CoordinatorSettings(a.domain, a.job, predecessor=a.predecessor, start_with=a.start_with),
        checkpoints=checkpoints,
    )
    give_up = time.monotonic() + a.deadline
    try:
        while time.monotonic() < give_up:
            last = locks.last_runner(a.domain)
            if last is not None and last.round >= a.rounds:
                return 0
            with coordinator.turn_sync() as turn:
                if turn and turn.round <= a.rounds:
                    seen = None if turn.checkpoint is None else turn.checkpoint.value
                    start = time.time()
                    row = record.execute(
                        "INSERT INTO turns (round, job, pid, start, seen) VALUES (?, ?, ?, ?, ?)",
                        (turn.round, a.job, os.getpid(), start, seen),
                    ).lastrowid
                    if turn.round == a.hang_at_round:
                        while True:  # hold the lock until SIGKILL
                            time.sleep(60)
                    time.sleep(a.batch_seconds)
                    turn.commit(str(int(seen or 0) + 1))
                    record.execute("UPDATE turns SET end = ? WHERE rowid = ?", (time.time(), row))
            if not turn:
                time.sleep(a.poll)
        print(f"{a.job}: deadline passed", file=sys.stderr)
        return 1
    finally:
        locks.close()
        checkpoints.close_sync()  # type: ignore[attr-defined]
        record.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
