"""The job coordinator across real OS processes: three jobs in a cycle (A after C, B after A, C after B).

Each job runs as its own process (tests/jobs/coordinator_worker.py) against
the real backend (a SQLite file, or the real ZooKeeper of the test setup)
and records every turn (round, job, pid, start, end) in a shared SQLite file.
The turns must follow the cycle, never overlap, and resume each job from
its own checkpoint; a holder killed with SIGKILL must block the others
only until its lease or session expires.
"""

from __future__ import annotations

import itertools
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.jobs.coordinator_worker import open_record
from tests.support.zookeeper import ZooKeeperServer, zookeeper_server

__all__ = ["zookeeper_server"]

REPO = Path(__file__).resolve().parents[2]
CYCLE = {"A": "C", "B": "A", "C": "B"}
#: Seconds a killed holder keeps the lock: the SQLite lease, or the ZooKeeper session timeout.
EXPIRY = {"sqlite": 1.5, "zookeeper": 2.0}
#: Allowed delay past the expiry: the others' polling, ZooKeeper's expiry tick (0.5 s), a loaded machine.
SLACK = 3.0


@dataclass(frozen=True)
class Backend:
    kind: str
    locks: str
    checkpoints: str


@pytest.fixture(params=["sqlite", "zookeeper"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/coordination.db"
        return Backend("sqlite", url, url)
    server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    root = f"converge-test/{uuid.uuid4().hex}"
    return Backend(
        "zookeeper", f"zookeeper://{server.hosts}/{root}/jobs", f"zookeeper://{server.hosts}/{root}/cp"
    )


@dataclass
class Turn:
    round: int
    job: str
    pid: int
    start: float
    end: float | None
    seen: str | None


class Cycle:
    """Starts the job processes of one test and reads what they recorded."""

    def __init__(self, backend: Backend, tmp_path: Path, rounds: int) -> None:
        self.backend = backend
        self.record = tmp_path / "turns.db"
        self.rounds = rounds
        self.domain = f"table-{uuid.uuid4().hex[:8]}"
        self.procs: list[subprocess.Popen[bytes]] = []
        open_record(str(self.record)).close()

    def start(self, job: str, hang_at_round: int = 0) -> subprocess.Popen[bytes]:
        cmd = [
            sys.executable, "-m", "tests.jobs.coordinator_worker",
            "--locks", self.backend.locks, "--checkpoints", self.backend.checkpoints,
            "--domain", self.domain, "--job", job, "--predecessor", CYCLE[job], "--start-with", "A",
            "--rounds", str(self.rounds), "--record", str(self.record),
            "--hang-at-round", str(hang_at_round),
            "--lease", str(EXPIRY["sqlite"]), "--session-timeout", str(EXPIRY["zookeeper"]),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE)
        self.procs.append(proc)
        return proc

    def turns(self) -> list[Turn]:
        db = sqlite3.connect(self.record, timeout=30.0)
        try:
            rows = db.execute("SELECT round, job, pid, start, end, seen FROM turns ORDER BY start").fetchall()
        finally:
            db.close()
        return [Turn(*row) for row in rows]

    def wait_for(self, predicate: object, timeout: float = 60.0) -> list[Turn]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            turns = self.turns()
            if predicate(turns):  # type: ignore[operator]
                return turns
            time.sleep(0.01)
        raise AssertionError(f"timed out; turns so far: {self.turns()}")

    def join(self, timeout: float = 90.0) -> None:
        for proc in self.procs:
            if proc.returncode is not None and proc.returncode < 0:
                continue  # killed by the test
            _, err = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, err.decode(errors="replace")[-2000:]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture()
def cycle_factory(backend: Backend, tmp_path: Path) -> Iterator[object]:
    made: list[Cycle] = []

    def make(rounds: int) -> Cycle:
        made.append(Cycle(backend, tmp_path, rounds))
        return made[-1]

    yield make
    for cycle in made:
        cycle.stop()


def _assert_cycle_order(turns: list[Turn], rounds: int) -> None:
    assert [t.round for t in turns] == list(range(1, rounds + 1)), "rounds in start order, each once"
    assert [t.job for t in turns] == ["ABC"[(r - 1) % 3] for r in range(1, rounds + 1)]


def _assert_no_overlap(turns: list[Turn]) -> None:
    for before, after in itertools.pairwise(turns):
        assert before.end is not None and before.end <= after.start, (before, after)


def test_three_jobs_take_turns_in_the_cycle(backend: Backend, cycle_factory: object) -> None:
    cycle: Cycle = cycle_factory(30)  # type: ignore[operator]
    for job in ("C", "B", "A"):  # started against the order: the order comes from the coordinator
        cycle.start(job)
    cycle.join()
    turns = cycle.turns()
    _assert_cycle_order(turns, 30)
    _assert_no_overlap(turns)
    assert len({t.pid for t in turns}) == 3
    for job in "ABC":  # each turn resumes from the job's own last checkpoint
        seen = [t.seen for t in turns if t.job == job]
        assert seen == [None] + [str(n) for n in range(1, 10)]


def test_sigkilled_holder_blocks_the_others_only_until_it_expires(
    backend: Backend, cycle_factory: object
) -> None:
    cycle: Cycle = cycle_factory(9)  # type: ignore[operator]
    cycle.start("A")
    hung = cycle.start("B", hang_at_round=5)
    cycle.start("C")
    cycle.wait_for(lambda ts: any(t.round == 5 for t in ts))
    time.sleep(0.5)  # the others keep polling against the held lock
    assert [t.round for t in cycle.turns()] == [1, 2, 3, 4, 5], "nobody ran while B held the lock"
    hung.send_signal(signal.SIGKILL)
    killed_at = time.time()
    hung.wait()
    turns = cycle.wait_for(lambda ts: any(t.round == 6 for t in ts))
    gap = next(t for t in turns if t.round == 6).start - killed_at
    expiry = EXPIRY[backend.kind]
    # the lock outlived the kill (renewed or pinged every expiry/3; loose: a loaded machine delays that) ...
    assert gap >= expiry / 4, f"lock taken {gap:.2f}s after the kill, long before the {expiry}s expiry"
    # ... and was free once the lease or session expired
    assert gap <= expiry + SLACK, f"others blocked {gap:.2f}s after the kill ({expiry}s expiry)"
    restarted = cycle.start("B")  # B's next turn (round 8) resumes from its last checkpoint
    cycle.join()
    turns = cycle.turns()
    _assert_cycle_order(turns, 9)
    killed = turns[4]
    assert killed.job == "B" and killed.end is None and killed.pid == hung.pid
    _assert_no_overlap(turns[:4])
    assert turns[3].end <= killed.start and killed_at <= turns[5].start  # type: ignore[operator]
    _assert_no_overlap(turns[5:])
    b_turns = [t for t in turns if t.job == "B"]
    assert [t.seen for t in b_turns] == [None, "1", "1"], "round 5 never checkpointed: round 8 redoes it"
    assert b_turns[2].pid == restarted.pid
    print(f"{backend.kind}: killed holder blocked the others {gap:.2f}s (expiry {expiry}s)")
